import type { Clock } from '../ports/clock.ts';
import { MonotonicClock } from './monotonic-clock.ts';
import { SystemClock } from './system-clock.ts';

/**
 * The clocks a configuration can name (`snowflake.clock`):
 * - `monotonic` (default): wall time that never goes back inside the process; a step of the system
 *   clock backwards is absorbed, so no rollback ever reaches the policy while the server runs.
 * - `system`: `Date.now()` as it is; every step backwards reaches the rollback policy.
 * docs/layouts.md#choosing-the-clock explains the trade-off.
 */
export const CLOCK_NAMES = ['monotonic', 'system'] as const;
export type ClockName = (typeof CLOCK_NAMES)[number];

/** A new clock of the kind `name` says. */
export function clockNamed(name: ClockName): Clock {
  return name === 'system' ? new SystemClock() : new MonotonicClock();
}
