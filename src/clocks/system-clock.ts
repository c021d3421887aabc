import type { Clock } from '../ports/clock.ts';
import { blockingSleep } from './sleep.ts';

/**
 * The operating system's wall clock, `Date.now()`, as it is: an NTP step backwards shows up as
 * time going backwards, and the generator's rollback policy decides what to do. Prefer
 * MonotonicClock unless you want every wall-clock step to be visible.
 */
export class SystemClock implements Clock {
  now(): number {
    return Date.now();
  }

  sleep(ms: number): void {
    blockingSleep(ms);
  }
}
