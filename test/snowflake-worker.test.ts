import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import { isIdMintError } from '../src/core/errors.ts';
import { decomposeId, defineLayout, getLayout } from '../src/core/layout.ts';
import type { WorkerRegistry } from '../src/ports/worker-registry.ts';
import { SnowflakeWorker, type SnowflakeWorkerEvent, type SnowflakeWorkerOptions } from '../src/service/snowflake-worker.ts';
import { FaultyRegistry } from './support/faulty-registry.ts';
import { delay, sqliteRegistry, tempDir, waitFor } from './support/workers.ts';

// The worker's lease logic with every clock fault injected through a ManualClock, on the real
// SQLite registry (embedded, so these run without services). The same scenarios run against
// every coordinator in the registry suite (test/support/worker-registry-suite.ts).

const T0 = Date.UTC(2026, 5, 1, 12);
const identity = { host: '10.0.0.1', port: 8080 };
const fast = { renewIntervalMs: 50, safetyMarginMs: 200 } as const;
const layout = getLayout('idmint');
/** Four worker IDs, so exhaustion and switching are quick to reach. */
const tiny = defineLayout({ name: 'tiny', timeBits: 41, workerBits: 2, sequenceBits: 20, epoch: '2026-01-01T00:00:00Z' });

let dir: { path: string; dispose(): Promise<void> };
let files = 0;
before(async () => {
  dir = await tempDir('worker');
});
after(async () => {
  await dir.dispose();
});

/** A fresh SQLite registry (own file) behind a fault injector, and a clock at T0. */
async function setup(ttlMs = 1000) {
  const file = join(dir.path, `registry-${++files}.db`);
  const registry = new FaultyRegistry(await sqliteRegistry(file, { ttlMs }));
  const clock = new ManualClock(T0);
  const events: SnowflakeWorkerEvent[] = [];
  const start = (options: Partial<SnowflakeWorkerOptions> = {}, on: WorkerRegistry = registry) =>
    SnowflakeWorker.start({ registry: on, clock, identity, ...fast, onEvent: (event) => events.push(event), ...options });
  return { file, registry, clock, events, start };
}

function timestampOf(id: bigint, l = layout): number {
  return decomposeId(id, l).timestamp;
}

describe('SnowflakeWorker', () => {
  it('issues IDs with its leased worker ID, and close() releases with the exact last timestamp', async () => {
    const { registry, clock, start } = await setup();
    const worker = await start();
    assert.equal(worker.workerId, 0);
    assert.deepEqual(worker.state().status, 'active');
    assert.equal(worker.state().ready, true);
    const ids = worker.nextBatch(10);
    clock.advance(5);
    const last = worker.next();
    assert.ok(ids.every((id, i) => i === 0 || id > (ids[i - 1] ?? 0n)) && last > (ids.at(-1) ?? 0n));
    assert.equal(decomposeId(last, layout).workerId, 0);
    await worker.close();
    assert.equal(worker.state().status, 'closed');
    assert.throws(() => worker.next(), (error) => isIdMintError(error, 'LEASE_LOST') && /closed/.test(error.message));
    const release = registry.reports.at(-1);
    assert.equal(release?.kind, 'release');
    assert.equal(release?.report.lastTimestamp, timestampOf(last), 'release records the exact last timestamp, not a horizon');
    // Released: the next node gets the same ID at once and starts after that timestamp.
    const lease = await registry.inner.acquire({ identity: { host: 'other', port: 1 }, maxWorkers: 1024 });
    assert.equal(lease.workerId, 0);
    assert.equal(lease.lastTimestamp, timestampOf(last));
    await registry.close();
  });

  it('records a horizon before issuing anything, and fences the generator at it (borrow adds its lead)', async () => {
    for (const rollback of [{ policy: 'wait' as const }, { policy: 'borrow' as const, maxLeadMs: 300 }]) {
      const { registry, clock, start } = await setup();
      const worker = await start({ rollback });
      const first = registry.reports[0];
      assert.equal(first?.kind, 'renew');
      const lead = rollback.policy === 'borrow' ? 300 : 0;
      // ttl 1000 - margin 200 = fence at T0 + 800; the horizon adds what borrow may lead by.
      assert.equal(worker.state().validUntil, T0 + 800);
      assert.equal(first?.report.lastTimestamp, T0 + 800 + lead);
      assert.equal(first?.report.reportedAt, T0);
      // Nothing issued can pass the recorded horizon: drive borrow as far ahead as it goes.
      let maxTimestamp = 0;
      for (;;) {
        try {
          for (const id of worker.nextBatch(100_000)) maxTimestamp = Math.max(maxTimestamp, timestampOf(id));
        } catch {
          break;
        }
        if (clock.now() >= T0 + 790) break;
      }
      assert.ok(maxTimestamp <= (first?.report.lastTimestamp ?? 0), `issued ${maxTimestamp} above the horizon ${first?.report.lastTimestamp}`);
      await worker.close();
      await registry.close();
    }
  });

  it('fences when renewals fail (before the lease can expire) and resumes only after a renewal is confirmed', async () => {
    const { registry, clock, start, events } = await setup();
    const worker = await start();
    const before = worker.next();
    registry.unreachable = true;
    const failures = worker.state().renewFailuresTotal;
    await waitFor('a failed renewal', () => worker.state().renewFailuresTotal > failures);
    const fence = worker.state().validUntil;
    assert.ok(fence <= clock.now() + 1000 - 200, 'fence is at most TTL minus margin ahead');
    clock.set(fence - 1);
    assert.ok(worker.next() > before, 'still issuing inside the lease');
    clock.set(fence);
    assert.throws(() => worker.next(), (error) => isIdMintError(error, 'LEASE_LOST'));
    assert.equal(worker.state().status, 'fenced');
    assert.equal(worker.state().ready, false);
    // Time passing alone never lifts the fence.
    await delay(200);
    clock.advance(10_000);
    assert.throws(() => worker.next(), (error) => isIdMintError(error, 'LEASE_LOST'));
    assert.ok(events.some((event) => event.type === 'renew-failed'));
    registry.unreachable = false;
    await waitFor('a confirmed renewal', () => worker.state().status === 'active');
    assert.ok(worker.state().lastRenewedAt >= fence, 'resumed on a renewal made after the fence');
    assert.ok(worker.next() > before);
    assert.equal(worker.state().renewFailures, 0);
    await worker.close();
    await registry.close();
  });

  it('on a lease-loss signal, stops at once and acquires a lease again in the background', async () => {
    const { registry, clock, start, events } = await setup();
    const worker = await start();
    const issued = worker.nextBatch(50);
    clock.advance(3);
    registry.leases[0]?.loseNow();
    assert.throws(() => worker.next(), (error) => isIdMintError(error, 'LEASE_LOST'));
    await waitFor('recovery', () => worker.state().status === 'active');
    assert.equal(worker.state().leaseLosses, 1);
    assert.ok(events.some((event) => event.type === 'lease-lost') && events.some((event) => event.type === 'recovered'));
    const more = worker.nextBatch(50);
    assert.equal(new Set([...issued, ...more]).size, 100);
    await worker.close();
    await registry.close();
  });

  it('refuses to start when the clock is behind the time the previous holder reported, naming both clocks', async () => {
    const { registry, clock, start } = await setup();
    const first = await start();
    first.next();
    await first.close();
    const recorded = registry.reports.at(-1)?.report.reportedAt ?? 0;
    clock.set(recorded - 60_000); // restarted with the clock a minute behind
    await assert.rejects(start(), (error) => {
      assert.ok(isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'));
      assert.match(error.message, new RegExp(new Date(recorded - 60_000).toISOString()));
      assert.match(error.message, new RegExp(new Date(recorded).toISOString()));
      assert.equal(error.details?.['offsetMs'], 60_000);
      return true;
    });
    // Refusing changed nothing: the record is as before, and a correct clock starts.
    clock.set(recorded + 1);
    const again = await start();
    assert.equal(again.workerId, 0);
    assert.ok(timestampOf(again.next()) > recorded - 1);
    await again.close();
    await registry.close();
  });

  it('waits (without blocking) for the clock to pass a horizon the previous holder reserved, then starts past it', async () => {
    const { registry, clock, start, events } = await setup();
    // A holder's last report before it was killed: its clock read T0, and it reserved up to the
    // horizon (its fence plus a borrow lead), so its IDs may reach T0 + 1200.
    const horizon = T0 + 1200;
    const lease = await registry.inner.acquire({ identity, maxWorkers: 1024 });
    await lease.release({ lastTimestamp: horizon, reportedAt: T0 });
    clock.set(T0 + 100); // restarted quickly: behind the horizon, not behind the report
    const starting = start();
    await waitFor('the wait to begin', () => events.some((event) => event.type === 'waiting-for-clock'));
    clock.set(horizon + 1);
    const worker = await starting;
    assert.ok(timestampOf(worker.next()) > horizon, 'first ID after the reserved horizon');
    await worker.close();
    await registry.close();
  });

  it('checks the clock against the mean of live peers: refuses, warns or ignores a skew above the threshold', async () => {
    const { registry, clock, start, events } = await setup();
    registry.peerTimes = [
      { workerId: 5, reportedAt: T0 - 9000, ageMs: 1000 },
      { workerId: 6, reportedAt: T0 - 7000, ageMs: 0 },
    ]; // peers' clocks now: T0 - 8000 and T0 - 7000; mean T0 - 7500
    await assert.rejects(start(), (error) => {
      assert.ok(isIdMintError(error, 'CLOCK_SKEW'));
      assert.match(error.message, new RegExp(`${new Date(T0).toISOString()}.*7500 ms ahead.*${new Date(T0 - 7500).toISOString()}`));
      return true;
    });
    const warned = await start({ peerClockCheck: 'warn' });
    assert.ok(events.some((event) => event.type === 'peer-clock-skew'));
    await warned.close();
    const off = await start({ peerClockCheck: 'off' });
    await off.close();
    const wide = await start({ maxPeerSkewMs: 8000 });
    await wide.close();
    registry.peerTimes = [{ workerId: 5, reportedAt: T0 - 1000, ageMs: 900 }];
    clock.set(T0);
    const close = await start();
    await close.close();
    await registry.close();
  });

  it('switch-worker: at start-up, a clock behind this ID moves to an ID last used before the clock', async () => {
    const { registry, clock, start, events } = await setup();
    const first = await start({ layout: tiny });
    first.next();
    await first.close();
    const recorded = registry.reports.at(-1)?.report ?? { lastTimestamp: 0, reportedAt: 0 };
    clock.set(recorded.reportedAt - 30_000);
    await assert.rejects(start({ layout: tiny }), (error) => isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'));
    const worker = await start({ layout: tiny, rollback: { policy: 'switch-worker' } });
    assert.notEqual(worker.workerId, 0);
    assert.equal(worker.state().workerSwitches, 1);
    assert.ok(events.some((event) => event.type === 'switched-worker'));
    // Worker 0's record is untouched: its next holder still starts after it.
    const zero = await registry.inner.acquire({ identity: { host: 'x', port: 1 }, maxWorkers: 4, workerId: 0 });
    assert.deepEqual({ lastTimestamp: zero.lastTimestamp, reportedAt: zero.reportedAt }, recorded);
    await zero.release(recorded);
    await worker.close();
    await registry.close();
  });

  it('switch-worker: a rollback beyond what wait tolerates moves to another worker ID and continues; all IDs unique', async () => {
    const { registry, clock, start } = await setup();
    const worker = await start({ layout: tiny, rollback: { policy: 'switch-worker', maxBackwardMs: 5 } });
    const ids = new Set<bigint>();
    for (let i = 0; i < 20; i++) {
      for (const id of worker.nextBatch(100)) ids.add(id);
      clock.advance(1);
    }
    const before = worker.workerId;
    clock.advance(-10_000); // the wall clock stepped back 10 s (a SystemClock would show it)
    assert.throws(() => worker.next(), (error) => isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'));
    await waitFor('the switch', () => worker.state().workerSwitches === 1);
    assert.notEqual(worker.workerId, before);
    for (let i = 0; i < 20; i++) {
      for (const id of worker.nextBatch(100)) {
        assert.ok(!ids.has(id), `repeated ${id}`);
        ids.add(id);
      }
      clock.advance(1);
    }
    assert.equal(ids.size, 4000);
    const released = registry.reports.find((r) => r.kind === 'release' && r.workerId === before);
    assert.ok(released !== undefined && released.report.lastTimestamp >= T0 + 19, 'the old ID was released with its last timestamp');
    await worker.close();
    await registry.close();
  });

  it('acquire fails with WORKER_IDS_EXHAUSTED naming the limit when every ID is held', async () => {
    const { registry, start } = await setup();
    const one = defineLayout({ name: 'one', timeBits: 41, workerBits: 0, sequenceBits: 22, epoch: '2026-01-01T00:00:00Z' });
    const holder = await start({ layout: one });
    await assert.rejects(start({ layout: one, identity: { host: 'b', port: 2 } }), (error) => {
      assert.ok(isIdMintError(error, 'WORKER_IDS_EXHAUSTED'));
      assert.match(error.message, /limit 1\b/);
      return true;
    });
    await holder.close();
    const next = await start({ layout: one, identity: { host: 'b', port: 2 } });
    assert.equal(next.workerId, 0);
    await next.close();
    await registry.close();
  });

  it('takes another lease when one expires before its first renewal (a slow start), but not forever', async () => {
    const { registry, start } = await setup();
    registry.expireNext = 2;
    const worker = await start();
    assert.equal(registry.leases.length, 3, 'two leases lost before the first renewal, the third kept');
    await worker.close();
    registry.expireNext = 3;
    await assert.rejects(start(), (error) => isIdMintError(error, 'LEASE_LOST'));
    await registry.close();
  });

  it('rejects a TTL that does not hold two renewals after the safety margin', async () => {
    const { registry, start } = await setup(1000);
    await assert.rejects(start({ renewIntervalMs: 500, safetyMarginMs: 200 }), (error) => isIdMintError(error, 'INVALID_ARGUMENT') && /two renewals/.test(error.message));
    // The refused start released its lease: the ID is free again.
    const worker = await start();
    assert.equal(worker.workerId, 0);
    await worker.close();
    await registry.close();
  });
});
