import type { Clock } from '../ports/clock.ts';

/**
 * A clock that moves only when told to, for deterministic tests: jump forwards, roll back, or let
 * sleeps advance it. `sleep(ms)` advances time by `ms` instead of blocking, so code that waits for
 * the clock makes progress without real waiting.
 */
export class ManualClock implements Clock {
  #now: number;
  /** Total ms passed to `sleep()`, so tests can assert how long code chose to wait. */
  sleptMs = 0;

  constructor(startMs: number) {
    this.#now = checkTime(startMs);
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number): void {
    this.sleptMs += ms;
    this.#now += Math.max(1, Math.ceil(ms));
  }

  /** Set the time to `ms` (may be in the past: a rollback). */
  set(ms: number): void {
    this.#now = checkTime(ms);
  }

  /** Move time by `deltaMs` (negative to roll back). */
  advance(deltaMs: number): void {
    this.#now = checkTime(this.#now + deltaMs);
  }
}

function checkTime(ms: number): number {
  if (!Number.isSafeInteger(ms) || ms < 0)
    throw new RangeError(`ManualClock time must be a non-negative integer of ms, got ${ms}`);
  return ms;
}
