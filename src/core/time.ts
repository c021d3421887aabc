// Pure facts about time that every layer shares. Nothing here reads a clock (core takes its time
// from the Clock port) or sets a timer.

/** `ms` since the epoch as an ISO 8601 string, or the number itself when it is no valid date. */
export function iso(ms: number): string {
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? String(ms) : date.toISOString();
}

/**
 * The longest delay Node's timers honour: 2^31-1 ms (about 24.8 days). A longer one is clamped to
 * 1 ms with only a warning, so a 30-day interval would fire a thousand times a second. Every
 * configurable delay that ends up in a timer is bounded by this.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;
