import { spawn, type ChildProcess } from 'node:child_process';
import { IDMINT_BIN } from './cli.ts';

/** An `idmint serve` process started as a user would, listening on a port of its own choosing. */
export interface ServeProcess {
  /** `http://127.0.0.1:<port>`, from the "idmint listening" log line. */
  readonly url: string;
  readonly child: ChildProcess;
  /** Every JSON log line the process wrote to stdout so far. */
  readonly logs: Record<string, unknown>[];
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** Sends `signal` and resolves with the exit code (null when killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Runs `idmint serve --port 0 --host 127.0.0.1 <args>` and resolves once it logs that it listens.
 * Rejects with the process's stderr if it exits first or does not listen within `timeoutMs`.
 */
export function startServe(args: readonly string[] = [], options: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, [IDMINT_BIN, 'serve', '--port', '0', '--host', '127.0.0.1', ...args], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  let pending = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`idmint serve did not listen within ${options.timeoutMs ?? 30_000} ms; stderr: ${stderr}`));
    }, options.timeoutMs ?? 30_000);
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (line.trim() === '') continue;
        const entry = JSON.parse(line) as Record<string, unknown>;
        logs.push(entry);
        if (entry['msg'] === 'idmint listening') {
          clearTimeout(timer);
          resolve({
            url: String(entry['url']),
            child,
            logs,
            stderr: () => stderr,
            stop(signal = 'SIGTERM') {
              if (child.exitCode === null && child.signalCode === null) child.kill(signal);
              return exited;
            },
          });
        }
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`idmint serve exited with ${code} before listening; stderr: ${stderr}`));
    });
  });
}
