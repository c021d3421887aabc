import { isIdMintError } from '../core/errors.ts';
import { configCommand } from './commands/config.ts';
import { dbCommand } from './commands/db.ts';
import { decodeCommand } from './commands/decode.ts';
import { nextCommand } from './commands/next.ts';
import { serveCommand } from './commands/serve.ts';
import { tagsCommand } from './commands/tags.ts';
import { EXIT_FAILURE, EXIT_USAGE } from './exit-codes.ts';
import { CommandFailure, type CliCommand, type CliExit, type CliIo } from './io.ts';

const COMMANDS: readonly CliCommand[] = [
  serveCommand,
  tagsCommand,
  dbCommand,
  nextCommand,
  decodeCommand,
  configCommand,
];

export { EXIT_FAILURE, EXIT_USAGE };
/** Errors that mean the command was invoked wrongly (arguments, flags, configuration). */
const USAGE_CODES: ReadonlySet<string> = new Set([
  'INVALID_ARGUMENT',
  'INVALID_ID',
  'LAYOUT_INVALID',
  'CONFIG_INVALID',
]);

function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  return `Usage: idmint <command> [options]

Commands:
${COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`).join('\n')}

Run "idmint <command> --help" (or "idmint help <command>") for a command's options.
`;
}

function unknownCommand(io: CliIo, name: string): number {
  io.err(
    `idmint: unknown command "${name}"; commands: ${COMMANDS.map((c) => c.name).join(', ')} ` +
      `(see idmint --help)\n`,
  );
  return EXIT_USAGE;
}

/** Runs the CLI with `argv` (without node and script) and resolves to how it ended. */
export async function runCli(
  argv: readonly string[],
  io: CliIo,
  version: string,
): Promise<CliExit> {
  const [name, ...rest] = argv;
  if (name === 'help' && rest.length > 0) {
    // `idmint help serve` is `idmint serve --help`: the same text, from the same place.
    const command = COMMANDS.find((c) => c.name === rest[0]);
    if (command === undefined || rest.length > 1) return unknownCommand(io, rest.join(' '));
    await io.out(`${command.help}\n`);
    return 0;
  }
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    await io.out(usage());
    return name === undefined ? EXIT_USAGE : 0;
  }
  if (name === '--version' || name === '-v') {
    await io.out(`${version}\n`);
    return 0;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined) return unknownCommand(io, name);
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (error instanceof CommandFailure) {
      io.err(`idmint ${name}: ${error.message}\n`);
      return error.exitCode;
    }
    if (isIdMintError(error)) {
      io.err(`idmint ${name}: ${error.message}\n`);
      return USAGE_CODES.has(error.code) ? EXIT_USAGE : EXIT_FAILURE;
    }
    throw error;
  }
}
