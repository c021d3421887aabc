/**
 * The schedule's last events, kept in a ring so a failing seed can show how it got there without
 * the cost of keeping every event of ten thousand schedules.
 */
export class EventLog {
  readonly #size: number;
  readonly #entries: string[] = [];
  #next = 0;
  /** Events logged so far. */
  count = 0;

  constructor(size: number) {
    this.#size = size;
  }

  add(at: number, who: string, what: string): void {
    const line = `${at.toFixed(1).padStart(9)} ms  ${who.padEnd(9)} ${what}`;
    if (this.#entries.length < this.#size) this.#entries.push(line);
    else this.#entries[this.#next] = line;
    this.#next = (this.#next + 1) % this.#size;
    this.count++;
  }

  /** The events kept, oldest first. */
  lines(): string[] {
    if (this.#entries.length < this.#size) return [...this.#entries];
    return [...this.#entries.slice(this.#next), ...this.#entries.slice(0, this.#next)];
  }
}
