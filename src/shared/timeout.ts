import type { TimerHandle, Timers } from '../ports/timers.ts';
import { systemTimers } from './time.ts';

/**
 * Settles like `promise`, or rejects with `onTimeout()` once `ms` have passed, whichever comes
 * first (`ms` on `timers`, the host's by default). The timer is cleared as soon as the race is
 * decided, and a late settlement of `promise` is observed (never an unhandled rejection) and
 * ignored: a caller that timed out must treat the outcome as unknown.
 */
export function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  onTimeout: () => Error,
  timers: Timers = systemTimers,
): Promise<T> {
  let timer: TimerHandle | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = timers.setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => timers.clearTimeout(timer));
}

/**
 * {@link withTimeout} for work that can be cancelled: `run` gets a signal that aborts with the
 * timeout error when `ms` pass first, so it can drop what it holds (a SQL driver destroys the
 * connection, and the database rolls back what it has not committed).
 */
export function withDeadline<T>(
  ms: number,
  onTimeout: () => Error,
  run: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  return withTimeout(run(controller.signal), ms, () => {
    const error = onTimeout();
    controller.abort(error);
    return error;
  });
}
