import { spawn } from 'node:child_process';
import { basename, extname } from 'node:path';

/** A draw script running in an OS process of its own, held at a barrier. */
export interface DrawProcess {
  /** Resolves once the script is set up (it wrote `ready` on stderr), or once it has exited. */
  readonly ready: Promise<void>;
  /** Lets it draw (writes `go` to its stdin). */
  go(): void;
  /** The lines it printed; rejects with its stderr when it exits with another code than 0. */
  readonly lines: Promise<string[]>;
}

/**
 * Starts `script` (a test/support draw script) with `args` in a process of its own. Uniqueness
 * across processes is tested with several of these, each let go at once.
 */
export function drawProcess(script: string, args: readonly string[]): DrawProcess {
  const child = spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', script, ...args],
    { stdio: ['pipe', 'pipe', 'pipe'], timeout: 120_000 },
  );
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let ready!: () => void;
  const readiness = new Promise<void>((resolve) => (ready = resolve));
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => {
    err.push(chunk);
    if (Buffer.concat(err).toString().includes('ready\n')) ready();
  });
  const name = basename(script, extname(script));
  const lines = new Promise<string[]>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`${name} exited ${code}: ${Buffer.concat(err).toString()}`));
      else resolve(Buffer.concat(out).toString().trimEnd().split('\n'));
    });
  });
  // A process that dies before it is ready must fail the test, not hang it.
  return {
    ready: Promise.race([readiness, lines.then(() => undefined)]),
    go: () => child.stdin.end('go\n'),
    lines,
  };
}
