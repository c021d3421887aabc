import { spawn, type ChildProcess } from 'node:child_process';
import { IDMINT_BIN } from './cli.ts';

/** How an `idmint serve` process ended: its exit code, or the signal that ended it. */
export interface ServeExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** An `idmint serve` process, from the moment it is started. */
export interface ServeChild {
  readonly child: ChildProcess;
  /** Every JSON log line the process wrote to stdout so far. */
  readonly logs: Record<string, unknown>[];
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** Resolves when the process has ended and closed its pipes. */
  readonly exited: Promise<ServeExit>;
  /**
   * Resolves with the first log line `match` accepts (already written or to come); rejects if the
   * process ends first.
   */
  logLine(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  /**
   * Sends `signal` (to the whole process group when started with `group`, as a terminal's
   * Ctrl-C does) unless the process has ended, and resolves with how it ended.
   */
  kill(signal?: NodeJS.Signals): Promise<ServeExit>;
}

/** An `idmint serve` process started as a user would, listening on a port of its own choosing. */
export interface ServeProcess extends ServeChild {
  /** `http://127.0.0.1:<port>`, from the "idmint listening" log line. */
  readonly url: string;
  /** {@link ServeChild.kill}, resolving with the exit code only (null when killed by a signal). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** How long a signalled server may take to end before the test kills it (well past a drain). */
const STOP_BOUND_MS = 60_000;

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
  /**
   * Run in a process group of its own, so kill() signals the group (as a terminal's Ctrl-C does).
   */
  readonly group?: boolean;
}

/**
 * Runs `idmint serve --port 0 --host 127.0.0.1 <args>` and returns at once, without waiting for
 * it to listen: for watching start-up itself (failures, signals while it starts).
 */
export function spawnServe(args: readonly string[] = [], options: ServeOptions = {}): ServeChild {
  const [file, ...prefix] = options.command ?? [process.execPath, IDMINT_BIN, 'serve'];
  const group = options.group === true || options.command !== undefined;
  const child = spawn(
    file ?? process.execPath,
    [...prefix, '--port', '0', '--host', '127.0.0.1', ...args],
    {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: group,
    },
  );
  const logs: Record<string, unknown>[] = [];
  const waiting = new Set<(line: Record<string, unknown>) => void>();
  let stderr = '';
  let pending = '';
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
      for (const notify of waiting) notify(entry);
    }
  });
  // 'close', not 'exit': it waits for every process writing to the pipes (npm's child too).
  const exited = new Promise<ServeExit>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    logs,
    exited,
    stderr: () => stderr,
    logLine(match) {
      const found = logs.find(match);
      if (found !== undefined) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const notify = (line: Record<string, unknown>) => {
          if (!match(line)) return;
          waiting.delete(notify);
          resolve(line);
        };
        waiting.add(notify);
        void exited.then((how) => {
          if (!waiting.delete(notify)) return;
          reject(
            new Error(
              `idmint serve ended (${how.signal ?? how.code}) before the log line awaited; ` +
                `stderr: ${stderr}`,
            ),
          );
        });
      });
    },
    kill(signal = 'SIGTERM') {
      const send = (sig: NodeJS.Signals) => {
        if (group && child.pid !== undefined) process.kill(-child.pid, sig);
        else child.kill(sig);
      };
      if (child.exitCode === null && child.signalCode === null) send(signal);
      // 'close' waits for every process holding the pipes: a server left behind by a wrapper
      // that exited (npm) would hang the test, and CI, for good. Past the bound the group is
      // killed, and the test sees the SIGKILL and this line in stderr, not a hang.
      const guard = setTimeout(() => {
        stderr += `[test] still running ${STOP_BOUND_MS} ms after ${signal}: SIGKILL\n`;
        try {
          send('SIGKILL');
        } catch {
          // Gone meanwhile.
        }
      }, STOP_BOUND_MS);
      return exited.finally(() => clearTimeout(guard));
    },
  };
}

/** The URL a started server listens on, once it says so; undefined if it ends first (refused). */
export function listeningUrl(serve: ServeChild): Promise<string | undefined> {
  return serve
    .logLine((line) => line['msg'] === 'idmint listening')
    .then(
      (line) => String(line['url']),
      () => undefined,
    );
}

/**
 * Runs `idmint serve --port 0 --host 127.0.0.1 <args>` and resolves once it logs that it listens.
 * Rejects with the process's stderr if it exits first or does not listen within `timeoutMs`.
 */
export async function startServe(
  args: readonly string[] = [],
  options: ServeOptions = {},
): Promise<ServeProcess> {
  const serve = spawnServe(args, options);
  const timeoutMs = options.timeoutMs ?? 30_000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const listening = await Promise.race([
      serve.logLine((line) => line['msg'] === 'idmint listening'),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          serve.child.kill('SIGKILL');
          reject(
            new Error(
              `idmint serve did not listen within ${timeoutMs} ms; stderr: ${serve.stderr()}`,
            ),
          );
        }, timeoutMs);
      }),
    ]);
    return {
      ...serve,
      url: String(listening['url']),
      stop: async (signal) => (await serve.kill(signal)).code,
    };
  } finally {
    clearTimeout(timer);
  }
}
