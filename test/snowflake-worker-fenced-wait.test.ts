import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import { IdMintError, isIdMintError } from '../src/core/errors.ts';
import { decomposeId, getLayout } from '../src/core/layout.ts';
import { SnowflakeWorker, type SnowflakeWorkerOptions } from '../src/service/snowflake-worker.ts';
import { FaultyRegistry } from './support/faulty-registry.ts';
import { delay, sqliteRegistry, tempDir, waitFor } from './support/workers.ts';

// A request that finds the generator fenced while its lease is still this node's to confirm (a
// stall of the process outran the renewal) waits for the renewal instead of answering LEASE_LOST
// at once; a lease that is lost, or a renewal that fails, still ends in LEASE_LOST. The manual
// clock stands for the stall: set past the fence while the renewal is held on its way.

const T0 = Date.UTC(2026, 5, 1, 12);
const layout = getLayout('idmint');
/** ttl 1000 - margin 200: the fence is 800 ms after the renewal that set it was sent. */
const fast = { renewIntervalMs: 50, safetyMarginMs: 200 } as const;

let dir: { path: string; dispose(): Promise<void> };
let files = 0;
before(async () => {
  dir = await tempDir('fenced-wait');
});
after(async () => {
  await dir?.dispose();
});

async function setup(options: Partial<SnowflakeWorkerOptions> & { ttlMs?: number } = {}) {
  const { ttlMs = 1000, ...rest } = options;
  const file = join(dir.path, `registry-${++files}.db`);
  const registry = new FaultyRegistry(await sqliteRegistry(file, { ttlMs }));
  const clock = new ManualClock(T0);
  const worker = await SnowflakeWorker.start({
    registry,
    clock,
    identity: { host: '10.0.0.1', port: 8080 },
    ...fast,
    ...rest,
  });
  const dispose = async () => {
    registry.openAll();
    await worker.close().catch(() => {});
    await registry.close();
  };
  return { registry, clock, worker, dispose };
}

/**
 * A worker "stalled" past its fence: after one ID (`before`), its next renewal is held on its way
 * (`renewal`) and the clock set to the fence, as a process that stopped while the renewal was due.
 */
async function stalledWithRenewalInFlight(options: Parameters<typeof setup>[0]) {
  const env = await setup(options);
  const before = env.worker.next();
  const renewal = env.registry.hold('renew');
  await renewal.reached;
  env.clock.set(env.worker.state().validUntil);
  return { ...env, renewal, before };
}

/** Tracks a promise's outcome without awaiting it. */
function watch<T>(promise: Promise<T>) {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  const done = promise.then(
    (value) => {
      state.value = value;
      state.settled = true;
    },
    (error: unknown) => {
      state.error = error;
      state.settled = true;
    },
  );
  return { state, done };
}

const leaseLost = (error: unknown) => isIdMintError(error, 'LEASE_LOST');

describe('SnowflakeWorker: a fenced request waits for the renewal under way', () => {
  it('issues at once, without a promise, when not fenced', async () => {
    const { worker, dispose } = await setup();
    try {
      const id = worker.nextStringOrWait();
      assert.equal(typeof id, 'string');
      assert.equal(worker.state().fencedWaits, 0);
    } finally {
      await dispose();
    }
  });

  it('a refusal other than the fence is thrown at once, as nextString() throws it', async () => {
    const { clock, worker, dispose } = await setup();
    try {
      worker.next();
      clock.set(T0 - 60_000); // further back than the wait policy waits out
      assert.throws(
        () => worker.nextStringOrWait(),
        (error) => isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'),
      );
      assert.equal(worker.state().fencedWaits, 0);
    } finally {
      await dispose();
    }
  });

  for (const path of ['single', 'batch'] as const) {
    it(`${path}: past the fence with a renewal in flight, answers once it confirms`, async () => {
      const { worker, dispose, renewal, before } = await stalledWithRenewalInFlight({
        waitTimeoutMs: 60_000,
      });
      try {
        assert.throws(() => worker.next(), leaseLost, 'the synchronous path still refuses');
        const asked =
          path === 'single'
            ? Promise.resolve(worker.nextStringOrWait()).then((id) => [BigInt(id)])
            : worker.nextBatchAsync(5);
        const request = watch(asked);
        await delay(100);
        assert.equal(request.state.settled, false, 'waits while the renewal is in flight');
        // The renewal confirms: sent before the stall, its fence is in the past still, so the
        // waiting request has a fresh one sent now; that one lifts the fence.
        renewal.open();
        await request.done;
        assert.equal(request.state.error, undefined, String(request.state.error));
        const ids = request.state.value ?? [];
        assert.equal(ids.length, path === 'single' ? 1 : 5);
        for (const id of ids) {
          assert.ok(id > before);
          const parts = decomposeId(id, layout);
          assert.equal(parts.workerId, worker.workerId, 'the same lease, the same worker');
          assert.ok(parts.timestamp >= T0 + 800, 'issued after the fence was moved');
        }
        assert.equal(worker.state().fencedWaits, 1);
        assert.equal(worker.state().leaseLosses, 0);
        assert.ok(worker.state().lastRenewedAt >= T0 + 800, 'confirmed by a renewal after it');
      } finally {
        await dispose();
      }
    });
  }

  it('a renewal timer not yet fired is not waited for: the request renews now', async () => {
    // Renewals every 20 s of real time: none is due or in flight during the test.
    const { clock, worker, dispose } = await setup({
      ttlMs: 60_000,
      renewIntervalMs: 20_000,
      waitTimeoutMs: 15_000,
    });
    try {
      const renewed = worker.state().lastRenewedAt;
      clock.set(worker.state().validUntil + 5);
      assert.throws(() => worker.next(), leaseLost);
      const id = await worker.nextStringOrWait();
      assert.equal(decomposeId(BigInt(id), layout).workerId, worker.workerId);
      assert.ok(worker.state().lastRenewedAt > renewed, 'the request started a renewal');
      assert.equal(worker.state().fencedWaits, 1);
    } finally {
      await dispose();
    }
  });

  it('a renewal that timed out during the stall is retried at once for the request', async () => {
    const { worker, dispose, renewal } = await stalledWithRenewalInFlight({
      waitTimeoutMs: 60_000,
    });
    try {
      const request = watch(Promise.resolve(worker.nextStringOrWait()));
      await delay(50);
      assert.equal(request.state.settled, false);
      // As a renewal whose timeout ran out while the process was stopped: the coordinator works.
      renewal.fail(new IdMintError('REGISTRY_UNAVAILABLE', 'injected: renewal timed out'));
      await request.done;
      assert.equal(request.state.error, undefined, String(request.state.error));
      assert.equal(typeof request.state.value, 'string');
      assert.equal(worker.state().renewFailuresTotal, 1);
      assert.equal(worker.state().fencedWaits, 1);
    } finally {
      await dispose();
    }
  });

  for (const path of ['single', 'batch'] as const) {
    it(`${path}: renewals that fail end the wait with LEASE_LOST at once`, async () => {
      const { registry, worker, dispose, renewal } = await stalledWithRenewalInFlight({
        waitTimeoutMs: 60_000,
      });
      try {
        const request = watch<unknown>(
          path === 'single' ? Promise.resolve(worker.nextStringOrWait()) : worker.nextBatchAsync(3),
        );
        await delay(50);
        assert.equal(request.state.settled, false);
        registry.unreachable = true; // the retry made for the request fails too
        renewal.fail(new IdMintError('REGISTRY_UNAVAILABLE', 'injected: renewal timed out'));
        // Far sooner than the 60 s wait: two failures in a row are the outcome waited for.
        await request.done;
        assert.ok(leaseLost(request.state.error), String(request.state.error));
        assert.equal(worker.state().fencedWaits, 1);
        // With renewals failing, a new request does not wait at all.
        const next = watch(Promise.resolve(worker.nextStringOrWait()));
        await next.done;
        assert.ok(leaseLost(next.state.error));
        assert.equal(worker.state().fencedWaits, 1, 'the second request did not wait');
      } finally {
        await dispose();
      }
    });
  }

  it('a renewal slower than the wait: LEASE_LOST once the wait is over', async () => {
    // A renewal is abandoned after max(1000, interval) ms: 1500 here, well past the wait.
    const { worker, dispose, renewal } = await stalledWithRenewalInFlight({
      ttlMs: 6000,
      renewIntervalMs: 1500,
      waitTimeoutMs: 300,
    });
    try {
      const failuresBefore = worker.state().renewFailuresTotal;
      const started = performance.now();
      await assert.rejects(Promise.resolve(worker.nextStringOrWait()), leaseLost);
      const waited = performance.now() - started;
      // Timers may fire a little early; no upper bound on the time (a loaded machine), but the
      // renewal is still held: the request gave up on its own wait, not on the renewal's end.
      assert.ok(waited >= 280, `gave up after ${waited.toFixed(0)} ms, before the wait`);
      assert.equal(renewal.arrived, 1);
      assert.equal(worker.state().renewFailuresTotal, failuresBefore, 'renewal still held');
      assert.equal(worker.state().fencedWaits, 1);
    } finally {
      await dispose();
    }
  });

  it('waitTimeoutMs 0 refuses at once, as before', async () => {
    const { worker, dispose } = await stalledWithRenewalInFlight({ waitTimeoutMs: 0 });
    try {
      await assert.rejects(Promise.resolve(worker.nextStringOrWait()), leaseLost);
      await assert.rejects(worker.nextBatchAsync(2), leaseLost);
      assert.equal(worker.state().fencedWaits, 0);
    } finally {
      await dispose();
    }
  });

  it('a lease taken by another node fails at once, without waiting', async () => {
    const { registry, worker, dispose } = await setup({ waitTimeoutMs: 60_000 });
    try {
      // The recovery that follows the loss is held: a request that waited would hang on it.
      const acquiring = registry.hold('acquire');
      registry.leases[0]?.loseNow();
      await assert.rejects(Promise.resolve(worker.nextStringOrWait()), leaseLost);
      await assert.rejects(worker.nextBatchAsync(2), leaseLost);
      assert.equal(worker.state().status, 'recovering');
      assert.equal(worker.state().fencedWaits, 0);
      acquiring.open();
      await waitFor('recovery', () => worker.state().status === 'active');
    } finally {
      await dispose();
    }
  });
});
