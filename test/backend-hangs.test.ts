// A store or registry that accepts connections but never answers must not hang idmint: every call
// fails within its timeout, and close() ends every connection within a bound, so nothing keeps
// the process alive. (Before: a Redis store's close() waited for QUIT's reply forever, and a
// ZooKeeper registry left its socket open after close().)
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { isIdMintError } from '../src/core/errors.ts';
import { openWorkerRegistry } from '../src/backends/open-worker-registry.ts';
import { openSegmentStore } from '../src/backends/open-segment-store.ts';
import { BlackHole } from './support/black-hole.ts';

/**
 * The call's timeout; bounds below are generous multiples of it (a loaded machine is slow), a hang
 * is forever.
 */
const TIMEOUT_MS = 300;
const BOUND_MS = 5000;

/**
 * Settles like `promise`, or rejects when it has not settled within `ms`: a hang becomes a failure.
 */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
    }),
  ]);
}

describe('a backend that accepts connections but never answers', () => {
  // One per test: a connection one test leaves open must not be blamed on the next.
  let hole: BlackHole;
  beforeEach(async () => {
    hole = await BlackHole.start();
  });
  afterEach(() => hole.close());

  for (const scheme of ['redis', 'postgres', 'mysql']) {
    it(`${scheme} store: calls fail within their timeout, close() ends connections`, async () => {
      const url =
        scheme === 'redis' ? `redis://${hole.address}/0` : `${scheme}://idmint@${hole.address}/ids`;
      const store = await openSegmentStore(url, { timeoutMs: TIMEOUT_MS });
      await within(
        assert.rejects(store.listTags(), (error) => isIdMintError(error, 'STORE_UNAVAILABLE')),
        BOUND_MS,
        'listTags',
      );
      assert.ok(hole.accepted > 0, 'the store did connect to the black hole');
      await within(store.close(), BOUND_MS, 'close()');
      await hole.whenAllClosed(BOUND_MS);
    });
  }

  for (const scheme of ['redis', 'zookeeper', 'etcd', 'postgres', 'mysql']) {
    it(`${scheme} registry: acquire fails within its timeout, close() ends them`, async () => {
      const url =
        scheme === 'redis'
          ? `redis://${hole.address}/0`
          : scheme === 'zookeeper' || scheme === 'etcd'
            ? `${scheme}://${hole.address}/hang`
            : `${scheme}://idmint@${hole.address}/ids`;
      const registry = await openWorkerRegistry(url, { operationTimeoutMs: TIMEOUT_MS });
      await within(
        assert.rejects(
          registry.acquire({ identity: { host: 'test', port: 1 }, maxWorkers: 1024 }),
          (error) => isIdMintError(error, 'REGISTRY_UNAVAILABLE'),
        ),
        BOUND_MS,
        'acquire',
      );
      assert.ok(hole.accepted > 0, 'the registry did connect to the black hole');
      await within(registry.close(), BOUND_MS, 'close()');
      // grpc-js (under etcd3) lets a connection attempt that never got an HTTP/2 answer run on
      // after the channel closes; its socket is unreferenced, so it holds no process open (the
      // serve test in cli-startup.test.ts shows the process exits). Every other driver closes.
      if (scheme !== 'etcd') await hole.whenAllClosed(BOUND_MS);
    });
  }
});
