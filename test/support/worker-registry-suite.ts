import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import { ManualClock } from '../../src/clocks/manual-clock.ts';
import { MonotonicClock } from '../../src/clocks/monotonic-clock.ts';
import { isIdMintError } from '../../src/core/errors.ts';
import { decomposeId, defineLayout } from '../../src/core/layout.ts';
import { SnowflakeGenerator } from '../../src/core/snowflake.ts';
import type { Interleave } from '../../src/registries/common.ts';
import type { WorkerLease, WorkerRegistry } from '../../src/ports/worker-registry.ts';
import {
  openWorkerRegistry,
  type OpenWorkerRegistryOptions,
} from '../../src/backends/open-worker-registry.ts';
import {
  SnowflakeWorker,
  type SnowflakeWorkerEvent,
  type SnowflakeWorkerOptions,
} from '../../src/service/snowflake-worker.ts';
import { FaultyRegistry } from './faulty-registry.ts';
import type { StoredRecord } from './registry-admin.ts';
import { describeWithServices, uniqueName, type ServiceName } from './services.ts';
import { TcpProxy } from './tcp-proxy.ts';
import { delay, waitFor } from './workers.ts';

/** How the suites reach one backend: the URL and options a server would be given. */
export interface RegistryHarness {
  /** Backend name, in test titles. */
  readonly backend: string;
  /** The services it needs; none for an embedded backend. */
  readonly services: readonly ServiceName[];
  /** Lease TTL to use (ZooKeeper's default server allows sessions of 4 s at the least). */
  readonly ttlMs: number;
  /** The coordinator's address, so a TcpProxy can cut it off; undefined for an embedded backend. */
  readonly target?: { readonly host: string; readonly port: number };
  /** The registry URL for namespace `name`, through `proxy` when given. */
  url(name: string, proxy?: TcpProxy): string;
  /** openWorkerRegistry options for namespace `name`. */
  options(name: string): OpenWorkerRegistryOptions;
  /** Removes everything created under namespace `name`. */
  cleanup(name: string): Promise<void>;
  /** The record of `workerId` in namespace `name` as the backend stores it (read directly). */
  record(name: string, workerId: number): Promise<StoredRecord | undefined>;
  /**
   * Writes a record for `identity` directly, the way the backend can hold one that no registry
   * call of today leaves behind (ZooKeeper: a record at version 0); the interleavings run on it
   * too.
   */
  seedRecord?(
    name: string,
    identity: { host: string; port: number },
    workerId: number,
    record: StoredRecord,
  ): Promise<void>;
}

const A = { host: '10.0.0.1', port: 8080 };
const B = { host: '10.0.0.2', port: 8080 };
const T0 = Date.UTC(2026, 5, 1, 12);
/** One worker ID: whoever holds it blocks everybody else. */
const oneWorker = defineLayout({
  name: 'one-worker',
  timeBits: 41,
  workerBits: 0,
  sequenceBits: 22,
  epoch: '2026-01-01T00:00:00Z',
});
/** Eight worker IDs. */
const eightWorkers = defineLayout({
  name: 'eight-workers',
  timeBits: 41,
  workerBits: 3,
  sequenceBits: 19,
  epoch: '2026-01-01T00:00:00Z',
});

/**
 * The behaviour every WorkerRegistry must have, and the six invariants of worker-ID leasing,
 * checked against a real backend: `runWorkerRegistrySuite(harness)` in one line per backend.
 * Each test owns a fresh namespace, removed afterwards, so suites run in parallel and twice.
 */
export async function runWorkerRegistrySuite(harness: RegistryHarness): Promise<void> {
  await describeWithServices(`${harness.backend} worker registry`, harness.services, () => {
    const ttlMs = harness.ttlMs;
    const renew = { renewIntervalMs: Math.floor(ttlMs / 6), safetyMarginMs: Math.floor(ttlMs / 6) };
    const opened: WorkerRegistry[] = [];
    const proxies: TcpProxy[] = [];
    const names: string[] = [];

    const namespace = () => {
      const name = uniqueName('w');
      names.push(name);
      return name;
    };
    const open = async (name: string, proxy?: TcpProxy) => {
      const registry = await openWorkerRegistry(harness.url(name, proxy), harness.options(name));
      opened.push(registry);
      return registry;
    };
    const proxy = async () => {
      if (harness.target === undefined) return undefined;
      const started = await TcpProxy.start(harness.target);
      proxies.push(started);
      return started;
    };
    const startWorker = (registry: WorkerRegistry, options: Partial<SnowflakeWorkerOptions>) =>
      SnowflakeWorker.start({ registry, identity: A, ...renew, ...options });
    const release = (lease: WorkerLease, lastTimestamp = lease.lastTimestamp) =>
      lease.release({ lastTimestamp, reportedAt: lease.reportedAt });

    after(async () => {
      for (const p of proxies) p.restore();
      await Promise.all(opened.map((registry) => registry.close().catch(() => {})));
      await Promise.all(proxies.map((p) => p.close()));
      for (const name of names) await harness.cleanup(name);
    });

    it('a released ID goes to the next node at once with its timestamp (inv. 6)', async () => {
      const registry = await open(namespace());
      const lease = await registry.acquire({ identity: A, maxWorkers: 1 });
      assert.equal(lease.workerId, 0);
      assert.equal(lease.lastTimestamp, -1);
      assert.equal(lease.reportedAt, -1);
      assert.ok(lease.ttlMs >= 1000);
      await assert.rejects(registry.acquire({ identity: B, maxWorkers: 1 }), (error) =>
        isIdMintError(error, 'WORKER_IDS_EXHAUSTED'),
      );
      await lease.renew({ lastTimestamp: T0 + 5000, reportedAt: T0 });
      await lease.release({ lastTimestamp: T0 + 42, reportedAt: T0 + 40 });
      const next = await registry.acquire({ identity: B, maxWorkers: 1 });
      assert.deepEqual([next.workerId, next.lastTimestamp, next.reportedAt], [0, T0 + 42, T0 + 40]);
      await release(next);
    });

    it('20 nodes acquiring at the same moment get 20 different IDs (invariant 1)', async () => {
      const name = namespace();
      const registries = await Promise.all(Array.from({ length: 20 }, () => open(name)));
      const leases = await Promise.all(
        registries.map((registry, i) =>
          registry.acquire({ identity: { host: `10.0.1.${i}`, port: 8080 }, maxWorkers: 1024 }),
        ),
      );
      const ids = leases.map((lease) => lease.workerId);
      assert.equal(new Set(ids).size, 20, `IDs: ${ids.join(',')}`);
      assert.ok(ids.every((id) => id >= 0 && id < 1024));
      await Promise.all(leases.map((lease) => release(lease)));
    });

    it('WORKER_IDS_EXHAUSTED naming the limit when every ID is held', async () => {
      const registry = await open(namespace());
      const leases = await Promise.all(
        [0, 1, 2, 3].map((i) =>
          registry.acquire({ identity: { host: `h${i}`, port: 1 }, maxWorkers: 4 }),
        ),
      );
      assert.deepEqual(leases.map((l) => l.workerId).sort(), [0, 1, 2, 3]);
      await assert.rejects(
        registry.acquire({ identity: { host: 'h4', port: 1 }, maxWorkers: 4 }),
        (error) => {
          assert.ok(isIdMintError(error, 'WORKER_IDS_EXHAUSTED'));
          assert.match(error.message, /limit 4\b/);
          assert.equal(error.details?.['limit'], 4);
          return true;
        },
      );
      await Promise.all(leases.map((lease) => release(lease)));
    });

    it("gives a node its identity's old ID, another node a free one", async () => {
      const registry = await open(namespace());
      const first = await registry.acquire({ identity: A, maxWorkers: 16 });
      const other = await registry.acquire({ identity: B, maxWorkers: 16 });
      assert.notEqual(other.workerId, first.workerId);
      await first.renew({ lastTimestamp: T0, reportedAt: T0 });
      await other.renew({ lastTimestamp: T0, reportedAt: T0 });
      await release(other, T0);
      await release(first, T0);
      const again = await registry.acquire({ identity: A, maxWorkers: 16 });
      assert.equal(again.workerId, first.workerId, 'the same identity gets its ID back');
      await release(again);
    });

    it('honours workerId, exclude and lastTimestampBelow', async () => {
      const registry = await open(namespace());
      // One after another: uncontended, each takes the lowest free ID (racing, etcd's losers spread
      // out).
      const leases: WorkerLease[] = [];
      for (const i of [0, 1, 2])
        leases.push(
          await registry.acquire({ identity: { host: `h${i}`, port: 1 }, maxWorkers: 8 }),
        );
      const byId = new Map(leases.map((lease) => [lease.workerId, lease]));
      // IDs 0, 1, 2 recorded at T0 + 0, 1000, 2000, then released.
      for (const [id, lease] of byId)
        await lease.release({ lastTimestamp: T0 + id * 1000, reportedAt: T0 + id * 1000 });
      const only = await registry.acquire({ identity: A, maxWorkers: 8, workerId: 2 });
      assert.equal(only.workerId, 2);
      await assert.rejects(registry.acquire({ identity: B, maxWorkers: 8, workerId: 2 }), (error) =>
        isIdMintError(error, 'WORKER_IDS_EXHAUSTED'),
      );
      const excluded = await registry.acquire({ identity: B, maxWorkers: 8, exclude: [0] });
      assert.equal(excluded.workerId, 1, 'a recycled ID, skipping the excluded one');
      const below = await registry.acquire({
        identity: { host: 'h9', port: 1 },
        maxWorkers: 8,
        lastTimestampBelow: T0 + 500,
      });
      assert.equal(below.workerId, 0, 'only ID 0 was last used before T0 + 500');
      const fresh = await registry.acquire({
        identity: { host: 'h10', port: 1 },
        maxWorkers: 8,
        lastTimestampBelow: T0 + 500,
      });
      assert.ok(fresh.workerId >= 3 && fresh.lastTimestamp === -1, 'or an ID never used');
      for (const lease of [only, excluded, below, fresh]) await release(lease);
    });

    it('records each renewal; a released lease cannot be renewed or released', async () => {
      const registry = await open(namespace());
      const lease = await registry.acquire({ identity: A, maxWorkers: 4 });
      assert.ok(
        (await lease.renew({ lastTimestamp: T0 + 100, reportedAt: T0 })) >= 1000,
        'renew grants a TTL',
      );
      await lease.release({ lastTimestamp: T0 + 50, reportedAt: T0 + 60 });
      await assert.rejects(lease.renew({ lastTimestamp: T0, reportedAt: T0 }), (error) =>
        isIdMintError(error, 'LEASE_LOST'),
      );
      await assert.rejects(lease.release({ lastTimestamp: T0, reportedAt: T0 }), (error) =>
        isIdMintError(error, 'LEASE_LOST'),
      );
      const next = await registry.acquire({ identity: A, maxWorkers: 4 });
      assert.deepEqual(
        [next.workerId, next.lastTimestamp, next.reportedAt],
        [lease.workerId, T0 + 50, T0 + 60],
      );
      await release(next);
    });

    it('lists the live holders with their last reports and how old those are', async () => {
      const name = namespace();
      const registry = await open(name);
      const now = Date.now();
      const one = await registry.acquire({ identity: A, maxWorkers: 8 });
      const two = await registry.acquire({ identity: B, maxWorkers: 8 });
      await one.renew({ lastTimestamp: now + 10_000, reportedAt: now - 100 });
      await two.renew({ lastTimestamp: now + 10_000, reportedAt: now - 200 });
      const gone = await registry.acquire({ identity: { host: 'gone', port: 1 }, maxWorkers: 8 });
      await gone.renew({ lastTimestamp: now, reportedAt: now });
      await release(gone, now);
      const peers = (await (await open(name)).peers()).sort((a, b) => a.workerId - b.workerId);
      assert.deepEqual(
        peers.map((p) => [p.workerId, p.reportedAt]),
        [
          [one.workerId, now - 100],
          [two.workerId, now - 200],
        ],
        'released holders are not peers',
      );
      // etcd measures age in whole seconds of lease TTL; the others in ms of the coordinator's
      // clock.
      assert.ok(
        peers.every((p) => p.ageMs >= 0 && p.ageMs < 2500),
        JSON.stringify(peers),
      );
      await release(one);
      await release(two);
    });

    it('a live holder that has reported nothing is not a peer', async () => {
      const name = namespace();
      const registry = await open(name);
      const first = await registry.acquire({ identity: A, maxWorkers: 1 });
      await first.release({ lastTimestamp: -1, reportedAt: -1 });
      const second = await registry.acquire({ identity: B, maxWorkers: 1 });
      // A peer's clock is its report plus the report's age: -1 would read as 1970.
      assert.deepEqual(await (await open(name)).peers(), []);
      await release(second);
    });

    it("recycles a dead holder's ID only after its lease expired (inv. 3)", async () => {
      const name = namespace();
      const link = await proxy();
      const dying = await open(name, link);
      const lease = await dying.acquire({ identity: A, maxWorkers: 1 });
      const ttl = await lease.renew({ lastTimestamp: T0 + 777, reportedAt: T0 + 700 });
      const renewedAt = Date.now();
      // The holder dies: no contact with the coordinator from now on.
      link?.cut();
      const registry = await open(name);
      let refusals = 0;
      let next: WorkerLease | undefined;
      while (next === undefined) {
        try {
          next = await registry.acquire({ identity: B, maxWorkers: 1 });
        } catch (error) {
          assert.ok(isIdMintError(error, 'WORKER_IDS_EXHAUSTED'), String(error));
          refusals++;
          await delay(100);
        }
      }
      const acquiredAt = Date.now();
      assert.ok(refusals > 0, 'refused while the lease was live');
      assert.ok(
        acquiredAt - renewedAt >= ttl - 50,
        `recycled ${acquiredAt - renewedAt} ms after the last renewal; TTL ${ttl}`,
      );
      assert.deepEqual(
        [next.workerId, next.lastTimestamp, next.reportedAt],
        [0, T0 + 777, T0 + 700],
      );
      link?.restore();
      // Reconnecting may take a moment (meanwhile: REGISTRY_UNAVAILABLE); then the lease is lost
      // for good.
      await waitFor('the old holder to learn its lease is lost', async () => {
        const error = await lease.renew({ lastTimestamp: T0 + 800, reportedAt: T0 + 800 }).then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(
          isIdMintError(error, 'LEASE_LOST') || isIdMintError(error, 'REGISTRY_UNAVAILABLE'),
          String(error),
        );
        return isIdMintError(error, 'LEASE_LOST');
      });
      await release(next);
      const reread = await registry.acquire({ identity: A, maxWorkers: 1 });
      assert.deepEqual(
        [reread.lastTimestamp, reread.reportedAt],
        [T0 + 777, T0 + 700],
        'the old holder wrote nothing once it lost the lease',
      );
      await release(reread);
    });

    it('fencing: a cut-off worker stops before its ID can move (invariant 2)', async () => {
      const name = namespace();
      const link = await proxy();
      // Without a network (SQLite) the cut is injected at the port instead.
      const faulty = new FaultyRegistry(await open(name, link));
      const cut = () => {
        if (link === undefined) faulty.unreachable = true;
        else link.hang();
      };
      // When the network returns, connections that hung through the outage are reset (the
      // proxy dropped what they sent), as a real one resets them after a long outage.
      const restore = () => {
        if (link === undefined) faulty.unreachable = false;
        else {
          link.cut();
          link.restore();
        }
      };
      const lost: number[] = [];
      const a = await startWorker(faulty, {
        layout: oneWorker,
        clock: new MonotonicClock(),
        onEvent: (e) => e.type === 'lease-lost' && lost.push(Date.now()),
      });
      const issued: { at: number; id: bigint }[] = [];
      let fencedAt = 0;
      const pump = setInterval(() => {
        try {
          issued.push({ at: Date.now(), id: a.next() });
        } catch (error) {
          assert.ok(isIdMintError(error, 'LEASE_LOST'), String(error));
          fencedAt ||= Date.now();
        }
      }, 5);
      try {
        await delay(ttlMs / 2);
        cut();
        const cutAt = Date.now();
        const registry = await open(name);
        let b: SnowflakeWorker | undefined;
        while (b === undefined) {
          b = await startWorker(registry, {
            layout: oneWorker,
            identity: B,
            clock: new MonotonicClock(),
          }).catch(async (error: unknown) => {
            assert.ok(isIdMintError(error, 'WORKER_IDS_EXHAUSTED'), String(error));
            await delay(50);
            return undefined;
          });
        }
        const takenAt = Date.now();
        const lastByA = issued.reduce((max, i) => Math.max(max, i.at), 0);
        assert.ok(
          fencedAt > cutAt && fencedAt < takenAt,
          `A fenced at +${fencedAt - cutAt} ms, B took the ID at +${takenAt - cutAt} ms`,
        );
        assert.ok(lastByA < takenAt, 'A issued nothing once B could');
        const fromB = b.nextBatch(1000);
        restore();
        // A learns the lease is gone, and cannot get the only ID while B holds it.
        await waitFor(
          'A to notice the loss',
          () => a.state().leaseLosses === 1 || a.state().status === 'recovering',
        );
        assert.throws(
          () => a.next(),
          (error) => isIdMintError(error, 'LEASE_LOST'),
        );
        const before = issued.filter((i) => i.at < takenAt).map((i) => i.id);
        await b.close();
        const closedAt = Date.now();
        assert.deepEqual(
          issued.filter((i) => i.at >= takenAt && i.at <= closedAt),
          [],
          'A issued nothing while B held the ID',
        );
        await waitFor('A to hold a confirmed lease again', () => a.state().status === 'active');
        const fromA = a.nextBatch(1000);
        const all = [...issued.map((i) => i.id), ...fromB, ...fromA];
        assert.equal(new Set(all).size, all.length, 'no ID issued twice');
        assert.ok(
          (fromB[0] ?? 0n) > (before.at(-1) ?? 0n) && (fromA[0] ?? 0n) > (fromB.at(-1) ?? 0n),
          'each holder starts after the last',
        );
      } finally {
        clearInterval(pump);
        restore();
        await a.close().catch(() => {});
      }
    });

    it('start-up clock checks: behind the holder or far from peers (inv. 4)', async () => {
      const registry = await open(namespace());
      const clock = new ManualClock(T0);
      const first = await startWorker(registry, { layout: oneWorker, clock });
      first.next();
      await first.close();
      clock.set(T0 - 30_000);
      await assert.rejects(startWorker(registry, { layout: oneWorker, clock }), (error) => {
        assert.ok(isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'));
        assert.match(
          error.message,
          new RegExp(
            `${new Date(T0 - 30_000).toISOString()}.*behind ${new Date(T0).toISOString()}`,
          ),
        );
        return true;
      });
      // Peers: one node running with a correct clock; a second one 20 s ahead is refused.
      clock.set(T0 + 1000);
      const peer = await startWorker(registry, { layout: eightWorkers, clock });
      const ahead = new ManualClock(T0 + 21_000);
      await assert.rejects(
        startWorker(registry, { layout: eightWorkers, clock: ahead, identity: B }),
        (error) => {
          assert.ok(isIdMintError(error, 'CLOCK_SKEW'));
          assert.match(
            error.message,
            new RegExp(
              `${new Date(T0 + 21_000).toISOString()}, (19|20)\\d{3} ms ahead of the mean ` +
                `of 1 live peers`,
            ),
          );
          return true;
        },
      );
      ahead.set(clock.now() + 1000);
      const near = await startWorker(registry, { layout: eightWorkers, clock: ahead, identity: B });
      assert.notEqual(near.workerId, peer.workerId);
      await near.close();
      await peer.close();
    });

    it('switch-worker: continues on an ID last used before the clock (inv. 5)', async () => {
      const registry = await open(namespace());
      const clock = new ManualClock(T0);
      const worker = await startWorker(registry, {
        layout: eightWorkers,
        clock,
        rollback: { policy: 'switch-worker' },
      });
      const first = worker.workerId;
      const ids = worker.nextBatch(5000);
      clock.advance(2);
      ids.push(...worker.nextBatch(5000));
      clock.advance(-60_000);
      assert.throws(
        () => worker.next(),
        (error) => isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'),
      );
      await waitFor('the switch', () => worker.state().workerSwitches === 1);
      assert.notEqual(worker.workerId, first);
      const after = worker.nextBatch(5000);
      assert.ok(after.every((id) => decomposeId(id, eightWorkers).timestamp <= T0 - 59_000));
      assert.equal(new Set([...ids, ...after]).size, 15_000);
      await worker.close();
      // The ID left behind kept its last timestamp: its next holder starts after it.
      const old = await registry.acquire({ identity: B, maxWorkers: 8, workerId: first });
      assert.ok(old.lastTimestamp >= T0 + 2);
      await release(old);
    });
  });
}

/**
 * Interleavings: a registry paused between two steps of its protocol (its `interleave` hook, see
 * src/registries/common.ts) while another node runs a whole cycle on the same worker ID. The
 * outcome of calls made one after another says nothing about these gaps; most duplicate-ID bugs
 * live in them. Each scenario issues real IDs through the worker and a generator, as the service
 * does, checks that none repeats, and reads the stored record behind the registry's back to check
 * it never went below what a running holder was fenced at. Runs on every backend, the static
 * registry and the weak-dependency cache included.
 */
export async function runInterleavingSuite(harness: RegistryHarness): Promise<void> {
  await describeWithServices(
    `${harness.backend} worker registry, interleavings`,
    harness.services,
    () => {
      const renew = {
        renewIntervalMs: Math.floor(harness.ttlMs / 6),
        safetyMarginMs: Math.floor(harness.ttlMs / 6),
      };
      const opened: WorkerRegistry[] = [];
      const names: string[] = [];
      const namespace = () => {
        const name = uniqueName('i');
        names.push(name);
        return name;
      };
      const open = async (name: string, interleave?: Interleave) => {
        const registry = await openWorkerRegistry(harness.url(name), {
          ...harness.options(name),
          interleave,
        });
        opened.push(registry);
        return registry;
      };
      // Every node of a scenario has the same identity (processes on one host): the registry's
      // preference for an identity's old ID then sends them all to the same one.
      const startWorker = (
        registry: WorkerRegistry,
        clock: ManualClock,
        onEvent?: (event: SnowflakeWorkerEvent) => void,
      ) =>
        SnowflakeWorker.start({
          registry,
          identity: A,
          layout: oneWorker,
          clock,
          ...renew,
          onEvent,
        });
      const timestampOf = (id: bigint) => decomposeId(id, oneWorker).timestamp;
      const assertUnique = (ids: readonly bigint[]) => {
        const repeated = ids.length - new Set(ids).size;
        assert.equal(repeated, 0, `${repeated} of ${ids.length} IDs were issued twice`);
      };
      /** The stored record covers every ID issued: whoever holds the ID next starts after them. */
      const assertCovers = async (name: string, ids: readonly bigint[], when: string) => {
        const record = await harness.record(name, 0);
        const last = Math.max(...ids.map(timestampOf));
        assert.ok(
          record !== undefined && record.lastTimestamp >= last,
          `${when}: the stored record ${JSON.stringify(record)} is below the last ID issued ` +
            `(${last})`,
        );
      };

      after(async () => {
        await Promise.all(opened.map((registry) => registry.close().catch(() => {})));
        for (const name of names) await harness.cleanup(name);
      });

      /** Leaves a record behind for worker 0, so a paused node has an old one to read. */
      const oldRecords: [string, (name: string) => Promise<bigint[]>][] = [
        [
          'a previous holder released',
          async (name) => {
            const first = await startWorker(await open(name), new ManualClock(T0 - 60_000));
            const ids = first.nextBatch(5);
            await first.close();
            return ids;
          },
        ],
      ];
      const seed = harness.seedRecord;
      if (seed !== undefined) {
        oldRecords.push([
          'seeded directly',
          async (name) => {
            await seed(name, A, 0, { lastTimestamp: T0 - 60_000, reportedAt: T0 - 60_000 });
            return [];
          },
        ]);
      }

      for (const [how, leaveRecord] of oldRecords) {
        it(`paused between read and claim, starts from the record after its claim (${how})`, {
          timeout: 60_000,
        }, async () => {
          const name = namespace();
          const issued = await leaveRecord(name);

          let pauses = 0;
          const paused = await open(name, async (step) => {
            if (step.point !== 'before-claim' || pauses++ > 0) return;
            // The gap: node C, its clock at T0, takes the same ID, issues and releases it.
            const c = await startWorker(await open(name), new ManualClock(T0));
            issued.push(...c.nextBatch(5));
            await c.close();
            assert.equal(
              (await harness.record(name, 0))?.lastTimestamp,
              T0,
              "C's release records its exact last timestamp",
            );
          });
          // B's clock reads what C's did: C's IDs are in B's current millisecond. Waiting for the
          // clock to pass C's last timestamp is the right outcome; the test then lets it pass.
          const clockB = new ManualClock(T0);
          const b = await startWorker(paused, clockB, (event) => {
            if (event.type === 'waiting-for-clock') clockB.set(T0 + 1);
          });
          const fromB = b.nextBatch(5);
          assert.equal(pauses >= 1, true, 'the registry paused before its claim');
          await assertCovers(name, [...issued, ...fromB], 'while B runs');
          issued.push(...fromB);
          await b.close();
          assertUnique(issued);
          await assertCovers(name, issued, 'after B released');
        });
      }

      it('paused before its claim, never gets an ID whose record rose past its bound', {
        timeout: 60_000,
      }, async () => {
        const name = namespace();
        // The ID was last used long before T0: it qualifies when the paused node reads it.
        const first = await (await open(name)).acquire({ identity: A, maxWorkers: 1 });
        await first.release({ lastTimestamp: T0 - 60_000, reportedAt: T0 - 60_000 });
        let pauses = 0;
        let gap: unknown = 'never ran';
        const paused = await open(name, async (step) => {
          if (step.point !== 'before-claim' || pauses++ > 0) return;
          // The gap: another node takes the only ID and leaves it last used at T0 + 10.
          gap = await (await open(name))
            .acquire({ identity: B, maxWorkers: 1 })
            .then((c) => c.release({ lastTimestamp: T0 + 10, reportedAt: T0 + 10 }))
            .catch((error: unknown) => error);
        });
        // switch-worker asks for an ID last used before its clock, to start on it at once.
        await assert.rejects(
          paused.acquire({ identity: A, maxWorkers: 1, lastTimestampBelow: T0 }),
          (error) => isIdMintError(error, 'WORKER_IDS_EXHAUSTED'),
        );
        assert.equal(gap, undefined, 'the other node acquired and released the ID in the gap');
        // Nothing was left claimed: the ID goes to the next node at once, with the record C left.
        const next = await (await open(name)).acquire({ identity: B, maxWorkers: 1 });
        assert.deepEqual([next.workerId, next.lastTimestamp], [0, T0 + 10]);
        await next.release({ lastTimestamp: T0 + 10, reportedAt: T0 + 10 });
      });

      it("a renewal landing after the release never writes the next holder's record", {
        timeout: 60_000,
      }, async () => {
        const name = namespace();
        let land: (() => void) | undefined;
        const a = await open(name, (step) => {
          if (
            step.point !== 'before-renew-write' ||
            step.report?.lastTimestamp !== T0 + 50_000 ||
            land !== undefined
          )
            return;
          return new Promise<void>((resolve) => {
            land = resolve;
          });
        });
        const lease = await a.acquire({ identity: A, maxWorkers: 1 });
        const late = lease.renew({ lastTimestamp: T0 + 50_000, reportedAt: T0 + 1000 });
        await waitFor('the renewal to be on its way', () => land !== undefined);
        // The holder stops and releases; the next node (on the same host) takes the ID and records
        // its own report.
        await lease.release({ lastTimestamp: T0, reportedAt: T0 });
        const next = await (await open(name)).acquire({ identity: A, maxWorkers: 1 });
        assert.deepEqual(
          [next.lastTimestamp, next.reportedAt],
          [T0, T0],
          'the released record, exactly',
        );
        await next.renew({ lastTimestamp: T0 + 2000, reportedAt: T0 + 1500 });
        land?.();
        const outcome = await late.then(
          () => 'it landed',
          (error: unknown) => error,
        );
        assert.ok(isIdMintError(outcome, 'LEASE_LOST'), `the late renewal: ${String(outcome)}`);
        const record = await harness.record(name, 0);
        assert.deepEqual(
          record && [record.lastTimestamp, record.reportedAt],
          [T0 + 2000, T0 + 1500],
          "the next holder's record, untouched",
        );
        await next.release({ lastTimestamp: T0 + 2000, reportedAt: T0 + 1500 });
      });

      it('a renewal landing after a later one never ends the lease earlier', {
        timeout: 60_000,
      }, async (t) => {
        const name = namespace();
        const stale = { lastTimestamp: T0 + 3000, reportedAt: T0 };
        let land: (() => void) | undefined;
        const a = await open(name, (step) => {
          if (
            step.point !== 'before-renew-write' ||
            step.report?.lastTimestamp !== stale.lastTimestamp ||
            land !== undefined
          )
            return;
          return new Promise<void>((resolve) => {
            land = resolve;
          });
        });
        const lease = await a.acquire({ identity: A, maxWorkers: 1 });
        // A renewal the holder gave up on is still on its way; a third of a TTL later the next
        // one lands, and then the first. A grant timed from the first one's sending would end a
        // third of a TTL before the one the holder heard of.
        const late = lease.renew(stale);
        await waitFor('the first renewal to be on its way', () => land !== undefined);
        await delay(Math.floor(harness.ttlMs / 3));
        await lease.renew({ lastTimestamp: T0 + 3100, reportedAt: T0 + 100 });
        const heard = (await harness.record(name, lease.workerId))?.leaseEndsAt;
        land?.();
        await late;
        const landed = (await harness.record(name, lease.workerId))?.leaseEndsAt;
        if (heard !== undefined) {
          assert.ok(
            landed !== undefined && landed >= heard,
            `the late renewal moved the lease's end from ${heard} to ${landed}`,
          );
          t.diagnostic(`the late renewal moved the lease's end by ${landed - heard} ms`);
        } else t.diagnostic(`${harness.backend} keeps no lease end per worker ID to read`);
        // Either way the lease still holds the ID: no other node gets it.
        await assert.rejects((await open(name)).acquire({ identity: B, maxWorkers: 1 }), (error) =>
          isIdMintError(error, 'WORKER_IDS_EXHAUSTED'),
        );
        await lease.release({ lastTimestamp: T0 + 3100, reportedAt: T0 + 100 });
      });

      it('renewals landing out of order never lower the record below the running fence', {
        timeout: 60_000,
      }, async () => {
        const name = namespace();
        const H1 = T0 + 2000;
        const H2 = T0 + 2100;
        let land: (() => void) | undefined;
        const a = await open(name, (step) => {
          if (
            step.point !== 'before-renew-write' ||
            step.report?.lastTimestamp !== H1 ||
            land !== undefined
          )
            return;
          return new Promise<void>((resolve) => {
            land = resolve;
          });
        });
        // Node A, as the service runs a lease: a generator fenced at what the registry confirmed.
        const lease = await a.acquire({ identity: A, maxWorkers: 1 });
        const clockA = new ManualClock(T0);
        const generator = new SnowflakeGenerator({
          clock: clockA,
          layout: oneWorker,
          workerId: lease.workerId,
        });
        generator.setValidUntil(Number.NEGATIVE_INFINITY);
        // A renewal gives up (it is slow to land) and the retry, with a higher horizon, lands
        // first.
        const late = lease.renew({ lastTimestamp: H1, reportedAt: T0 });
        await waitFor('the first renewal to be on its way', () => land !== undefined);
        await lease.renew({ lastTimestamp: H2, reportedAt: T0 + 100 });
        generator.setValidUntil(H2);
        land?.();
        // its outcome does not matter to A any more; where it lands does
        await late.catch(() => {});
        const afterLate = await harness.record(name, lease.workerId);
        clockA.set(H2 - 1);
        const fromA = generator.nextBatch(5);
        // A dies without a release; the next holder takes the ID once its lease is gone.
        await a.close();
        const next = await open(name);
        const clockB = new ManualClock(H2 - 1);
        let b: SnowflakeWorker | undefined;
        while (b === undefined) {
          b = await startWorker(next, clockB, (event) => {
            if (event.type === 'waiting-for-clock') clockB.set(H2 + 1);
          }).catch(async (error: unknown) => {
            assert.ok(isIdMintError(error, 'WORKER_IDS_EXHAUSTED'), String(error));
            await delay(100);
            return undefined;
          });
        }
        const fromB = b.nextBatch(5);
        await b.close();
        assertUnique([...fromA, ...fromB]);
        assert.ok(
          afterLate !== undefined &&
            afterLate.lastTimestamp >= H2 &&
            afterLate.reportedAt >= T0 + 100,
          `the late renewal lowered the record to ${JSON.stringify(afterLate)}, below the ` +
            `fence A ran with (${H2})`,
        );
        await assertCovers(name, [...fromA, ...fromB], 'after the next holder released');
      });
    },
  );
}
