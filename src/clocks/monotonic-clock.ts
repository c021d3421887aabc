import type { Clock } from '../ports/clock.ts';
import { blockingSleep } from './sleep.ts';

/** Options for {@link MonotonicClock}. */
export interface MonotonicClockOptions {
  /**
   * How often, in ms of monotonic time, to compare with the wall clock and follow it forwards.
   * Default 1000: NTP slews by at most 0.5 ms/s, so drift between re-syncs stays below a
   * millisecond.
   */
  resyncIntervalMs?: number;
  /** Wall-clock source; injectable for tests. Default `Date.now`. */
  wallNow?: () => number;
  /** Monotonic source in ms; injectable for tests. Default `performance.now`. */
  monotonicNow?: () => number;
}

/**
 * Wall time that never goes backwards inside a process.
 *
 * Time is `anchor + performance.now()`: the monotonic timer cannot be stepped by NTP or an
 * operator, so a wall-clock step backwards cannot move IDs back at all. Once a second the clock is
 * compared with `Date.now()`: if the wall clock is ahead (drift, or a forward step) the anchor
 * moves forwards to it; if it is behind, the anchor stays, and the clock runs ahead of the wall
 * clock by `lagMs()` until the wall clock catches up. This turns every in-process rollback into
 * "time stands still relative to the wall clock", which no ID can notice. Across restarts the wall
 * clock is what counts, which is why the worker registry checks the last recorded timestamp at
 * start-up.
 */
export class MonotonicClock implements Clock {
  readonly #wallNow: () => number;
  readonly #monotonicNow: () => number;
  readonly #resyncIntervalMs: number;
  #anchor: number;
  #nextResyncAt: number;
  #last = 0;
  #lag = 0;

  constructor(options: MonotonicClockOptions = {}) {
    this.#wallNow = options.wallNow ?? Date.now;
    this.#monotonicNow = options.monotonicNow ?? performance.now.bind(performance);
    this.#resyncIntervalMs = options.resyncIntervalMs ?? 1000;
    const mono = this.#monotonicNow();
    // performance.timeOrigin is the wall time of monotonic zero with sub-ms precision; anchoring
    // on the truncated Date.now() instead would start up to 1 ms behind and make the first re-sync
    // jump forwards, skipping a millisecond of sequence space.
    const defaultSources = options.wallNow === undefined && options.monotonicNow === undefined;
    this.#anchor = defaultSources ? performance.timeOrigin : this.#wallNow() - mono;
    this.#nextResyncAt = mono + this.#resyncIntervalMs;
  }

  now(): number {
    const mono = this.#monotonicNow();
    if (mono >= this.#nextResyncAt) this.#resync(mono);
    const t = Math.floor(this.#anchor + mono);
    // Floating-point rounding of anchor + mono must not produce a millisecond below one already
    // returned; guarding here keeps the contract exact at negligible cost.
    if (t < this.#last) return this.#last;
    this.#last = t;
    return t;
  }

  sleep(ms: number): void {
    blockingSleep(ms);
  }

  /** How far, in ms, this clock currently runs ahead of the wall clock (0 when in step). */
  lagMs(): number {
    return this.#lag;
  }

  #resync(mono: number): void {
    this.#nextResyncAt = mono + this.#resyncIntervalMs;
    const wall = this.#wallNow();
    const ours = this.#anchor + mono;
    // Date.now() is truncated to the ms, so it reads up to 1 ms below the precise time; follow it
    // only when it is a whole ms ahead (real drift or a forward step), not on truncation noise.
    if (wall - ours >= 1) {
      this.#anchor = wall - mono;
      this.#lag = 0;
    } else {
      this.#lag = Math.max(0, Math.floor(ours - wall));
    }
  }
}
