// The registries that find a free worker ID without reading every record (SQL: bounded pages of
// free rows and of runs of unused IDs; Redis: the lease-expiry index and the next-unused hint),
// against real services with the 10-bit worker field nearly full: the shortcuts must never hand
// one ID to two nodes, and must never say "none free" while one is.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { isIdMintError } from '../../src/core/errors.ts';
import type { WorkerLease, WorkerRegistry } from '../../src/ports/worker-registry.ts';
import {
  openWorkerRegistry,
  type OpenWorkerRegistryOptions,
} from '../../src/backends/open-worker-registry.ts';
import { deleteRedisNamespace, dropSqlTable } from '../support/registry-admin.ts';
import {
  SERVICES,
  describeWithServices,
  uniqueName,
  type ServiceName,
} from '../support/services.ts';
import { tempDir } from '../support/workers.ts';

const MAX = 1024;
const dir = await tempDir('crowded-registry');
const table = uniqueName('worker_node');

interface Backend {
  readonly backend: string;
  readonly services: readonly ServiceName[];
  readonly url: string;
  options(name: string): OpenWorkerRegistryOptions;
  /** Removes what one namespace left (Redis keys). */
  cleanup(name: string): Promise<void>;
  /** Removes what the backend's suite left (the table, the SQLite file), once it has ended. */
  dispose(): Promise<void>;
}

const BACKENDS: readonly Backend[] = [
  {
    backend: 'sqlite',
    services: [],
    url: `sqlite:${join(dir.path, 'workers.db')}`,
    options: (name) => ({ name }),
    cleanup: async () => {},
    dispose: () => dir.dispose(),
  },
  {
    backend: 'postgres',
    services: ['postgres'],
    url: SERVICES.postgres.url,
    options: (name) => ({ name, table }),
    cleanup: async () => {},
    dispose: () => dropSqlTable(SERVICES.postgres.url, table),
  },
  {
    backend: 'mysql',
    services: ['mysql'],
    url: SERVICES.mysql.url,
    options: (name) => ({ name, table }),
    cleanup: async () => {},
    dispose: () => dropSqlTable(SERVICES.mysql.url, table),
  },
  {
    backend: 'redis',
    services: ['redis'],
    url: SERVICES.redis.url,
    options: (name) => ({ name }),
    cleanup: (name) => deleteRedisNamespace(SERVICES.redis.url, name),
    dispose: async () => {},
  },
];

const release = (lease: WorkerLease) =>
  lease.release({ lastTimestamp: lease.lastTimestamp, reportedAt: lease.reportedAt });
const node = (n: number) => ({ host: `10.9.${n >> 8}.${n & 255}`, port: 8080 });

for (const b of BACKENDS) {
  await describeWithServices(
    `${b.backend} worker registry with the worker IDs nearly all held`,
    b.services,
    () => {
      const opened: WorkerRegistry[] = [];
      const names: string[] = [];
      const open = async (name: string, count: number) => {
        // A long TTL: the leases must stay live without renewals for the whole test.
        const registries = await Promise.all(
          Array.from({ length: count }, () =>
            openWorkerRegistry(b.url, { ...b.options(name), ttlMs: 120_000 }),
          ),
        );
        opened.push(...registries);
        return registries;
      };
      const namespace = () => {
        const name = uniqueName('crowd');
        names.push(name);
        return name;
      };
      after(async () => {
        await Promise.all(opened.map((registry) => registry.close().catch(() => {})));
        for (const name of names) await b.cleanup(name);
        // Here, not in a file-level after(): that one can run in the pause between two suites
        // (each is declared after an await) and dropped the PostgreSQL table under the next suite.
        await b.dispose().catch(() => {});
      });

      it('1,023 IDs taken by racing nodes, 8 racing for the last: one winner', {
        timeout: 240_000,
      }, async () => {
        const name = namespace();
        const fillers = await open(name, 4);
        const held: WorkerLease[] = [];
        // Waves of 32 concurrent acquires spread over 4 registries (4 connections or sessions).
        for (let from = 0; from < MAX - 1; from += 32) {
          const wave = Array.from({ length: Math.min(32, MAX - 1 - from) }, (_, i) =>
            fillers[(from + i) % 4]!.acquire({ identity: node(from + i), maxWorkers: MAX }),
          );
          held.push(...(await Promise.all(wave)));
        }
        const ids = held.map((lease) => lease.workerId);
        assert.equal(new Set(ids).size, MAX - 1, 'no worker ID went to two of the 1,023 nodes');
        const last = Array.from({ length: MAX }, (_, id) => id).find((id) => !ids.includes(id));

        const racers = await open(name, 8);
        const outcomes = await Promise.allSettled(
          racers.map((registry, i) =>
            registry.acquire({ identity: node(2000 + i), maxWorkers: MAX }),
          ),
        );
        const won = outcomes.filter((o) => o.status === 'fulfilled').map((o) => o.value);
        assert.deepEqual(
          won.map((lease) => lease.workerId),
          [last],
          'exactly one racer got the one free ID',
        );
        for (const outcome of outcomes) {
          if (outcome.status === 'rejected')
            assert.ok(
              isIdMintError(outcome.reason, 'WORKER_IDS_EXHAUSTED'),
              String(outcome.reason),
            );
        }

        // Three IDs far apart come free; six nodes race for them: three get them, once each.
        const freed = [held[5]!, held[600]!, held[1000]!];
        for (const lease of freed) await release(lease);
        const second = await Promise.allSettled(
          racers
            .slice(0, 6)
            .map((registry, i) => registry.acquire({ identity: node(3000 + i), maxWorkers: MAX })),
        );
        const got = second.filter((o) => o.status === 'fulfilled').map((o) => o.value.workerId);
        assert.deepEqual(
          got.sort((x, y) => x - y),
          freed.map((lease) => lease.workerId).sort((x, y) => x - y),
        );
        assert.equal(
          second.filter(
            (o) => o.status === 'rejected' && isIdMintError(o.reason, 'WORKER_IDS_EXHAUSTED'),
          ).length,
          3,
        );
      });

      it('recycles released IDs lowest first, whatever order they were released in', {
        timeout: 60_000,
      }, async () => {
        const [registry] = await open(namespace(), 1);
        const held: WorkerLease[] = [];
        for (let n = 0; n < 12; n++)
          held.push(await registry!.acquire({ identity: node(n), maxWorkers: MAX }));
        for (const id of [9, 3, 7]) await release(held[id]!);
        const next = [];
        for (let n = 20; n < 23; n++)
          next.push((await registry!.acquire({ identity: node(n), maxWorkers: MAX })).workerId);
        assert.deepEqual(next, [3, 7, 9]);
      });

      it('finds an unused ID in a gap, past more excluded IDs than a page', {
        timeout: 60_000,
      }, async () => {
        const name = namespace();
        const [registry] = await open(name, 1);
        // IDs 0 to 39 used, except 30 never: 0 to 29 then released (free, recorded), 31 to 39 held.
        const taken: WorkerLease[] = [];
        for (let id = 0; id < 40; id++)
          if (id !== 30)
            taken.push(
              await registry!.acquire({ identity: node(id), maxWorkers: MAX, workerId: id }),
            );
        for (const lease of taken.slice(0, 30)) await release(lease);
        const exclude = Array.from({ length: 25 }, (_, id) => id);
        const past = await registry!.acquire({ identity: node(100), maxWorkers: MAX, exclude });
        assert.equal(
          past.workerId,
          25,
          'the lowest free ID not excluded, past a page of excluded ones',
        );
        const all = Array.from({ length: 30 }, (_, id) => id);
        const gap = await registry!.acquire({ identity: node(101), maxWorkers: MAX, exclude: all });
        assert.equal(gap.workerId, 30, 'the never-used ID between used ones');
        const beyond = await registry!.acquire({
          identity: node(102),
          maxWorkers: MAX,
          exclude: all,
        });
        assert.equal(beyond.workerId, 40, 'then the first ID past every used one');
        // Every ID held: 0 to 29 excluded, the rest live, 40 and up past a 41-ID layout.
        await assert.rejects(
          registry!.acquire({ identity: node(103), maxWorkers: 41, exclude: all }),
          (error) => isIdMintError(error, 'WORKER_IDS_EXHAUSTED'),
        );
      });
    },
  );
}
