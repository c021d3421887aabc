// Issue 23.4: a store or registry that fails while idmint runs is told in one line naming the
// backend, its address and the cause as the operating system (or the database) gave it, with the
// operation in words: `postgres segment store at 127.0.0.1:5432, allocating a range: connection
// refused`. Never a driver's words (etcd3's "circuit breaker is open", ioredis's "Stream isn't
// writeable", pg's "Connection terminated unexpectedly") nor a method's name ("listTagChanges
// failed"). Each real service sits behind a TcpProxy that refuses (its port closed: the service
// is down) or black-holes (connections open, nothing answers) while the adapter runs.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { openWorkerRegistry } from '../src/backends/open-worker-registry.ts';
import type { WorkerLease, WorkerRegistry } from '../src/ports/worker-registry.ts';
import { removeRegistryData } from './support/coordinators.ts';
import { assertLine } from './support/failure-lines.ts';
import { deleteRedisNamespace, dropSqlTable } from './support/registry-admin.ts';
import { SEGMENT_BACKENDS, withPort } from './support/segment-backends.ts';
import {
  SERVICES,
  type ServiceName,
  describeWithServices,
  hostPort,
  uniqueName,
} from './support/services.ts';
import { TcpProxy } from './support/tcp-proxy.ts';

/** Each call's bound; a black-holed call fails with it. */
const TIMEOUT_MS = 1000;

/** The message `promise` rejects with (a fulfilled promise fails the test). */
async function failure(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  assert.fail('the call succeeded with its backend cut off');
}

/**
 * Calls `call` until its failure ends with `want` (at most 10 times, 200 ms apart): the first
 * call after a refusal may still meet the connection the proxy dropped ("connection closed").
 * Returns every message seen.
 */
async function failuresUntil(call: () => Promise<unknown>, want: string): Promise<string[]> {
  const seen: string[] = [];
  for (let i = 0; i < 10; i++) {
    seen.push(await failure(call()));
    if (seen[seen.length - 1]?.endsWith(want)) return seen;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.fail(`never "${want}": ${seen.join(' | ')}`);
}

const STORES: [kind: string, backend: keyof typeof SEGMENT_BACKENDS, service: ServiceName][] = [
  ['postgres', 'postgres', 'postgres'],
  ['mysql', 'mariadb', 'mysql'],
  ['redis', 'redis', 'redis'],
];

for (const [kind, name, service] of STORES) {
  await describeWithServices(`a ${kind} segment store failing at runtime`, [service], () => {
    /** A store on a table of its own, through a proxy; the caller restores and disposes. */
    const open = async () => {
      const proxy = await TcpProxy.start(hostPort(SERVICES[service].url));
      const fixture = await SEGMENT_BACKENDS[name].open({
        url: withPort(SERVICES[service].url, proxy.port),
        timeoutMs: TIMEOUT_MS,
      });
      await fixture.store.createTag({ tag: 'runtime', step: 10 });
      await fixture.store.allocate('runtime');
      return { proxy, fixture, at: `${kind} segment store at ${proxy.address}` };
    };

    it('refused: "<kind> segment store at <address>, <doing>: connection refused"', async () => {
      const { proxy, fixture, at } = await open();
      try {
        await proxy.refuse();
        const seen = await failuresUntil(
          () => fixture.store.allocate('runtime'),
          'connection refused',
        );
        for (const message of seen)
          assertLine(message, `${at}, allocating a range: `, /^connection (closed|refused)$/);
        assertLine(
          await failure(fixture.store.listTags()),
          `${at}, reading the tag list: `,
          /^connection refused$/,
        );
        assertLine(
          await failure(fixture.store.getTag('runtime')),
          `${at}, reading a tag: `,
          /^connection refused$/,
        );
      } finally {
        await proxy.restore();
        await fixture.dispose();
        await proxy.close();
      }
    });

    it('black-holed: "<kind> segment store at <address>, <operation>: timed out"', async () => {
      const { proxy, fixture, at } = await open();
      try {
        proxy.hang();
        assertLine(
          await failure(fixture.store.allocate('runtime')),
          `${at}, allocating a range: `,
          new RegExp(`^timed out after ${TIMEOUT_MS} ms$`),
        );
        assertLine(
          await failure(fixture.store.listTags()),
          `${at}, reading the tag list: `,
          // mysql2 bounds a new connection itself, and says so with the system's ETIMEDOUT.
          new RegExp(`^timed out( after ${TIMEOUT_MS} ms)?$`),
        );
      } finally {
        await proxy.restore();
        await fixture.dispose();
        await proxy.close();
      }
    });
  });
}

/** A registry URL through `port`, and how to remove what its cluster `cluster` left behind. */
interface RegistryCase {
  readonly kind: string;
  readonly service: ServiceName;
  url(port: number, cluster: string): string;
  clean(cluster: string): Promise<void>;
}

const REGISTRIES: RegistryCase[] = [
  {
    kind: 'zookeeper',
    service: 'zookeeper',
    url: (port, cluster) => `zookeeper://127.0.0.1:${port}/${cluster}`,
    clean: (cluster) => removeRegistryData(`zookeeper://127.0.0.1/${cluster}`),
  },
  {
    kind: 'etcd',
    service: 'etcd',
    url: (port, cluster) => `etcd://127.0.0.1:${port}/${cluster}`,
    clean: (cluster) => removeRegistryData(`etcd://127.0.0.1/${cluster}`),
  },
  {
    kind: 'redis',
    service: 'redis',
    url: (port) => withPort(SERVICES.redis.url, port),
    clean: (cluster) => deleteRedisNamespace(SERVICES.redis.url, cluster),
  },
  {
    kind: 'postgres',
    service: 'postgres',
    url: (port) => withPort(SERVICES.postgres.url, port),
    clean: (cluster) => dropSqlTable(SERVICES.postgres.url, cluster),
  },
  {
    kind: 'mysql',
    service: 'mysql',
    url: (port) => withPort(SERVICES.mysql.url, port),
    clean: (cluster) => dropSqlTable(SERVICES.mysql.url, cluster),
  },
];

for (const registryCase of REGISTRIES) {
  const { kind, service } = registryCase;
  await describeWithServices(`a ${kind} worker registry failing at runtime`, [service], () => {
    /** A registry through a proxy holding a lease; the caller restores and closes. */
    const open = async () => {
      const proxy = await TcpProxy.start(hostPort(SERVICES[service].url));
      // The cluster is the name (Redis), the table (SQL) or the URL's path (ZooKeeper, etcd).
      const cluster = uniqueName('rt').toLowerCase();
      const registry: WorkerRegistry = await openWorkerRegistry(
        registryCase.url(proxy.port, cluster),
        { operationTimeoutMs: TIMEOUT_MS, ttlMs: 3000, name: cluster, table: cluster },
      );
      const lease: WorkerLease = await registry.acquire({
        identity: { host: 'runtime', port: 1 },
        maxWorkers: 1024,
      });
      const done = async () => {
        await proxy.restore();
        await lease.release({ lastTimestamp: Date.now(), reportedAt: Date.now() }).catch(() => {});
        await registry.close();
        await proxy.close();
        await registryCase.clean(cluster);
      };
      return { proxy, registry, lease, done, at: `${kind} worker registry at ${proxy.address}: ` };
    };
    const report = () => ({ lastTimestamp: Date.now(), reportedAt: Date.now() });

    it('refused: "<kind> worker registry at <address>: connection refused"', async () => {
      const { proxy, registry, lease, done, at } = await open();
      try {
        await proxy.refuse();
        // A renewal on the connection the proxy dropped may see it closed first.
        assertLine(
          await failure(lease.renew(report())),
          at,
          /^(connection (closed|refused)|could not connect)$/,
        );
        const seen = await failuresUntil(
          () => registry.acquire({ identity: { host: 'other', port: 2 }, maxWorkers: 1024 }),
          'connection refused',
        );
        for (const message of seen)
          assertLine(message, at, /^(connection (closed|refused)|could not connect)$/);
      } finally {
        await done();
      }
    });

    it('black-holed: "<kind> worker registry at <address>: timed out"', async () => {
      const { proxy, lease, done, at } = await open();
      try {
        proxy.hang();
        assertLine(await failure(lease.renew(report())), at, /^timed out( after \d+ ms)?$/);
      } finally {
        await done();
      }
    });
  });
}
