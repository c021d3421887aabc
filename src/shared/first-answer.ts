// One wait for a backend that has never answered, not one per call. A start asks its backend
// several times in a row (a set's check, then its tag list; the peers' clocks, then a worker ID;
// a SQL registry's table, then its rows), and each call is bounded by the configured timeout: a
// black-holed database made every call wait it out, so a start with a 2 s timeout failed after
// 4 to 9 s. Until the backend has answered once, a failure for want of an answer stands for the
// calls made in the moment after it, so the first wait is the whole start's.

/**
 * How long a failure answers the calls after it (ZooKeeper's registry reuses a failed connection
 * attempt as long): the steps of a start follow each other within milliseconds, and a server
 * that keeps running (a set with one database down) tries the backend again after it.
 */
export const FAILURE_STANDS_MS = 1000;

/**
 * The calls of one adapter instance before its backend first answers. Nothing is shared between
 * instances: each database of a set waits for itself.
 */
export class FirstAnswer {
  #answered = false;
  #failure: { readonly error: unknown; readonly at: number } | undefined;
  readonly #now: () => number;

  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  /**
   * Runs `call`, or rejects at once with the failure of a call that ended within
   * {@link FAILURE_STANDS_MS} before, while the backend has never answered. `unanswered` tells
   * a failure for want of an answer (refused, timed out) from an answer (any other error, which
   * proves the backend is there, as a success does).
   */
  async run<T>(call: () => Promise<T>, unanswered: (error: unknown) => boolean): Promise<T> {
    const failure = this.#failure;
    if (!this.#answered && failure !== undefined && this.#now() - failure.at < FAILURE_STANDS_MS)
      throw failure.error;
    try {
      const result = await call();
      this.#answered = true;
      return result;
    } catch (error) {
      if (this.#answered || !unanswered(error)) this.#answered = true;
      else this.#failure = { error, at: this.#now() };
      throw error;
    }
  }

  /** True once the backend has answered a call (a success or an answer that was a refusal). */
  get answered(): boolean {
    return this.#answered;
  }
}
