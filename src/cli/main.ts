// The `idmint` executable: binds the CLI to this process's streams, exit code and signals.
import { readFileSync } from 'node:fs';
import { runCli } from './cli.ts';
import type { CliIo } from './io.ts';

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

const io: CliIo = {
  out: (text) =>
    new Promise<void>((resolve, reject) => {
      process.stdout.write(text, (error) => (error ? reject(error) : resolve()));
    }),
  err: (text) => {
    process.stderr.write(text);
  },
};

// `idmint next | head` closes the pipe early; that is the reader's choice, not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

try {
  process.exitCode = await runCli(process.argv.slice(2), io, version);
} catch (error) {
  process.stderr.write(`idmint: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
}
