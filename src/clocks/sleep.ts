// One shared buffer per module is fine here: Atomics.wait on it never changes it, it is only the
// thing to wait on, so instances cannot interfere through it.
const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/**
 * Block the thread for about `ms` milliseconds without burning CPU. For waits under 2 ms it
 * returns at once: Atomics.wait overshoots by up to a millisecond, which would cost a whole time
 * unit of IDs when waiting for the next millisecond, so the caller spins on `now()` instead.
 */
export function blockingSleep(ms: number): void {
  if (ms >= 2) Atomics.wait(sleepCell, 0, 0, ms - 1);
}
