import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { join } from 'node:path';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import { MonotonicClock } from '../src/clocks/monotonic-clock.ts';
import { isIdMintError } from '../src/core/errors.ts';
import { decomposeId, defineLayout, getLayout } from '../src/core/layout.ts';
import { IdMintError } from '../src/core/errors.ts';
import type { Layout } from '../src/core/layout.ts';
import type { WorkerRegistry } from '../src/ports/worker-registry.ts';
import {
  SnowflakeWorker,
  type SnowflakeWorkerEvent,
  type SnowflakeWorkerOptions,
} from '../src/service/snowflake-worker.ts';
import { openWorkerRegistry } from '../src/backends/open-worker-registry.ts';
import { FaultyRegistry } from './support/faulty-registry.ts';
import { deleteZooKeeperNamespace } from './support/registry-admin.ts';
import { SERVICES, describeWithServices, uniqueName } from './support/services.ts';
import { delay, sqliteRegistry, tempDir, waitFor } from './support/workers.ts';

// The worker's lease logic with every clock fault injected through a ManualClock, on the real
// SQLite registry (embedded, so these run without services). The same scenarios run against
// every coordinator in the registry suite (test/support/worker-registry-suite.ts).

const T0 = Date.UTC(2026, 5, 1, 12);
const identity = { host: '10.0.0.1', port: 8080 };
const fast = { renewIntervalMs: 50, safetyMarginMs: 200 } as const;
const layout = getLayout('idmint');
/** Four worker IDs, so exhaustion and switching are quick to reach. */
const tiny = defineLayout({
  name: 'tiny',
  timeBits: 41,
  workerBits: 2,
  sequenceBits: 20,
  epoch: '2026-01-01T00:00:00Z',
});

let dir: { path: string; dispose(): Promise<void> };
let files = 0;
before(async () => {
  dir = await tempDir('worker');
});
after(async () => {
  await dir?.dispose();
});

/** A fresh SQLite registry (own file) behind a fault injector, and a clock at T0. */
async function setup(ttlMs = 1000) {
  const file = join(dir.path, `registry-${++files}.db`);
  const registry = new FaultyRegistry(await sqliteRegistry(file, { ttlMs }));
  const clock = new ManualClock(T0);
  const events: SnowflakeWorkerEvent[] = [];
  const start = (
    options: Partial<SnowflakeWorkerOptions> = {},
    on: WorkerRegistry = registry,
  ): Promise<SnowflakeWorker> =>
    SnowflakeWorker.start({
      registry: on,
      clock,
      identity,
      ...fast,
      onEvent: (event) => events.push(event),
      ...options,
    });
  return { file, registry, clock, events, start };
}

function timestampOf(id: bigint, l = layout): number {
  return decomposeId(id, l).timestamp;
}

describe('SnowflakeWorker', () => {
  it('issues IDs with its leased worker ID; close() releases exactly', async () => {
    const { registry, clock, start } = await setup();
    const worker = await start();
    assert.equal(worker.workerId, 0);
    assert.deepEqual(worker.state().status, 'active');
    assert.equal(worker.state().ready, true);
    const ids = worker.nextBatch(10);
    clock.advance(5);
    const last = worker.next();
    assert.ok(
      ids.every((id, i) => i === 0 || id > (ids[i - 1] ?? 0n)) && last > (ids.at(-1) ?? 0n),
    );
    assert.equal(decomposeId(last, layout).workerId, 0);
    await worker.close();
    assert.equal(worker.state().status, 'closed');
    assert.throws(
      () => worker.next(),
      (error) => isIdMintError(error, 'LEASE_LOST') && /closed/.test(error.message),
    );
    const release = registry.reports.at(-1);
    assert.equal(release?.kind, 'release');
    assert.equal(
      release?.report.lastTimestamp,
      timestampOf(last),
      'release records the exact last timestamp, not a horizon',
    );
    // Released: the next node gets the same ID at once and starts after that timestamp.
    const lease = await registry.inner.acquire({
      identity: { host: 'other', port: 1 },
      maxWorkers: 1024,
    });
    assert.equal(lease.workerId, 0);
    assert.equal(lease.lastTimestamp, timestampOf(last));
    await registry.close();
  });

  it('records a horizon before issuing, and fences the generator at it', async () => {
    for (const rollback of [
      { policy: 'wait' as const },
      { policy: 'borrow' as const, maxLeadMs: 300 },
    ]) {
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
          for (const id of worker.nextBatch(100_000))
            maxTimestamp = Math.max(maxTimestamp, timestampOf(id));
        } catch {
          break;
        }
        if (clock.now() >= T0 + 790) break;
      }
      assert.ok(
        maxTimestamp <= (first?.report.lastTimestamp ?? 0),
        `issued ${maxTimestamp} above the horizon ${first?.report.lastTimestamp}`,
      );
      await worker.close();
      await registry.close();
    }
  });

  it('fences when renewals fail and resumes only after a confirmed one', async () => {
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
    assert.throws(
      () => worker.next(),
      (error) => isIdMintError(error, 'LEASE_LOST'),
    );
    assert.equal(worker.state().status, 'fenced');
    assert.equal(worker.state().ready, false);
    // Time passing alone never lifts the fence.
    await delay(200);
    clock.advance(10_000);
    assert.throws(
      () => worker.next(),
      (error) => isIdMintError(error, 'LEASE_LOST'),
    );
    assert.ok(events.some((event) => event.type === 'renew-failed'));
    registry.unreachable = false;
    await waitFor('a confirmed renewal', () => worker.state().status === 'active');
    assert.ok(worker.state().lastRenewedAt >= fence, 'resumed on a renewal made after the fence');
    assert.ok(worker.next() > before);
    assert.equal(worker.state().renewFailures, 0);
    await worker.close();
    await registry.close();
  });

  it('on a lease-loss signal, stops at once and acquires a lease again', async () => {
    const { registry, clock, start, events } = await setup();
    const worker = await start();
    const issued = worker.nextBatch(50);
    clock.advance(3);
    registry.leases[0]?.loseNow();
    assert.throws(
      () => worker.next(),
      (error) => isIdMintError(error, 'LEASE_LOST'),
    );
    await waitFor('recovery', () => worker.state().status === 'active');
    assert.equal(worker.state().leaseLosses, 1);
    assert.ok(
      events.some((event) => event.type === 'lease-lost') &&
        events.some((event) => event.type === 'recovered'),
    );
    const more = worker.nextBatch(50);
    assert.equal(new Set([...issued, ...more]).size, 100);
    await worker.close();
    await registry.close();
  });

  it("refuses to start behind the previous holder's clock, naming both", async () => {
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

  it('waits, not blocking, for the clock to pass a reserved horizon', async () => {
    const { registry, clock, start, events } = await setup();
    // A holder's last report before it was killed: its clock read T0, and it reserved up to the
    // horizon (its fence plus a borrow lead), so its IDs may reach T0 + 1200.
    const horizon = T0 + 1200;
    const lease = await registry.inner.acquire({ identity, maxWorkers: 1024 });
    await lease.release({ lastTimestamp: horizon, reportedAt: T0 });
    clock.set(T0 + 100); // restarted quickly: behind the horizon, not behind the report
    const starting = start();
    await waitFor('the wait to begin', () =>
      events.some((event) => event.type === 'waiting-for-clock'),
    );
    clock.set(horizon + 1);
    const worker = await starting;
    assert.ok(timestampOf(worker.next()) > horizon, 'first ID after the reserved horizon');
    await worker.close();
    await registry.close();
  });

  it('checks the clock against live peers: refuses, warns or ignores', async () => {
    const { registry, clock, start, events } = await setup();
    registry.peerTimes = [
      { workerId: 5, reportedAt: T0 - 9000, ageMs: 1000 },
      { workerId: 6, reportedAt: T0 - 7000, ageMs: 0 },
    ]; // peers' clocks now: T0 - 8000 and T0 - 7000; mean T0 - 7500
    await assert.rejects(start(), (error) => {
      assert.ok(isIdMintError(error, 'CLOCK_SKEW'));
      assert.match(
        error.message,
        new RegExp(
          `${new Date(T0).toISOString()}.*7500 ms ahead.*${new Date(T0 - 7500).toISOString()}`,
        ),
      );
      return true;
    });
    const warned = await start({ peerClockCheck: 'warn' });
    assert.ok(events.some((event) => event.type === 'peer-clock-skew'));
    // What the dashboard and idmint_snowflake_peer_clock_offset_seconds show.
    assert.deepEqual(warned.state().peerClock, {
      check: 'warn',
      checkedAt: T0,
      peers: 2,
      offsetMs: 7500,
      maxPeerSkewMs: 5000,
      skipped: null,
    });
    await warned.close();
    const off = await start({ peerClockCheck: 'off' });
    assert.equal(off.state().peerClock, null, 'no check, no report');
    await off.close();
    const wide = await start({ maxPeerSkewMs: 8000 });
    await wide.close();
    registry.peerTimes = [{ workerId: 5, reportedAt: T0 - 1000, ageMs: 900 }];
    clock.set(T0);
    const close = await start();
    assert.equal(close.state().peerClock?.offsetMs, 100);
    assert.equal(close.state().rollbackPolicy, 'wait');
    assert.ok(
      close.state().horizon >= close.state().validUntil,
      'the horizon recorded covers the fence',
    );
    await close.close();
    await registry.close();
  });

  it('switch-worker at start-up: moves to an ID last used before the clock', async () => {
    const { registry, clock, start, events } = await setup();
    const first = await start({ layout: tiny });
    first.next();
    await first.close();
    const recorded = registry.reports.at(-1)?.report ?? { lastTimestamp: 0, reportedAt: 0 };
    clock.set(recorded.reportedAt - 30_000);
    await assert.rejects(start({ layout: tiny }), (error) =>
      isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'),
    );
    const worker = await start({ layout: tiny, rollback: { policy: 'switch-worker' } });
    assert.notEqual(worker.workerId, 0);
    assert.equal(worker.state().workerSwitches, 1);
    assert.ok(events.some((event) => event.type === 'switched-worker'));
    // Worker 0's record is untouched: its next holder still starts after it.
    const zero = await registry.inner.acquire({
      identity: { host: 'x', port: 1 },
      maxWorkers: 4,
      workerId: 0,
    });
    assert.deepEqual({ lastTimestamp: zero.lastTimestamp, reportedAt: zero.reportedAt }, recorded);
    await zero.release(recorded);
    await worker.close();
    await registry.close();
  });

  it('switch-worker: a large rollback moves to another ID; all unique', async () => {
    const { registry, clock, start } = await setup();
    const worker = await start({
      layout: tiny,
      rollback: { policy: 'switch-worker', maxBackwardMs: 5 },
    });
    const ids = new Set<bigint>();
    for (let i = 0; i < 20; i++) {
      for (const id of worker.nextBatch(100)) ids.add(id);
      clock.advance(1);
    }
    const before = worker.workerId;
    clock.advance(-10_000); // the wall clock stepped back 10 s (a SystemClock would show it)
    assert.throws(
      () => worker.next(),
      (error) => isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'),
    );
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
    assert.ok(
      released !== undefined && released.report.lastTimestamp >= T0 + 19,
      'the old ID was released with its last timestamp',
    );
    await worker.close();
    await registry.close();
  });

  it('acquire fails with WORKER_IDS_EXHAUSTED naming the limit when every ID is held', async () => {
    const { registry, start } = await setup();
    const one = defineLayout({
      name: 'one',
      timeBits: 41,
      workerBits: 0,
      sequenceBits: 22,
      epoch: '2026-01-01T00:00:00Z',
    });
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

  it('takes another lease when one expires before its first renewal', async () => {
    const { registry, start } = await setup();
    registry.expireNext = 2;
    const worker = await start();
    assert.equal(
      registry.leases.length,
      3,
      'two leases lost before the first renewal, the third kept',
    );
    await worker.close();
    registry.expireNext = 3;
    await assert.rejects(start(), (error) => isIdMintError(error, 'LEASE_LOST'));
    await registry.close();
  });

  it('nextBatchAsync: up to maxBatch IDs without blocking; more refused', async () => {
    const { registry, start } = await setup();
    /** The real clock, counting every time the generator asks it to block. */
    class CountingClock extends MonotonicClock {
      sleeps = 0;
      override sleep(ms: number): void {
        this.sleeps++;
        super.sleep(ms);
      }
    }
    const clock = new CountingClock();
    const worker = await start({
      layout: 'js-safe',
      clock,
      renewIntervalMs: 200,
      safetyMarginMs: 200,
    });
    try {
      assert.equal(worker.maxBatch, 6400, 'js-safe: 64 IDs per ms, 100 ms');
      await assert.rejects(worker.nextBatchAsync(6401), (error) => {
        assert.ok(isIdMintError(error, 'INVALID_ARGUMENT'));
        assert.equal(
          error.message,
          'count must be an integer from 1 to 6400, got 6401: layout "js-safe" issues 6400 ' +
            'IDs in 100 ms, the most one batch may take; ask for more in several requests',
        );
        return true;
      });
      for (const bad of [0, -1, 1.5, Number.NaN])
        await assert.rejects(worker.nextBatchAsync(bad), (error) =>
          isIdMintError(error, 'INVALID_ARGUMENT'),
        );
      let turns = 0;
      const counting = setInterval(() => turns++, 1);
      const ids = await worker.nextBatchAsync(6400);
      clearInterval(counting);
      assert.equal(ids.length, 6400);
      assert.ok(
        ids.every((id, i) => i === 0 || id > (ids[i - 1] ?? 0n)),
        'strictly increasing',
      );
      const units = new Set(ids.map((id) => decomposeId(id, getLayout('js-safe')).timestamp));
      assert.ok(units.size >= 100, `${units.size} time units`);
      assert.equal(clock.sleeps, 0, 'the thread was never blocked waiting for the clock');
      assert.ok(
        turns > 10,
        `the event loop ran between time units (a 1 ms timer fired ${turns} times)`,
      );
      // The sequence spread costs capacity, so it lowers the bound.
      const spread = await start({
        layout: 'js-safe',
        sequenceSpread: 8,
        identity: { host: 'b', port: 2 },
        clock,
      });
      assert.equal(spread.maxBatch, (64 - 7) * 100);
      await spread.close();
    } finally {
      await worker.close();
      await registry.close();
    }
  });

  it('nextBatchAsync: a lease loss mid-batch rejects it, hands out nothing', async () => {
    const { registry, clock, start } = await setup();
    const worker = await start({ layout: 'js-safe' });
    try {
      // The manual clock stands still, so the batch waits at its first unit boundary.
      const batch = worker.nextBatchAsync(640);
      registry.leases[0]?.loseNow();
      await assert.rejects(batch, (error) => isIdMintError(error, 'LEASE_LOST'));
      // The lost lease was released with its exact last timestamp, and the recovery takes the
      // same worker ID back: it starts once the clock has passed that timestamp.
      clock.advance(1);
      await waitFor('recovery', () => worker.state().status === 'active');
      const after = await worker.nextBatchAsync(640);
      assert.equal(after.length, 640);
      assert.equal(decomposeId(after[0] ?? 0n, getLayout('js-safe')).workerId, worker.workerId);
    } finally {
      await worker.close();
      await registry.close();
    }
  });

  it('nextBatchAsync mints concurrent batches in arrival order', async () => {
    const { registry, clock, start } = await setup();
    const worker = await start({ layout: 'js-safe' });
    const ticking = setInterval(() => clock.advance(1), 2);
    try {
      // 10 units of 64: the first takes what unit T0 holds, then waits for the clock.
      const first = worker.nextBatchAsync(640);
      const finished: string[] = [];
      void first.then(() => finished.push('first'));
      // A new unit begins, and a second batch is asked before the first one's timer fires:
      // before the queue, it took the new unit's IDs ahead of the batch already waiting.
      clock.advance(1);
      const second = worker.nextBatchAsync(64);
      void second.then(() => finished.push('second'));
      const [a, b] = await Promise.all([first, second]);
      assert.equal(a.length, 640);
      assert.equal(b.length, 64);
      assert.ok(
        (b[0] ?? 0n) > (a.at(-1) ?? 0n),
        `every ID of the later batch follows the earlier batch's (${b[0]} after ${a.at(-1)})`,
      );
      assert.deepEqual(finished, ['first', 'second']);
      // A rejected batch does not stop the ones after it.
      const refused = worker.nextBatchAsync(0);
      const after = worker.nextBatchAsync(64);
      await assert.rejects(refused, (error) => isIdMintError(error, 'INVALID_ARGUMENT'));
      assert.ok(((await after)[0] ?? 0n) > (b.at(-1) ?? 0n));
    } finally {
      clearInterval(ticking);
      await worker.close();
      await registry.close();
    }
  });

  it('rejects a TTL that does not hold two renewals after the safety margin', async () => {
    const { registry, start } = await setup(1000);
    await assert.rejects(
      start({ renewIntervalMs: 500, safetyMarginMs: 200 }),
      (error) => isIdMintError(error, 'INVALID_ARGUMENT') && /two renewals/.test(error.message),
    );
    // The refused start released its lease: the ID is free again.
    const worker = await start();
    assert.equal(worker.workerId, 0);
    await worker.close();
    await registry.close();
  });
});

/**
 * Issues IDs in the background as a busy server does: a burst every 2 ms, the manual clock one ms
 * further each time. Each burst notes how many reports had landed at the coordinator before it,
 * so a report can be checked against everything issued before it landed.
 */
function pump(worker: SnowflakeWorker, clock: ManualClock, registry: FaultyRegistry) {
  const bursts: { ids: bigint[]; landedBefore: number }[] = [];
  let refused = 0;
  const timer = setInterval(() => {
    clock.advance(1);
    try {
      bursts.push({ ids: worker.nextBatch(20), landedBefore: registry.landed.length });
    } catch (error) {
      // Refusals a server answers 503 to; anything else fails the test.
      if (!isIdMintError(error, 'LEASE_LOST') && !isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'))
        throw error;
      refused++;
    }
  }, 2);
  return {
    bursts,
    get refused() {
      return refused;
    },
    stop: () => clearInterval(timer),
  };
}

/**
 * What every interleaving must end with:
 * - zero duplicate IDs;
 * - the record never lowered: renewals of a worker ID never report less than the one before, and
 *   no report (renewal or release) lands below an ID issued with its worker ID before it landed,
 *   so the next holder of that ID always starts after everything issued under it.
 */
function assertUniqueAndCovered(
  registry: FaultyRegistry,
  bursts: readonly { ids: bigint[]; landedBefore: number }[],
  l: Layout,
): number {
  const seen = new Set<bigint>();
  for (const { ids } of bursts) {
    for (const id of ids) {
      assert.ok(!seen.has(id), `ID ${id} issued twice`);
      seen.add(id);
    }
  }
  const lastRenewal = new Map<number, number>();
  registry.landed.forEach(({ workerId, kind, report }, index) => {
    if (kind === 'renew') {
      const before = lastRenewal.get(workerId) ?? -1;
      assert.ok(
        report.lastTimestamp >= before,
        `worker ${workerId}: a renewal lowered the record from ${before} to ` +
          `${report.lastTimestamp}`,
      );
      lastRenewal.set(workerId, report.lastTimestamp);
    }
    for (const burst of bursts) {
      if (burst.landedBefore > index) continue;
      for (const id of burst.ids) {
        const parts = decomposeId(id, l);
        assert.ok(
          parts.workerId !== workerId || parts.timestamp <= report.lastTimestamp,
          `worker ${workerId}: ${kind} recorded ${report.lastTimestamp}, below ID ${id} ` +
            `(${parts.timestamp}) issued before it landed`,
        );
      }
    }
  });
  return seen.size;
}

/** Leases the coordinator still holds for this worker: acquired, never released. */
function unreleased(registry: FaultyRegistry) {
  return registry.leases.filter((lease) => !lease.released);
}

/** What a scenario runs on: a worker's registry behind the fault injector, its clock, a start. */
interface ScenarioSetup {
  readonly registry: FaultyRegistry;
  readonly clock: ManualClock;
  readonly events: SnowflakeWorkerEvent[];
  readonly start: (options?: Partial<SnowflakeWorkerOptions>) => Promise<SnowflakeWorker>;
}

/**
 * A loss signal while a renewal is in flight, the renewal then landing or failing: exactly one
 * recovery, one live lease at the end, every other lease released, no call on a lease while
 * another is in flight, zero duplicates, a record never lowered below what was issued.
 */
async function lossDuringRenewal(
  setup: ScenarioSetup,
  outcome: 'lands' | 'fails',
  l: Layout,
  intervalMs: number,
): Promise<void> {
  const { registry, clock, start, events } = setup;
  const worker = await start({ layout: l });
  const issuing = pump(worker, clock, registry);
  try {
    await waitFor('IDs flowing', () => issuing.bursts.length > 10);
    const first = registry.leases[0];
    assert.ok(first !== undefined);
    // 1. A renewal of the first lease leaves and is held on its way to the coordinator.
    const renewal = registry.hold('renew');
    await renewal.reached;
    // 2. Recoveries will wait for their lease, so the test sees how many start.
    const acquiring = registry.hold('acquire');
    // 3. The coordinator says the lease is gone while the renewal is in flight.
    first.loseNow();
    assert.throws(
      () => worker.next(),
      (error) => isIdMintError(error, 'LEASE_LOST'),
      'fenced at once on the loss signal',
    );
    // 4. The renewal is slow to come back; the loss is handled meanwhile (a recovery may start).
    await delay(intervalMs);
    // 5. The renewal comes back: confirmed, or failed as if the coordinator were unreachable.
    if (outcome === 'lands') renewal.open();
    else renewal.fail(new IdMintError('REGISTRY_UNAVAILABLE', 'injected: renewal timed out'));
    await acquiring.reached;
    // 6. Long enough for several renewal intervals: a second recovery would start meanwhile.
    await delay(intervalMs * 5);
    assert.equal(acquiring.arrived, 1, 'exactly one recovery is under way');
    acquiring.open();
    await waitFor('recovery', () => worker.state().status === 'active');
    const recovered = registry.leases.at(-1);
    assert.ok(recovered !== undefined && recovered !== first);
    // The recovered lease is the one renewed from now on.
    const renewedBefore = recovered.renewals;
    await waitFor('renewals of the recovered lease', () => recovered.renewals >= renewedBefore + 3);
    issuing.stop();
    assert.equal(
      registry.leases.length,
      2,
      `leases acquired: the first and one recovery, not ${registry.leases.length}`,
    );
    assert.deepEqual(
      unreleased(registry),
      [recovered],
      'one live lease: the recovered one; the lost one was released',
    );
    assert.equal(worker.workerId, recovered.workerId);
    assert.equal(worker.state().leaseLosses, 1);
    assert.equal(events.filter((event) => event.type === 'recovered').length, 1);
    await worker.close();
    assert.deepEqual(unreleased(registry), [], 'after close(), every lease acquired was released');
    assert.deepEqual(
      registry.overlaps,
      [],
      'no call on a lease started while another was in flight',
    );
    const count = assertUniqueAndCovered(registry, issuing.bursts, l);
    assert.ok(count > 200, `only ${count} IDs issued`);
  } finally {
    issuing.stop();
    registry.openAll();
    await worker.close().catch(() => {});
  }
}

describe('SnowflakeWorker lease transitions, one at a time (interleavings)', () => {
  for (const outcome of ['lands', 'fails'] as const) {
    it(`a loss signal during a renewal (then ${outcome}) starts one recovery`, async () => {
      const env = await setup();
      try {
        await lossDuringRenewal(env, outcome, layout, fast.renewIntervalMs);
      } finally {
        await env.registry.close();
      }
    });
  }

  it('switch-worker waits for an in-flight renewal, then releases the lease', async () => {
    const { registry, clock, start } = await setup();
    const worker = await start({
      layout: tiny,
      rollback: { policy: 'switch-worker', maxBackwardMs: 5 },
    });
    const issuing = pump(worker, clock, registry);
    try {
      await waitFor('IDs flowing', () => issuing.bursts.length > 10);
      const old = registry.leases[0];
      assert.ok(old !== undefined);
      const renewal = registry.hold('renew', { workerId: old.workerId });
      await renewal.reached;
      clock.advance(-10_000); // beyond what wait tolerates: switch-worker moves to another ID
      assert.throws(
        () => worker.next(),
        (error) => isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'),
      );
      await delay(fast.renewIntervalMs * 5);
      renewal.open();
      await waitFor(
        'the switch',
        () => worker.state().workerSwitches === 1 && worker.state().status === 'active',
      );
      const moved = registry.leases.at(-1);
      assert.ok(moved !== undefined && moved !== old && worker.workerId === moved.workerId);
      await waitFor('the old lease released', () => old.released);
      const renewedBefore = moved.renewals;
      await waitFor('renewals of the new lease', () => moved.renewals >= renewedBefore + 2);
      issuing.stop();
      assert.deepEqual(
        registry.overlaps,
        [],
        'the old lease was released only after its renewal came back',
      );
      assert.deepEqual(unreleased(registry), [moved], 'one live lease: the one switched to');
      await worker.close();
      assert.deepEqual(unreleased(registry), []);
      assertUniqueAndCovered(registry, issuing.bursts, tiny);
    } finally {
      issuing.stop();
      registry.openAll();
      await worker.close().catch(() => {});
      await registry.close();
    }
  });

  it('close() during a recovery releases the lease it acquires; no IDs after', async () => {
    const { registry, clock, start } = await setup();
    const worker = await start();
    const issuing = pump(worker, clock, registry);
    try {
      await waitFor('IDs flowing', () => issuing.bursts.length > 10);
      const acquiring = registry.hold('acquire');
      registry.leases[0]?.loseNow();
      await acquiring.reached;
      let closed = false;
      const closing = worker.close().then(() => (closed = true));
      const issuedAtClose = issuing.bursts.length;
      await delay(fast.renewIntervalMs * 3);
      assert.equal(closed, false, 'close() waits for the recovery in flight');
      acquiring.open();
      await closing;
      assert.equal(registry.leases.length, 2);
      assert.deepEqual(
        unreleased(registry),
        [],
        'the lease the recovery acquired was released by close(), and the lost one before it',
      );
      assert.equal(worker.state().status, 'closed');
      assert.throws(
        () => worker.next(),
        (error) => isIdMintError(error, 'LEASE_LOST') && /closed/.test(error.message),
      );
      await delay(fast.renewIntervalMs * 3);
      issuing.stop();
      assert.equal(issuing.bursts.length, issuedAtClose, 'no ID issued once close() was called');
      assert.deepEqual(registry.overlaps, []);
      assertUniqueAndCovered(registry, issuing.bursts, layout);
    } finally {
      issuing.stop();
      registry.openAll();
      await worker.close().catch(() => {});
      await registry.close();
    }
  });

  it('close() during a renewal releases after it, with the last timestamp', async () => {
    const { registry, clock, start } = await setup();
    const worker = await start();
    const issuing = pump(worker, clock, registry);
    try {
      await waitFor('IDs flowing', () => issuing.bursts.length > 10);
      const renewal = registry.hold('renew');
      await renewal.reached;
      const closing = worker.close();
      await delay(fast.renewIntervalMs * 3);
      renewal.open();
      await closing;
      issuing.stop();
      assert.deepEqual(registry.overlaps, [], 'no release while the renewal was in flight');
      assert.deepEqual(unreleased(registry), []);
      const last = issuing.bursts
        .flatMap(({ ids }) => ids)
        .reduce((max, id) => (id > max ? id : max), 0n);
      const release = registry.landed.at(-1);
      assert.equal(release?.kind, 'release');
      assert.equal(
        release?.report.lastTimestamp,
        timestampOf(last),
        'the release, landing last, records the exact last timestamp',
      );
      assertUniqueAndCovered(registry, issuing.bursts, layout);
    } finally {
      issuing.stop();
      registry.openAll();
      await worker.close().catch(() => {});
      await registry.close();
    }
  });
});

// The same interleaving on a real ZooKeeper, where a lease leaked by a second recovery is an
// ephemeral liveness node that holds its worker ID for as long as the registry's session lives.
await describeWithServices('SnowflakeWorker lease transitions on ZooKeeper', ['zookeeper'], () => {
  const address = SERVICES.zookeeper.url;
  it('a loss signal during a renewal leaves no worker ID held after close', {
    timeout: 60_000,
  }, async () => {
    const name = uniqueName('lease');
    const options = { ttlMs: 4000, operationTimeoutMs: 1500 };
    const registry = new FaultyRegistry(
      await openWorkerRegistry(`zookeeper://${address}/${name}`, options),
    );
    const clock = new ManualClock(T0);
    const events: SnowflakeWorkerEvent[] = [];
    const timing = { renewIntervalMs: 200, safetyMarginMs: 1000 };
    const start = (extra: Partial<SnowflakeWorkerOptions> = {}) =>
      SnowflakeWorker.start({
        registry,
        clock,
        identity,
        ...timing,
        onEvent: (event) => events.push(event),
        ...extra,
      });
    const other = await openWorkerRegistry(`zookeeper://${address}/${name}`, options);
    try {
      await lossDuringRenewal(
        { registry, clock, events, start },
        'lands',
        tiny,
        timing.renewIntervalMs,
      );
      // Another session takes every worker ID at once: none is left held by this one.
      for (let workerId = 0; workerId <= tiny.maxWorkerId; workerId++) {
        const lease = await other.acquire({
          identity: { host: '10.0.0.9', port: 1 },
          maxWorkers: tiny.maxWorkerId + 1,
          workerId,
        });
        await lease.release({ lastTimestamp: lease.lastTimestamp, reportedAt: lease.reportedAt });
      }
    } finally {
      await other.close();
      await registry.close();
      await deleteZooKeeperNamespace(address, name);
    }
  });
});
