/**
 * Where the code that runs over time (service/: lease renewals, their timeouts, waits for the
 * clock) schedules its callbacks. Production uses the host's timers (`systemTimers` in
 * shared/time.ts); the deterministic simulation (test/support/sim/) fires them in virtual time,
 * in an order a seed chooses, so the real lease logic runs under thousands of schedules.
 */

/** What {@link Timers.setTimeout} returns: opaque, given back to clearTimeout. */
export interface TimerHandle {
  /** Host timers only: the timer does not keep the process alive. */
  unref?(): unknown;
}

export interface Timers {
  /** Calls `callback` once, about `ms` milliseconds (of the host's time) from now. */
  setTimeout(callback: () => void, ms: number): TimerHandle;
  /** Cancels a timer not yet fired; a fired, cancelled or undefined handle is ignored. */
  clearTimeout(handle: TimerHandle | undefined): void;
}
