import { ManualClock } from '../../../src/clocks/manual-clock.ts';

/**
 * A node's clock against the registry's (virtual time): it starts at an offset and runs at a rate
 * within [1 - maxDrift, 1 + maxDrift], changed by the schedule while it runs. The node's code
 * reads `clock`, a ManualClock set to the whole ms of this clock's exact reading; a
 * generator's own `clock.sleep()` (a rare wait within one time unit) may push it on by a ms.
 * The reading goes back only when the schedule steps it back (at a restart).
 */
export class DriftClock {
  readonly clock: ManualClock;
  readonly maxDrift: number;
  /** The exact reading at registry time #at. */
  #exact: number;
  #at: number;
  #rate = 1;

  constructor(startMs: number, at: number, maxDrift: number) {
    this.clock = new ManualClock(Math.floor(startMs));
    this.maxDrift = maxDrift;
    this.#exact = startMs;
    this.#at = at;
  }

  get rate(): number {
    return this.#rate;
  }

  /** Moves the clock to registry time `at` (never backwards). */
  advanceTo(at: number): void {
    this.#exact += (at - this.#at) * this.#rate;
    this.#at = at;
    const whole = Math.floor(this.#exact);
    if (whole > this.clock.now()) this.clock.set(whole);
  }

  /**
   * A step of the wall clock by `deltaMs`. Forwards it is what a running process sees (the
   * MonotonicClock follows the wall clock forwards); backwards only a new process sees it (a
   * running one's monotonic clock hides it), so the schedule steps back only at a restart.
   */
  step(deltaMs: number): void {
    this.#exact = Math.max(0, this.#exact + deltaMs);
    this.clock.set(Math.floor(this.#exact));
  }

  /** From now on the clock runs at `rate` (clamped to the drift bound). */
  setRate(rate: number): void {
    this.#rate = Math.min(1 + this.maxDrift, Math.max(1 - this.maxDrift, rate));
  }

  /** Registry time a timer of `ms` on this host takes, at the current rate. */
  registryDelay(ms: number): number {
    return ms / this.#rate;
  }
}
