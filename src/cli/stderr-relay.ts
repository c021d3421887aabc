import type { Readable } from 'node:stream';

/** A line longer than this is relayed in pieces and kept only this long as an error. */
const MAX_LINE = 4096;

/**
 * A line a failing idmint child prints as its cause: the CLI's one-line failures (`idmint serve:
 * ...`, `idmint: unexpected error: ...`) and the message line of Node's report of an uncaught
 * exception (`TypeError: ...`), not its stack frames, source excerpt or version trailer.
 */
const ERROR_LINE = /^(idmint\b|[A-Za-z]*(Error|Exception)\b)/;

/**
 * Relays a child's stderr to this process's, whole lines at a time (so two children's lines never
 * interleave mid-line), and remembers the child's last error line: the supervisor names it as the
 * cause when the child keeps failing.
 */
export class StderrRelay {
  #pending = '';
  #lastError: string | undefined;
  readonly #write: (text: string) => void;

  constructor(
    stream: Readable,
    write: (text: string) => void = (text) => void process.stderr.write(text),
  ) {
    this.#write = write;
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => this.#take(chunk));
    stream.on('end', () => {
      if (this.#pending !== '') this.#line(this.#pending);
      this.#pending = '';
    });
  }

  /** The last error line the child printed, if any. */
  get lastError(): string | undefined {
    return this.#lastError;
  }

  #take(chunk: string): void {
    const lines = (this.#pending + chunk).split('\n');
    this.#pending = lines.pop() ?? '';
    for (const line of lines) this.#line(line);
    while (this.#pending.length > MAX_LINE) {
      this.#line(this.#pending.slice(0, MAX_LINE));
      this.#pending = this.#pending.slice(MAX_LINE);
    }
  }

  #line(line: string): void {
    this.#write(`${line}\n`);
    if (ERROR_LINE.test(line)) this.#lastError = line.slice(0, MAX_LINE);
  }
}
