// Waiting without blocking, for every layer above core (core keeps no timers).

/** Resolves after about `ms` milliseconds, without blocking the event loop. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
