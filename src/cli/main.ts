// The `idmint` executable: binds the CLI to this process's streams, exit code and signals.
import { readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { runCli } from './cli.ts';
import type { CliIo } from './io.ts';

const { version } = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
) as { version: string };

/** Set once the reader of stdout has gone (`idmint next | head`): every later write fails. */
let stdoutClosed: NodeJS.ErrnoException | undefined;

const io: CliIo = {
  out: (text) =>
    new Promise<void>((resolve, reject) => {
      if (stdoutClosed !== undefined) return reject(stdoutClosed);
      process.stdout.write(text, (error) => {
        if (error === null || error === undefined) return resolve();
        if ((error as NodeJS.ErrnoException).code === 'EPIPE') stdoutClosed = error;
        reject(error);
      });
    }),
  err: (text) => {
    process.stderr.write(text);
  },
};

// `idmint next | head` closes the pipe early; that is the reader's choice, not an error. The
// command's next write then fails, and it winds down as on any failure (idmint next releases its
// worker ID) before the process exits 0, instead of exiting here with its lease still held.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  stdoutClosed = error;
});

/** True for the failed write of a closed stdout. */
function isClosedStdout(error: unknown): boolean {
  return stdoutClosed !== undefined && (error as NodeJS.ErrnoException | null)?.code === 'EPIPE';
}

/** Resolves once everything written to `stream` so far has been handed to the OS. */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => stream.write('', () => resolve()));
}

let code: number;
try {
  const result = await runCli(process.argv.slice(2), io, version);
  if (typeof result !== 'number') {
    // Interrupted before the work was done: die by the signal, as an interrupted program should,
    // so a calling shell stops and a supervisor sees a stop, not a failure. (128 + the signal's
    // number is what a shell reports either way, should the signal not end the process at once.)
    await flushed(process.stderr);
    process.removeAllListeners(result.signal);
    process.kill(process.pid, result.signal);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    process.exit(128 + (constants.signals[result.signal] ?? 0));
  }
  code = result as number;
} catch (error) {
  if (isClosedStdout(error)) {
    code = 0;
  } else {
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    process.stderr.write(`idmint: unexpected error: ${text}\n`);
    code = 1;
  }
}
// The command is done: exit now, even if a driver left a socket or timer behind that its bounded
// close() could not end. Nothing may keep a finished command's process alive.
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
process.exit(code);
