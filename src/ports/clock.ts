/**
 * Where idmint reads time. Core code never calls `Date.now()`: it takes a Clock, so tests can
 * move time forwards and backwards deterministically (ManualClock) and production can choose how
 * wall time is followed (MonotonicClock, SystemClock).
 */
export interface Clock {
  /** Milliseconds since the Unix epoch, as an integer. */
  now(): number;
  /**
   * Block the calling thread for about `ms` milliseconds (`ms` >= 1). Called only on rare paths:
   * waiting out a small clock rollback or a sequence exhausted for the current time unit. A clock
   * may return early (the caller re-reads `now()` and loops), so sleeping less is safe; a manual
   * clock advances itself by `ms` instead of blocking.
   */
  sleep(ms: number): void;
}
