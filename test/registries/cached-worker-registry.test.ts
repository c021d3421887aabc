import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clocks/manual-clock.ts';
import { isIdMintError } from '../../src/core/errors.ts';
import { decomposeId, getLayout } from '../../src/core/layout.ts';
import type { WorkerLease, WorkerRegistry } from '../../src/ports/worker-registry.ts';
import { openWorkerRegistry } from '../../src/backends/open-worker-registry.ts';
import { SnowflakeWorker } from '../../src/service/snowflake-worker.ts';
import {
  deleteRedisNamespace,
  redisRecord,
  sqlRecord,
  viaProxy,
} from '../support/registry-admin.ts';
import { listeningUrl, spawnServe, startServe } from '../support/serve-process.ts';
import { SERVICES, describeWithServices, hostPort, uniqueName } from '../support/services.ts';
import { assertNoDuplicateIds, drawSnowflakes } from '../support/snowflake-draw.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';
import { runInterleavingSuite } from '../support/worker-registry-suite.ts';
import { delay, tempDir, waitFor } from '../support/workers.ts';

// Leaf's weak dependency, on Redis cut off by a TCP proxy: a node restarts from its local cache
// while the coordinator is down, but only through the same clock checks, and keeps its ID once
// the coordinator is back only if nobody else used it meanwhile.

const T0 = Date.UTC(2026, 5, 1, 12);
const identity = { host: '10.0.0.1', port: 8080 };
const layout = getLayout('idmint');
const redis = SERVICES.redis.url;

await describeWithServices('weak dependency (local cache) on redis', ['redis'], () => {
  let dir: { path: string; dispose(): Promise<void> };
  let proxy: TcpProxy;
  const names: string[] = [];
  let name = '';
  const registries: WorkerRegistry[] = [];
  before(async () => {
    dir = await tempDir('cache');
    proxy = await TcpProxy.start(hostPort(redis));
  });
  beforeEach(() => {
    name = uniqueName('c');
    names.push(name);
    proxy.restore();
  });
  const open = async (through: TcpProxy | undefined, cacheFile?: string) => {
    const registry = await openWorkerRegistry(viaProxy(redis, through), {
      name,
      ttlMs: 3000,
      operationTimeoutMs: 500,
      cacheFile,
    });
    registries.push(registry);
    return registry;
  };
  after(async () => {
    await Promise.all(registries.map((r) => r.close().catch(() => {})));
    await proxy.close();
    for (const n of names) await deleteRedisNamespace(redis, n);
    await dir.dispose();
  });

  it('restarts from the cache with the coordinator down, after the clock check', async () => {
    const cacheFile = join(dir.path, 'worker-cache.json');
    // A node ran online, reported, and died without releasing.
    const online = await open(proxy, cacheFile);
    const lease = await online.acquire({ identity, maxWorkers: 1024 });
    await lease.renew({ lastTimestamp: T0 + 9000, reportedAt: T0 });
    const cached = JSON.parse(await readFile(cacheFile, 'utf8')) as {
      workerId: number;
      lastTimestamp: number;
      reportedAt: number;
    };
    assert.deepEqual(
      [cached.workerId, cached.lastTimestamp, cached.reportedAt],
      [lease.workerId, T0 + 9000, T0],
    );
    // It dies: its connections and the cache file's lock go, its lease stays until the TTL.
    await online.close();

    proxy.cut(); // the coordinator goes down; the node restarts
    const offline = await open(proxy, cacheFile);
    const clock = new ManualClock(T0 - 60_000);
    const start = () =>
      SnowflakeWorker.start({
        registry: offline,
        identity,
        clock,
        renewIntervalMs: 300,
        safetyMarginMs: 500,
      });
    await assert.rejects(
      start(),
      (error) => isIdMintError(error, 'CLOCK_MOVED_BACKWARDS'),
      'the cache is no way around the clock check',
    );
    clock.set(T0 + 9001);
    const worker = await start();
    assert.equal(worker.workerId, lease.workerId, 'the cached worker ID');
    const ids = worker.nextBatch(100);
    assert.ok(
      ids.every((id) => decomposeId(id, layout).timestamp > T0 + 9000),
      'after the cached horizon',
    );

    // The dead node's lease expires; the coordinator comes back; the next renewal reclaims the ID.
    await delay(3200);
    proxy.restore();
    clock.advance(100);
    await waitFor('a renewal through the coordinator', async () => {
      const direct = await open(undefined);
      const peers = await direct.peers();
      return peers.some((p) => p.workerId === worker.workerId && p.reportedAt > T0 + 9000);
    });
    assert.equal(worker.state().status, 'active');
    assert.equal(worker.workerId, lease.workerId);
    await worker.close();
  });

  const oneHolder =
    'one cache file, one holder: a second registry on it is refused until the first closes; ' +
    'a file of another cluster is never used offline';
  it(oneHolder, async () => {
    const cacheFile = join(dir.path, 'worker-cache-3.json');
    const first = await open(proxy, cacheFile);
    const lease = await first.acquire({ identity, maxWorkers: 1024 });
    await lease.renew({ lastTimestamp: T0 + 1000, reportedAt: T0 });
    const second = await open(proxy, cacheFile);
    // Same host, same port: only the lock tells the two apart.
    await assert.rejects(second.acquire({ identity, maxWorkers: 1024 }), (error) => {
      assert.ok(isIdMintError(error, 'WORKER_IDS_EXHAUSTED'), String(error));
      const file = cacheFile.replaceAll('.', '\\.');
      assert.match(
        error.message,
        new RegExp(`worker cache file ${file} is in use by pid ${process.pid}\\b`),
      );
      return true;
    });
    await first.close(); // dies holding its lease
    proxy.cut();
    // The same file under another cluster name: its worker ID may be a live node's there.
    const options = { name: `${name}-other`, ttlMs: 3000, operationTimeoutMs: 500, cacheFile };
    const otherCluster = await openWorkerRegistry(viaProxy(redis, proxy), options);
    registries.push(otherCluster);
    const unavailable = (error: unknown) => isIdMintError(error, 'REGISTRY_UNAVAILABLE');
    await assert.rejects(otherCluster.acquire({ identity, maxWorkers: 1024 }), unavailable);
    await otherCluster.close();
    // Its own cluster's registry starts from it offline, whatever the port it asks with.
    const restarted = await second.acquire({
      identity: { ...identity, port: 0 },
      maxWorkers: 1024,
    });
    assert.deepEqual([restarted.workerId, restarted.lastTimestamp], [lease.workerId, T0 + 1000]);
    await second.close();
  });

  const twoNodes =
    'two `idmint serve --port 0` in one directory, Redis down, one cache file: ' +
    'only one starts offline, the other is refused naming the file; no ID is issued twice ' +
    '(there were 3,400 in 12,000)';
  it(twoNodes, { timeout: 120_000 }, async () => {
    const cwd = join(dir.path, 'serve-offline');
    await mkdir(cwd, { recursive: true });
    const args = [
      ...['--worker-registry', viaProxy(redis, proxy), '--worker-cluster', name],
      ...[
        '--worker-cache-file',
        'data/worker-cache.json',
        '--registry-timeout-ms',
        '1000',
        '--no-segment-enabled',
      ],
    ];
    // One run online, then a graceful stop: the cache file names its worker ID.
    const online = await startServe(args, { cwd });
    assert.equal(await online.stop(), 0);
    const cached = JSON.parse(await readFile(join(cwd, 'data', 'worker-cache.json'), 'utf8')) as {
      workerId: number;
    };
    proxy.cut(); // Redis is down (for these nodes); two nodes start at once in the same directory.
    const nodes = [spawnServe(args, { cwd }), spawnServe(args, { cwd })];
    try {
      const urls = await Promise.all(nodes.map(listeningUrl));
      const drawing = delay(1500);
      const drawn = await Promise.all(
        urls.map((url) => (url === undefined ? [] : drawSnowflakes(url, drawing))),
      );
      assert.ok(
        drawn.some((ids) => ids.length > 0),
        'one node served offline',
      );
      assertNoDuplicateIds(drawn, 'two nodes started offline from one cache file');
      const served = urls.filter((url) => url !== undefined);
      assert.equal(served.length, 1, 'exactly one node serves');
      const refused = nodes[urls.indexOf(undefined)];
      assert.equal((await refused?.exited)?.code, 1);
      const stderr = refused?.stderr().trim() ?? '';
      assert.equal(stderr.split('\n').length, 1, `one line, got: ${stderr}`);
      const holder = nodes[urls.findIndex((url) => url !== undefined)]?.child.pid;
      const inUse = `worker cache file data/worker-cache\\.json is in use by pid ${holder}\\b`;
      assert.match(stderr, new RegExp(`^idmint serve: .*${inUse}`));
      const workers = new Set(drawn.flat().map((id) => decomposeId(id, layout).workerId));
      assert.deepEqual([...workers], [cached.workerId], 'the cached worker ID');
    } finally {
      await Promise.all(nodes.map((node) => node.kill('SIGKILL')));
      proxy.restore();
    }
  });

  it('gives up the cached ID when the coordinator gave it to another node meanwhile', async () => {
    const cacheFile = join(dir.path, 'worker-cache-2.json');
    const online = await open(proxy, cacheFile);
    const lease = await online.acquire({ identity, maxWorkers: 1 });
    await lease.renew({ lastTimestamp: T0 + 1000, reportedAt: T0 });
    await online.close(); // it dies without releasing
    proxy.cut(); // this node is cut off (and restarts); the coordinator itself keeps running
    const offline = await open(proxy, cacheFile);
    const clock = new ManualClock(T0 + 1001);
    const worker = await SnowflakeWorker.start({
      registry: offline,
      identity,
      clock,
      renewIntervalMs: 300,
      safetyMarginMs: 500,
      layout: { timeBits: 41, workerBits: 0, sequenceBits: 22, epoch: '2026-01-01T00:00:00Z' },
    });
    // Another node, which can reach the coordinator, gets the ID once the old lease expired.
    const other = await open(undefined);
    let taken: WorkerLease | undefined;
    while (taken === undefined)
      taken = await other
        .acquire({ identity: { host: 'other', port: 1 }, maxWorkers: 1 })
        .catch(() => delay(100).then(() => undefined));
    await taken.renew({ lastTimestamp: T0 + 5000, reportedAt: T0 + 4000 });
    proxy.restore();
    await waitFor('the cut-off node to give the ID up', () => worker.state().leaseLosses === 1);
    assert.throws(
      () => worker.next(),
      (error) => isIdMintError(error, 'LEASE_LOST'),
    );
    await taken.release({ lastTimestamp: T0 + 5000, reportedAt: T0 + 4000 });
    await worker.close().catch(() => {});
  });
});

// The interleavings through the cache: each node with a cache file of its own, in front of an
// embedded and a networked coordinator.
const cacheDir = await tempDir('cache-interleavings');
const cacheFile = () => join(cacheDir.path, `${uniqueName('node')}.json`);
const sqliteFile = join(cacheDir.path, 'workers.db');
await runInterleavingSuite({
  backend: 'sqlite with a local cache',
  services: [],
  ttlMs: 3000,
  url: () => `sqlite:${sqliteFile}`,
  options: (name) => ({ name, ttlMs: 3000, cacheFile: cacheFile() }),
  cleanup: async () => {},
  record: (name, workerId) => sqlRecord(`sqlite:${sqliteFile}`, 'worker_node', name, workerId),
});
await runInterleavingSuite({
  backend: 'redis with a local cache',
  services: ['redis'],
  ttlMs: 3000,
  url: () => redis,
  options: (name) => ({ name, ttlMs: 3000, operationTimeoutMs: 1500, cacheFile: cacheFile() }),
  cleanup: (name) => deleteRedisNamespace(redis, name),
  record: (name, workerId) => redisRecord(redis, name, workerId),
});
await cacheDir.dispose();
