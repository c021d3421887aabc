// Waiting without blocking, for every layer above core (core keeps no timers).
import type { TimerHandle, Timers } from '../ports/timers.ts';

/** The host's timers: what every caller gets unless a test injects virtual ones. */
export const systemTimers: Timers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle: TimerHandle | undefined) =>
    clearTimeout(handle as ReturnType<typeof setTimeout> | undefined),
};

/** Resolves after about `ms` milliseconds, without blocking the event loop. */
export function sleep(ms: number, timers: Timers = systemTimers): Promise<void> {
  return new Promise((resolve) => timers.setTimeout(resolve, ms));
}
