import { isIdMintError } from '../core/errors.ts';
import { configCommand } from './commands/config.ts';
import { dbCommand } from './commands/db.ts';
import { decodeCommand } from './commands/decode.ts';
import { nextCommand } from './commands/next.ts';
import { serveCommand } from './commands/serve.ts';
import { tagsCommand } from './commands/tags.ts';
import type { CliCommand, CliIo } from './io.ts';

const COMMANDS: readonly CliCommand[] = [serveCommand, tagsCommand, dbCommand, nextCommand, decodeCommand, configCommand];

/** Exit code for bad usage (unknown command or flag, malformed value), as most CLIs use. */
export const EXIT_USAGE = 2;
/** Errors that mean the command was invoked wrongly (arguments, flags, configuration). */
const USAGE_CODES: ReadonlySet<string> = new Set(['INVALID_ARGUMENT', 'INVALID_ID', 'LAYOUT_INVALID', 'CONFIG_INVALID']);
/** Exit code for a failure while doing the work (clock refused, store down, ...). */
export const EXIT_FAILURE = 1;

function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  return `Usage: idmint <command> [options]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`).join('\n')}

Run "idmint <command> --help" for a command's options.
`;
}

/** Runs the CLI with `argv` (without node and script) and resolves to the exit code. */
export async function runCli(argv: readonly string[], io: CliIo, version: string): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    await io.out(usage());
    return name === undefined ? EXIT_USAGE : 0;
  }
  if (name === '--version' || name === '-v') {
    await io.out(`${version}\n`);
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined) {
    io.err(`idmint: unknown command "${name}"; commands: ${COMMANDS.map((c) => c.name).join(', ')} (see idmint --help)\n`);
    return EXIT_USAGE;
  }
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (isIdMintError(error)) {
      io.err(`idmint ${name}: ${error.message}\n`);
      return USAGE_CODES.has(error.code) ? EXIT_USAGE : EXIT_FAILURE;
    }
    throw error;
  }
}
