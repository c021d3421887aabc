import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { IdMintClient } from '../src/client/client.ts';
import { decomposeId, getLayout } from '../src/core/layout.ts';
import { runIdmint } from './support/cli.ts';
import { removeRegistryData } from './support/coordinators.ts';
import { drawIds, drawn, duplicates } from './support/load.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { startServe, type ServeProcess } from './support/serve-process.ts';
import {
  SERVICES,
  describeWithServices,
  uniqueName,
  type ServiceName,
} from './support/services.ts';

// End to end, over real sockets: `idmint serve` processes started as a user would, sharing a real
// database and a real coordinator, driven over HTTP by the client SDK.

interface Cluster {
  readonly name: string;
  readonly services: readonly ServiceName[];
  readonly sql: 'postgres' | 'mariadb';
  readonly storeUrl: string;
  /** A registry URL for a cluster name of the test's own. */
  registry(name: string): string;
}

const CLUSTERS: readonly Cluster[] = [
  {
    name: 'PostgreSQL + etcd',
    services: ['postgres', 'etcd'],
    sql: 'postgres',
    storeUrl: SERVICES.postgres.url,
    registry: (name) => `etcd://${new URL(SERVICES.etcd.url).host}/${name}`,
  },
  {
    name: 'MariaDB + ZooKeeper',
    services: ['mysql', 'zookeeper'],
    sql: 'mariadb',
    storeUrl: SERVICES.mysql.url,
    registry: (name) => `zookeeper://${SERVICES.zookeeper.url}/${name}`,
  },
];

/** An environment with this test's configuration and none of the runner's own IDMINT_ settings. */
function serverEnv(settings: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_') || key.startsWith('IDMINT_TEST_')) env[key] = value;
  return { ...env, IDMINT_LOG_LEVEL: 'info', ...settings };
}

async function workerOf(server: ServeProcess): Promise<number> {
  return (await new IdMintClient({ url: server.url }).snowflakeBatch(1)).workerId;
}

function assertUnique(label: string, ids: readonly bigint[]): void {
  assert.deepEqual(duplicates(ids), [], `${label}: IDs issued twice`);
}

for (const cluster of CLUSTERS) {
  await describeWithServices(`idmint serve end to end: ${cluster.name}`, cluster.services, () => {
    const table = uniqueName('e2e');
    const registries: string[] = [];
    const cwd = mkdtempSync(join(tmpdir(), 'idmint-e2e-'));
    /** Configuration for a server of this suite; every test gets a registry cluster of its own. */
    const settings = (registry: string) =>
      serverEnv({
        IDMINT_SEGMENT_STORE: cluster.storeUrl,
        IDMINT_SEGMENT_TABLE: table,
        IDMINT_WORKER_REGISTRY: registry,
      });
    const newRegistry = () => {
      const url = cluster.registry(uniqueName('e2e'));
      registries.push(url);
      return url;
    };

    before(async () => {
      // As a user would: create the table, then the tag, with the CLI, from the same settings.
      const env = settings(newRegistry());
      const init = await runIdmint(['db', 'init'], { env, cwd });
      assert.equal(init.code, 0, init.stderr);
      const tag = await runIdmint(['tags', 'create', 'order', '--step', '200'], { env, cwd });
      assert.equal(tag.code, 0, tag.stderr);
    });

    after(async () => {
      await SEGMENT_BACKENDS[cluster.sql].sql?.(cluster.storeUrl, `DROP TABLE IF EXISTS ${table}`);
      for (const url of registries) await removeRegistryData(url);
      rmSync(cwd, { recursive: true, force: true });
    });

    it('three servers, one database, one coordinator: 30,000 IDs, no duplicates', async () => {
      const env = settings(newRegistry());
      const servers = await Promise.all([0, 1, 2].map(() => startServe([], { env, cwd })));
      try {
        const workers = await Promise.all(servers.map(workerOf));
        assert.equal(new Set(workers).size, 3, `worker IDs ${workers.join(', ')} are not distinct`);
        const ids = await drawIds({
          urls: servers.map((s) => s.url),
          tag: 'order',
          perMode: 30_000,
          concurrency: 48,
        });
        assert.deepEqual([...ids.failures], [], 'failed requests');
        assert.ok(ids.segment.length >= 30_000 && ids.snowflake.length >= 30_000);
        assertUnique('segment', ids.segment);
        assertUnique('snowflake', ids.snowflake);
        const layout = getLayout('idmint');
        const seen = new Set(ids.snowflake.map((id) => decomposeId(id, layout).workerId));
        assert.deepEqual(
          [...seen].sort(),
          [...workers].sort(),
          'every snowflake ID comes from one of the three leased workers',
        );
      } finally {
        const codes = await Promise.all(servers.map((s) => s.stop('SIGTERM')));
        assert.deepEqual(codes, [0, 0, 0], servers.map((s) => s.stderr()).join('\n'));
      }
    });

    it('a server SIGKILLed mid-load and restarted never repeats an ID it issued', async () => {
      const env = settings(newRegistry());
      const all = drawn();
      const first = await startServe([], { env, cwd });
      let killed = false;
      const load = drawIds({
        urls: [first.url],
        tag: 'order',
        perMode: 1_000_000,
        concurrency: 16,
        stop: () => killed,
        into: all,
      });
      while (all.segment.length + all.snowflake.length < 4000)
        await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(await first.stop('SIGKILL'), null);
      killed = true;
      await load;
      const before = { segment: all.segment.length, snowflake: all.snowflake.length };
      assert.ok(before.segment > 0 && before.snowflake > 0);
      const second = await startServe([], { env, cwd });
      try {
        await drawIds({
          urls: [second.url],
          tag: 'order',
          perMode: 6000,
          concurrency: 16,
          into: all,
        });
      } finally {
        assert.equal(await second.stop('SIGTERM'), 0, second.stderr());
      }
      assert.ok(all.segment.length > before.segment && all.snowflake.length > before.snowflake);
      assertUnique('segment', all.segment);
      assertUnique('snowflake', all.snowflake);
    });

    it('SIGTERM releases the lease: the next process gets the worker ID', async () => {
      const env = settings(newRegistry());
      const first = await startServe([], { env, cwd });
      const worker = await workerOf(first);
      assert.equal(await first.stop('SIGTERM'), 0, first.stderr());
      assert.ok(first.logs.some((line) => line['msg'] === 'idmint stopped'));
      // Had the lease not been given back it would still be held (until its TTL), and the next
      // process would be handed another worker ID.
      const second = await startServe([], { env, cwd });
      try {
        assert.equal(await workerOf(second), worker);
      } finally {
        assert.equal(await second.stop('SIGTERM'), 0, second.stderr());
      }
    });
  });
}

describe('idmint serve end to end: zero configuration (SQLite, static worker)', () => {
  const cwd = mkdtempSync(join(tmpdir(), 'idmint-e2e-static-'));
  after(() => rmSync(cwd, { recursive: true, force: true }));

  it('SIGKILLed and restarted as the same worker, it never repeats an ID', async () => {
    const env = serverEnv({});
    const created = await runIdmint(['tags', 'create', 'order', '--step', '100'], { env, cwd });
    assert.equal(created.code, 0, created.stderr);
    const all = drawn();
    for (let round = 0; round < 3; round++) {
      const server = await startServe([], { env, cwd });
      let killed = false;
      const load = drawIds({
        urls: [server.url],
        tag: 'order',
        perMode: 1_000_000,
        concurrency: 16,
        stop: () => killed,
        into: all,
      });
      const target = all.segment.length + all.snowflake.length + 3000;
      while (all.segment.length + all.snowflake.length < target)
        await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(await server.stop('SIGKILL'), null);
      killed = true;
      await load;
    }
    const workers = new Set(
      all.snowflake.map((id) => decomposeId(id, getLayout('idmint')).workerId),
    );
    assert.deepEqual(
      [...workers],
      [0],
      'always worker 0: the restart reuses the worker ID, the hard case',
    );
    assertUnique('segment', all.segment);
    assertUnique('snowflake', all.snowflake);
  });
});
