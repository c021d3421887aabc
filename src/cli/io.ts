/** Where a command writes. `main.ts` binds it to the process; tests capture it. */
export interface CliIo {
  /** Write to standard output; resolves once the stream can take more (backpressure). */
  out(text: string): Promise<void> | void;
  /** Write to standard error. */
  err(text: string): void;
}

/** One CLI command: its name, its help text and what it does. */
export interface CliCommand {
  readonly name: string;
  /** One line for the command list. */
  readonly summary: string;
  /** Full `--help` text. */
  readonly help: string;
  /** Runs with the arguments after the command name; resolves to the exit code. */
  run(argv: readonly string[], io: CliIo): Promise<number>;
}
