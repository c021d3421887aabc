import assert from 'node:assert/strict';

/**
 * Polls `read` every 100 ms until `done` accepts its result, and resolves with it; fails the test
 * after `timeoutMs`, naming `what` and the last value read. For what a server does on timers of
 * its own (a status sampler, a tag refresh, a lease renewal) and tells nothing of.
 */
export async function until<T>(
  read: () => Promise<T> | T,
  done: (value: T) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (performance.now() > deadline)
      assert.fail(`${what}: not within ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
