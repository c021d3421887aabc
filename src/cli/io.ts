/** Where a command writes. `main.ts` binds it to the process; tests capture it. */
export interface CliIo {
  /** Write to standard output; resolves once the stream can take more (backpressure). */
  out(text: string): Promise<void> | void;
  /** Write to standard error. */
  err(text: string): void;
}

/**
 * How a command ended: an exit code, or the signal that interrupted it before it could do its
 * work (`main.ts` then lets the process die by that signal, as an interrupted program should, so
 * a calling shell or supervisor sees what happened).
 */
export type CliExit = number | { readonly signal: NodeJS.Signals };

/** One CLI command: its name, its help text and what it does. */
export interface CliCommand {
  readonly name: string;
  /** One line for the command list. */
  readonly summary: string;
  /** Full `--help` text (also `idmint help <command>`). */
  readonly help: string;
  /** Runs with the arguments after the command name; resolves to how it ended. */
  run(argv: readonly string[], io: CliIo): Promise<CliExit>;
}

/**
 * A failure a command has already put in one line, with the exit code it calls for: 1 when the
 * environment is at fault (a port in use, a host that does not resolve, a store that does not
 * answer), 2 when the invocation or configuration is. `runCli` prints it after `idmint <command>:
 * `.
 */
export class CommandFailure extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CommandFailure';
    this.exitCode = exitCode;
  }
}
