import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { isIdMintError } from '../../src/core/errors.ts';
import {
  openWorkerRegistry,
  type OpenWorkerRegistryOptions,
} from '../../src/backends/open-worker-registry.ts';
import type { WorkerLease, WorkerRegistry } from '../../src/ports/worker-registry.ts';
import { SnowflakeWorker, type SnowflakeWorkerEvent } from '../../src/service/snowflake-worker.ts';
import { REGISTRY_HISTORY_TABLE } from '../../src/registries/sql/sql-registry-history.ts';
import { Redis } from 'ioredis';
import { deleteRedisNamespace, dropSqlTable, runSql } from '../support/registry-admin.ts';
import {
  SERVICES,
  describeWithServices,
  uniqueName,
  type ServiceName,
} from '../support/services.ts';
import { describeWithReplication, startReplicaPair } from '../support/replication.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';
import { tempDir } from '../support/workers.ts';

// A registry whose database moved to another history (a failover to a replica that lagged, a
// restore) may have lost the lease row of a worker ID while its holder still issues. Node B must
// not get that worker ID until the holder has stopped, nor start below what the holder issued
// (docs/workers.md, "When the database's history changes").

const TTL_MS = 1500;
/** The most a `borrow` holder's IDs lead its clock: its horizon is this past its lease's end. */
const LEAD_MS = 500;

/** One registry backend: where it is, and how to lose a lease behind its back. */
interface HistoryBackend {
  readonly title: string;
  readonly services: readonly ServiceName[];
  /** The registry's URL and its options (a namespace of this test's own). */
  readonly url: string;
  readonly options: OpenWorkerRegistryOptions;
  /** A registry on a namespace (table, file) of this test's own. */
  open(): Promise<WorkerRegistry>;
  /** Deletes the lease data of `workerId`, as a database without its latest writes has none. */
  loseLease(workerId: number): Promise<void>;
  /** The history record says another history than the live one, as a promoted replica's does. */
  recordOtherHistory(): Promise<void>;
  /** The history record is gone (the rows restored without it). */
  loseHistoryRecord(): Promise<void>;
  cleanup(): Promise<void>;
}

function sqlBackend(title: string, url: () => string, service?: ServiceName): HistoryBackend {
  const table = uniqueName('worker_history');
  const name = 'history';
  const record = `${REGISTRY_HISTORY_TABLE} WHERE registry_table = '${table}'`;
  const otherHistory = `UPDATE ${REGISTRY_HISTORY_TABLE} SET history = ? WHERE registry_table = ?`;
  const options = { name, table, ttlMs: TTL_MS, maxLeadMs: LEAD_MS };
  return {
    title,
    services: service === undefined ? [] : [service],
    url: url(),
    options,
    open: () => openWorkerRegistry(url(), options),
    loseLease: async (workerId) => {
      await runSql(url(), `DELETE FROM ${table} WHERE name = ? AND worker_id = ?`, [
        name,
        workerId,
      ]);
    },
    recordOtherHistory: async () => {
      // Before the fix there is no history table: nothing to change.
      await runSql(url(), otherHistory, ['an older history', table]).catch(() => {});
    },
    loseHistoryRecord: async () => {
      // Before the fix there is no history table: nothing to lose.
      await runSql(url(), `DELETE FROM ${record}`).catch(() => {});
    },
    cleanup: async () => {
      if (service === undefined) return;
      await dropSqlTable(url(), table).catch(() => {});
      await runSql(url(), `DELETE FROM ${record}`).catch(() => {});
    },
  };
}

function redisBackend(): HistoryBackend {
  const url = SERVICES.redis.url;
  const name = uniqueName('history');
  const key = (suffix: string) => `idmint:workers:{${name}}:${suffix}`;
  const redis = async <T>(run: (client: Redis) => Promise<T>) => {
    const client = new Redis(url, { lazyConnect: true });
    await client.connect();
    try {
      return await run(client);
    } finally {
      client.disconnect();
    }
  };
  return {
    title: 'redis',
    services: ['redis'],
    url,
    options: { name, ttlMs: TTL_MS, maxLeadMs: LEAD_MS },
    open: () => openWorkerRegistry(url, { name, ttlMs: TTL_MS, maxLeadMs: LEAD_MS }),
    loseLease: async (workerId) => {
      await redis((client) => client.del(key(`lease:${workerId}`), key(`record:${workerId}`)));
    },
    recordOtherHistory: async () => {
      await redis((client) => client.hset(key('history'), 'history', 'an older history'));
    },
    loseHistoryRecord: async () => {
      await redis((client) => client.del(key('history')));
    },
    cleanup: () => deleteRedisNamespace(url, name),
  };
}

const dir = await tempDir('registry-history');
after(() => dir.dispose());

const backends = (): HistoryBackend[] => [
  sqlBackend('postgres', () => SERVICES.postgres.url, 'postgres'),
  sqlBackend('mysql', () => SERVICES.mysql.url, 'mysql'),
  sqlBackend('sqlite', () => `sqlite:${join(dir.path, 'workers.db')}`),
  redisBackend(),
];

const node = (host: string) => ({ identity: { host, port: 1 }, maxWorkers: 8 });

/** Acquires until a lease is granted (a settling registry refuses, retryably). */
async function acquireWhenSettled(
  registry: WorkerRegistry,
  workerId: number,
): Promise<WorkerLease> {
  const deadline = Date.now() + 20 * TTL_MS;
  for (;;) {
    try {
      return await registry.acquire({ ...node('b'), workerId });
    } catch (error) {
      if (!isIdMintError(error, 'REGISTRY_UNAVAILABLE') || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/**
 * A renews worker `lease` with a horizon of its lease's end plus the lead; `lose` loses it behind
 * the registry's back; B, asking for the same worker ID until granted, must get it only after A's
 * lease could end, and start above every timestamp A may have issued.
 */
async function checkTakeover(
  leaseA: WorkerLease,
  b: WorkerRegistry,
  lose: () => Promise<void>,
): Promise<void> {
  const renewedAt = Date.now();
  // A may issue until renewedAt + TTL, with timestamps up to its lead past that.
  const horizon = renewedAt + TTL_MS + LEAD_MS;
  await leaseA.renew({ lastTimestamp: horizon, reportedAt: renewedAt });
  await lose();
  const leaseB = await acquireWhenSettled(b, leaseA.workerId);
  const grantedBy = Date.now();
  assert.ok(
    grantedBy >= renewedAt + TTL_MS,
    `B got worker ${leaseB.workerId} ${renewedAt + TTL_MS - grantedBy} ms before A's ` +
      'lease on it could end: both issue with it',
  );
  assert.ok(
    leaseB.lastTimestamp >= horizon,
    `B starts from ${leaseB.lastTimestamp}, below ${horizon}, which A may have issued at`,
  );
}

for (const losing of ['the record names another history', 'the record is lost'] as const) {
  for (const backend of backends()) {
    await describeWithServices(`${backend.title} registry: ${losing}`, backend.services, () => {
      after(() => backend.cleanup());

      it('grants the lost worker ID after the holder stopped, above what it issued', async () => {
        const [a, c, b] = [await backend.open(), await backend.open(), await backend.open()];
        try {
          const leaseA = await a.acquire(node('a'));
          await c.acquire(node('c')); // another worker: the registry is not empty
          await checkTakeover(leaseA, b, async () => {
            await backend.loseLease(leaseA.workerId);
            if (losing === 'the record is lost') await backend.loseHistoryRecord();
            else await backend.recordOtherHistory();
          });
          await assert.rejects(
            leaseA.renew({ lastTimestamp: Date.now() + TTL_MS, reportedAt: Date.now() }),
            (error) => isIdMintError(error, 'LEASE_LOST'),
          );
        } finally {
          await Promise.all([a.close(), b.close(), c.close()]);
        }
      });
    });
  }
}

for (const backend of backends()) {
  await describeWithServices(`${backend.title} registry's history`, backend.services, () => {
    after(() => backend.cleanup());

    it('costs a fresh registry nothing: the first acquires are granted at once', async () => {
      const [a, b] = [await backend.open(), await backend.open()];
      try {
        const first = await a.acquire(node('a'));
        const second = await b.acquire(node('b'));
        assert.deepEqual([first.lastTimestamp, second.lastTimestamp], [-1, -1]);
        assert.notEqual(first.workerId, second.workerId);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });

    it('a worker starting while the registry settles waits it out, then issues', async () => {
      const [a, b] = [await backend.open(), await backend.open()];
      try {
        await a.acquire(node('a'));
        await backend.loseHistoryRecord(); // lease rows without a record: the next acquire fences
        const events: SnowflakeWorkerEvent[] = [];
        const started = Date.now();
        const worker = await SnowflakeWorker.start({
          registry: b,
          identity: { host: 'b', port: 1 },
          peerClockCheck: 'off',
          onEvent: (event) => events.push(event),
        });
        try {
          const waited = events.filter((event) => event.type === 'waiting-for-registry');
          assert.equal(waited.length, 1, JSON.stringify(events));
          assert.match(waited[0]?.message ?? '', /moved to a new history/);
          assert.ok(Date.now() - started >= TTL_MS, 'started before the settle could end');
          assert.equal(worker.state().status, 'active');
          assert.ok(worker.next() > 0n);
        } finally {
          await worker.close();
        }
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });

    it('fails a renewal on another history as LEASE_LOST, its row there or not', async () => {
      const a = await backend.open();
      try {
        const lease = await a.acquire(node('a'));
        await backend.recordOtherHistory();
        await assert.rejects(
          lease.renew({ lastTimestamp: Date.now() + TTL_MS, reportedAt: Date.now() }),
          (error) => isIdMintError(error, 'LEASE_LOST'),
        );
      } finally {
        await a.close();
      }
    });
  });
}

// The same on real replication: a node leases worker 0 while the replica is held back, the
// primary dies and the replica, which never saw that lease, is promoted behind the same address.
for (const backend of ['postgres', 'mariadb', 'redis'] as const) {
  await describeWithReplication(`${backend} registry across a failover`, backend, () => {
    it('grants the lease the replica lost only after its holder stopped', {
      timeout: 120_000,
    }, async (t) => {
      const pair = await startReplicaPair(backend);
      t.after(() => pair.stop());
      const front = await TcpProxy.start(pair.primary);
      t.after(() => front.close());
      const options = { name: 'failover', table: uniqueName('worker_failover'), ttlMs: TTL_MS };
      const open = () =>
        openWorkerRegistry(pair.url(front.port), { ...options, maxLeadMs: LEAD_MS });
      const [a, b, c] = [await open(), await open(), await open()];
      t.after(() => Promise.all([a.close(), b.close(), c.close()]).then(() => {}));

      // Worker 0 held and released by C while replication keeps up: the replica has its row.
      const leaseC = await c.acquire(node('c'));
      await leaseC.release({ lastTimestamp: Date.now(), reportedAt: Date.now() });
      await pair.caughtUp();
      pair.holdReplication();
      const leaseA = await a.acquire(node('a'));
      assert.equal(leaseA.workerId, leaseC.workerId);
      await checkTakeover(leaseA, b, async () => {
        await pair.killPrimary();
        await pair.promote();
        front.retarget(pair.replica);
      });
    });
  });
}

// A failover between acquire's history check and its claim: the claim lands on the new history,
// and the read after it, on the same server, must give it back (SQL claims in two statements;
// Redis checks and claims in one script).
for (const backend of backends().filter((b) => b.title !== 'redis')) {
  await describeWithServices(
    `${backend.title} registry: history changing`,
    backend.services,
    () => {
      after(() => backend.cleanup());

      it('between the check and the claim, the claim is given back', async () => {
        const first = await backend.open();
        await first.acquire(node('first')); // recorded history, and a row
        await first.close();
        let changed = false;
        const b = await openWorkerRegistry(backend.url, {
          ...backend.options,
          interleave: async ({ point }) => {
            if (point !== 'before-claim' || changed) return;
            changed = true;
            await backend.recordOtherHistory();
          },
        });
        try {
          await assert.rejects(b.acquire({ ...node('b'), workerId: 5 }), (error) => {
            assert.ok(isIdMintError(error, 'REGISTRY_UNAVAILABLE'), String(error));
            assert.match(error.message, /new history/);
            return true;
          });
          assert.ok(changed, 'the history changed between check and claim');
          const [row] = await runSql(
            backend.url,
            `SELECT holder FROM ${backend.options.table} WHERE name = ? AND worker_id = 5`,
            [backend.options.name ?? ''],
          );
          assert.equal(row?.['holder'] ?? null, null, 'worker 5 is held by nobody');
        } finally {
          await b.close();
        }
      });
    },
  );
}

// Leaf's weak dependency starts from its file when the registry cannot be reached; a settling
// registry is reached, and the cached ID may be the one a lost lease's holder still issues with.
await describeWithServices('a cached node on a settling registry', [], () => {
  it('is refused, never started from its cache file', async (t) => {
    // A directory of its own: the file's is disposed of after the suites above, which may end
    // while this one is being declared.
    const own = await tempDir('registry-history-cache');
    t.after(() => own.dispose());
    const backend = sqlBackend('sqlite', () => `sqlite:${join(own.path, 'workers.db')}`);
    const cacheFile = join(own.path, 'worker.cache');
    const open = () => openWorkerRegistry(backend.url, { ...backend.options, cacheFile });
    const before = await open();
    const lease = await before.acquire(node('a'));
    await lease.release({ lastTimestamp: Date.now(), reportedAt: Date.now() });
    await before.close();
    await backend.recordOtherHistory();

    const restarted = await open();
    try {
      await assert.rejects(restarted.acquire(node('a')), (error) => {
        assert.ok(isIdMintError(error, 'REGISTRY_UNAVAILABLE'), String(error));
        assert.match(error.message, /new history/);
        return true;
      });
    } finally {
      await restarted.close();
    }
  });
});
