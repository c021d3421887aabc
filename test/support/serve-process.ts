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
  /**
   * Sends `signal` (to the whole process group when started with `group`, as a terminal's
   * Ctrl-C does) and resolves with the exit code (null when killed by a signal).
   */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** How {@link startServe} runs the server. */
export interface ServeOptions {
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  readonly timeoutMs?: number;
  /**
   * Another command line that ends up running `idmint serve` (such as `npm start --`); it gets
   * the `--port 0 --host 127.0.0.1` and `args` appended, and its own process group.
   */
  readonly command?: readonly string[];
}

/**
 * Runs `idmint serve --port 0 --host 127.0.0.1 <args>` and resolves once it logs that it listens.
 * Rejects with the process's stderr if it exits first or does not listen within `timeoutMs`.
 */
export function startServe(args: readonly string[] = [], options: ServeOptions = {}): Promise<ServeProcess> {
  const [file, ...prefix] = options.command ?? [process.execPath, IDMINT_BIN, 'serve'];
  const group = options.command !== undefined;
  const child = spawn(file ?? process.execPath, [...prefix, '--port', '0', '--host', '127.0.0.1', ...args], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: group,
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  let pending = '';
  // 'close', not 'exit': it waits for every process writing to the pipes (npm's child too).
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
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
        // The server's lines are JSON; a wrapper such as npm may print lines of its own.
        if (!line.startsWith('{')) continue;
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
              if (child.exitCode === null && child.signalCode === null) {
                if (group && child.pid !== undefined) process.kill(-child.pid, signal);
                else child.kill(signal);
              }
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
