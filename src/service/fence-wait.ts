import type { TimerHandle, Timers } from '../ports/timers.ts';

/**
 * One request's wait for a fenced generator's lease to be confirmed, bounded by `waitTimeoutMs`
 * in all (however many transitions it waits through). Created only once a request has been
 * refused (LEASE_LOST), so the path that issues at once never makes one.
 *
 * The wait decides nothing about issuing: after each {@link settled}, the caller asks the
 * generator again, and the generator alone judges whether its fence (validUntil) allows it. A
 * wait can only delay a refusal, never turn one into an ID the fence forbids.
 */
export class FenceWait {
  readonly #confirmation: () => Promise<void> | undefined;
  readonly #timers: Timers;
  readonly #onFirstWait: () => void;
  readonly #timer: TimerHandle | undefined;
  readonly #expiry: Promise<void>;
  #expired: boolean;
  #waited = false;

  /**
   * @param confirmation the transition that may confirm the lease, or undefined when there is
   *   nothing to wait for (LeaseHolder.confirmation)
   * @param onFirstWait called once, when the request first waits (for the metric)
   */
  constructor(
    confirmation: () => Promise<void> | undefined,
    waitTimeoutMs: number,
    timers: Timers,
    onFirstWait: () => void,
  ) {
    this.#confirmation = confirmation;
    this.#onFirstWait = onFirstWait;
    this.#timers = timers;
    let expire!: () => void;
    this.#expiry = new Promise((resolve) => (expire = resolve));
    // 0: no wait at all, the refusal stands at once (as before waits existed).
    this.#expired = waitTimeoutMs === 0;
    if (this.#expired) return;
    this.#timer = timers.setTimeout(() => {
      this.#expired = true;
      expire();
    }, waitTimeoutMs);
    this.#timer.unref?.();
  }

  /**
   * Waits for the transition that may confirm the lease, or the end of the wait, whichever comes
   * first: true when the caller should ask the generator once more, false when waiting is over
   * (the time is up, or the lease is lost, closed or failing to renew).
   */
  async settled(): Promise<boolean> {
    if (this.#expired) return false;
    const confirmation = this.#confirmation();
    if (confirmation === undefined) return false;
    if (!this.#waited) {
      this.#waited = true;
      this.#onFirstWait();
    }
    await Promise.race([confirmation, this.#expiry]);
    return true;
  }

  /** Ends the wait: its timer is cleared. */
  end(): void {
    this.#timers.clearTimeout(this.#timer);
  }
}
