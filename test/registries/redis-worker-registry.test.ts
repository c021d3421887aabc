import assert from 'node:assert/strict';
import { it } from 'node:test';
import { isIdMintError } from '../../src/core/errors.ts';
import { backendOptions } from '../../src/backends/catalog.ts';
import { redisBackend } from '../../src/backends/redis/redis-backend.ts';
import { createServer, connect, type Socket } from 'node:net';
import {
  RedisWorkerRegistry,
  connectRedisWorkerRegistry,
} from '../../src/registries/redis/redis-worker-registry.ts';
import { deleteRedisNamespace, redisRecord, viaProxy } from '../support/registry-admin.ts';
import { SERVICES, describeWithServices, hostPort, uniqueName } from '../support/services.ts';
import { delay } from '../support/workers.ts';

const T0 = Date.UTC(2026, 5, 1, 12);
import { runWorkerProcessScenarios } from '../support/worker-process-scenarios.ts';
import {
  runInterleavingSuite,
  runWorkerRegistrySuite,
  type RegistryHarness,
} from '../support/worker-registry-suite.ts';

const url = SERVICES.redis.url;
const harness: RegistryHarness = {
  backend: 'redis',
  services: ['redis'],
  ttlMs: 3000,
  target: hostPort(url),
  url: (_name, proxy) => viaProxy(url, proxy),
  options: (name) => ({ name, ttlMs: 3000, operationTimeoutMs: 1500 }),
  cleanup: (name) => deleteRedisNamespace(url, name),
  record: (name, workerId) => redisRecord(url, name, workerId),
};

await runWorkerRegistrySuite(harness);
await runInterleavingSuite(harness);
await runWorkerProcessScenarios(harness);

await describeWithServices(
  'redis worker registry, a timeout on a shared connection',
  ['redis'],
  () => {
    it('a call that times out leaves the other calls and replies in step', {
      timeout: 30_000,
    }, async () => {
      const { Redis } = await import('ioredis');
      // One connection for every lease and call of the registry, as connectRedisWorkerRegistry
      // opens.
      const client = new Redis(url, {
        lazyConnect: true,
        commandTimeout: 2000,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
      });
      client.on('error', () => {});
      await client.connect();
      const name = uniqueName('t');
      const registry = new RedisWorkerRegistry({ client, name, ttlMs: 10_000 });
      try {
        const one = await registry.acquire({ identity: { host: 'h1', port: 1 }, maxWorkers: 4 });
        const two = await registry.acquire({ identity: { host: 'h2', port: 1 }, maxWorkers: 4 });
        // A slow reply ahead on the connection: a blocking pop holds every reply behind it for 2.5
        // s.
        const blocked = client.blpop(`idmint:workers:{${name}}:test-block`, 2.5).catch(() => null);
        const timedOut = one.renew({ lastTimestamp: T0 + 1, reportedAt: T0 }).then(
          () => undefined,
          (error: unknown) => error,
        ); // gives up at 2 s
        await delay(1500);
        // In flight when the first call times out; answered at 2.5 s, within its own 2 s.
        const inFlight = two.renew({ lastTimestamp: T0 + 2, reportedAt: T0 + 1 });
        const peers = registry.peers();
        assert.ok(
          isIdMintError(await timedOut, 'REGISTRY_UNAVAILABLE'),
          'the first renewal timed out',
        );
        assert.equal(await inFlight, 10_000, 'the renewal in flight was answered');
        assert.deepEqual(
          (await peers).map((p) => [p.workerId, p.reportedAt]).sort(),
          [
            [one.workerId, T0],
            [two.workerId, T0 + 1],
          ].sort(),
          'each reply answered its own command',
        );
        await blocked;
        // The renewal that timed out landed all the same; its caller treats the outcome as unknown.
        const reports = async (workerId: number) => {
          const record = await redisRecord(url, name, workerId);
          return record && [record.lastTimestamp, record.reportedAt];
        };
        assert.deepEqual(await reports(one.workerId), [T0 + 1, T0]);
        assert.deepEqual(await reports(two.workerId), [T0 + 2, T0 + 1]);
        await one.release({ lastTimestamp: T0 + 1, reportedAt: T0 });
        await two.release({ lastTimestamp: T0 + 2, reportedAt: T0 + 1 });
      } finally {
        client.disconnect();
        await deleteRedisNamespace(url, name);
      }
    });
  },
);

/**
 * A TCP proxy to Redis whose `silence()` turns the connections open at that moment into a black
 * hole, as a partition without a reset does: nothing passes, nothing is closed. Later connections
 * pass. (The shared TcpProxy's hang() stops every connection, new ones included.)
 */
async function silencingProxy(target: {
  host: string;
  port: number;
}): Promise<{ port: number; silence(): void; close(): Promise<void> }> {
  const open = new Set<{ silent: boolean; sockets: Socket[] }>();
  const server = createServer((client) => {
    const upstream = connect(target);
    const link = { silent: false, sockets: [client, upstream] };
    open.add(link);
    client.on('data', (chunk: Buffer) => link.silent || upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => link.silent || client.write(chunk));
    const end = () => {
      open.delete(link);
      client.destroy();
      upstream.destroy();
    };
    for (const socket of link.sockets) socket.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address !== null ? address.port : 0,
    silence: () => {
      for (const link of open) link.silent = true;
    },
    close: async () => {
      for (const link of open) for (const socket of link.sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

await describeWithServices('redis worker registry, a dead connection', ['redis'], () => {
  it('a silent connection is replaced; calls given up on it never run', {
    timeout: 30_000,
  }, async () => {
    const proxy = await silencingProxy(hostPort(url));
    const name = uniqueName('t');
    const registry = await connectRedisWorkerRegistry(
      { host: '127.0.0.1', port: proxy.port, db: 0 },
      {
        name,
        ttlMs: 10_000,
        operationTimeoutMs: 500,
      },
    );
    try {
      const lease = await registry.acquire({ identity: { host: 'h1', port: 1 }, maxWorkers: 2 });
      proxy.silence();
      const silencedAt = Date.now();
      await assert.rejects(
        registry.acquire({ identity: { host: 'h2', port: 1 }, maxWorkers: 2 }),
        (error) => isIdMintError(error, 'REGISTRY_UNAVAILABLE'),
      );
      let renewed = false;
      while (!renewed && Date.now() - silencedAt < 10_000) {
        renewed = await lease.renew({ lastTimestamp: T0 + 5, reportedAt: T0 }).then(
          () => true,
          (error: unknown) => {
            assert.ok(isIdMintError(error, 'REGISTRY_UNAVAILABLE'), String(error));
            return delay(50).then(() => false);
          },
        );
      }
      assert.ok(renewed, 'no renewal went through in 10 s: the silent connection was kept');
      // The acquire given up on the silent connection never ran: ID 1 is free.
      const other = await registry.acquire({ identity: { host: 'h3', port: 1 }, maxWorkers: 2 });
      assert.equal(other.workerId, 1);
      await other.release({ lastTimestamp: T0, reportedAt: T0 });
      await lease.release({ lastTimestamp: T0 + 5, reportedAt: T0 });
    } finally {
      await registry.close();
      await proxy.close();
      await deleteRedisNamespace(url, name);
    }
  });
});

await describeWithServices('redis worker registry, the free-ID index', ['redis'], () => {
  it('finds an expired ID with the index gone; never takes a held one', {
    timeout: 30_000,
  }, async () => {
    const name = uniqueName('index');
    const prefix = `idmint:workers:{${name}}:`;
    const { Redis } = await import('ioredis');
    const admin = new Redis(url, { lazyConnect: true });
    await admin.connect();
    const target = backendOptions(redisBackend, url);
    const long = await connectRedisWorkerRegistry(target, { name, ttlMs: 60_000 });
    const short = await connectRedisWorkerRegistry(target, { name, ttlMs: 1000 });
    const node = (n: number) => ({ host: `10.8.0.${n}`, port: 8080 });
    try {
      const held = [];
      for (let n = 0; n < 7; n++)
        held.push(await long.acquire({ identity: node(n), maxWorkers: 8 }));
      const dying = await short.acquire({ identity: node(7), maxWorkers: 8 });
      assert.deepEqual(
        [...held.map((lease) => lease.workerId), dying.workerId],
        [0, 1, 2, 3, 4, 5, 6, 7],
      );
      // The holder of 7 dies (never renews); the index keys vanish, as with an older writer.
      await admin.del(`${prefix}expiry`, `${prefix}next`);
      await delay(1300);
      const recycled = await long.acquire({ identity: node(20), maxWorkers: 8 });
      assert.equal(recycled.workerId, 7, 'the full pass found the expired ID');

      // The index now says ID 3 is free and that ID 0 was never used; both are held.
      await admin.zadd(`${prefix}expiry`, 0, '3');
      await admin.set(`${prefix}next`, '0');
      const racers = await Promise.allSettled(
        [21, 22, 23, 24].map((n) => long.acquire({ identity: node(n), maxWorkers: 8 })),
      );
      for (const outcome of racers) {
        assert.equal(
          outcome.status,
          'rejected',
          'no ID is free: a stale index must not hand out a held one',
        );
        assert.ok(isIdMintError(outcome.reason, 'WORKER_IDS_EXHAUSTED'), String(outcome.reason));
      }
      await held[5]!.release({ lastTimestamp: T0, reportedAt: T0 });
      const freed = await Promise.allSettled(
        [25, 26, 27].map((n) => long.acquire({ identity: node(n), maxWorkers: 8 })),
      );
      assert.deepEqual(
        freed.filter((o) => o.status === 'fulfilled').map((o) => o.value.workerId),
        [5],
        'the released ID went to exactly one node',
      );
    } finally {
      admin.disconnect();
      await Promise.all([long.close(), short.close()]);
      await deleteRedisNamespace(url, name);
    }
  });
});
