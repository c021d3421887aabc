// The CLI over a set of segment databases, as an operator runs it: `idmint db init --stores` forms
// the set (a Leaf table in use joins it), `idmint tags create` writes each database's row of its
// class, and `idmint serve` refuses a set listed in another order, or serves one whose database is
// down, with IDs of the other databases' classes.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { it } from 'node:test';
import type { SetMemberStore } from '../src/stores/multi/multi-segment-store.ts';
import { MonotonicClock } from '../src/clocks/monotonic-clock.ts';
import { SegmentService } from '../src/service/segment-service.ts';
import { openSegmentStore, openSegmentStores } from '../src/backends/open-segment-store.ts';
import { runIdmint } from './support/cli.ts';
import { SET_URLS, dropSet } from './support/segment-sets.ts';
import { spawnServe, startServe } from './support/serve-process.ts';
import { REQUIRE_SERVICES, describeWithServices, uniqueName } from './support/services.ts';

/** The environment without any IDMINT_ configuration the test runner itself may carry. */
function clean(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return { ...env, ...extra };
}

async function rowOf(url: string, table: string, offset: number, increment: number) {
  const store = (await openSegmentStore(url, {
    table,
    residue: { offset, increment },
  })) as SetMemberStore;
  try {
    return await store.getTag('orders');
  } finally {
    await store.close();
  }
}

await describeWithServices(
  'idmint db init, tags and serve with a set of databases',
  ['postgres', 'mysql', 'redis'],
  () => {
    const urls = [SET_URLS.postgresA, SET_URLS.postgresB, SET_URLS.mariadb];

    it('db init --stores forms the set, joining a Leaf table; tags create per class', async (t) => {
      const table = uniqueName('cliset');
      t.after(() => dropSet(urls, table));
      const leaf = await openSegmentStore(SET_URLS.postgresA, { table, init: true });
      await leaf.createTag({ tag: 'orders', step: 100, startId: 5000n });
      await leaf.allocate('orders');
      await leaf.close();

      const init = await runIdmint(['db', 'init', '--stores', urls.join(','), '--table', table], {
        env: clean(),
      });
      assert.equal(init.code, 0, init.stderr);
      assert.match(
        init.stdout,
        new RegExp(
          '^a set of 3 databases is ready in table \\w+; database r issues IDs ≡ r \\(mod ' +
            '3\\):\\n {2}0 {2}postgres://.*\\n {2}1 {2}postgres://.*\\n {2}2 ' +
            '{2}mysql://.*\\ntag orders: re-formed above 5100\\n$',
        ),
      );
      for (let offset = 0; offset < 3; offset++) {
        const row = await rowOf(urls[offset] as string, table, offset, 3);
        assert.deepEqual(
          [row?.maxId, row?.residue],
          [5100n + BigInt((offset - (5100 % 3) + 3) % 3), { offset, increment: 3 }],
        );
      }
      const again = await runIdmint(['db', 'init', '--stores', urls.join(','), '--table', table], {
        env: clean(),
      });
      assert.match(again.stdout, /tag orders: already in the set\n$/);

      const env = clean({ IDMINT_SEGMENT_STORES: urls.join(','), IDMINT_SEGMENT_TABLE: table });
      const created = await runIdmint(
        ['tags', 'create', 'users', '--step', '10', '--start-id', '100', '--json'],
        { env },
      );
      assert.equal(created.code, 0, created.stderr);
      assert.equal(JSON.parse(created.stdout).tag, 'users');
      for (let offset = 0; offset < 3; offset++) {
        const store = (await openSegmentStore(urls[offset] as string, {
          table,
          residue: { offset, increment: 3 },
        })) as SetMemberStore;
        assert.equal(
          (await store.getTag('users'))?.maxId,
          [102n, 100n, 101n][offset],
          `database ${offset} starts at the first ID of its class at or above 100`,
        );
        await store.close();
      }
      const listed = await runIdmint(['tags', 'list'], { env });
      assert.match(listed.stdout, /\norders +51\d\d +100 +no +- +-\n/);
      const duplicate = await runIdmint(['tags', 'create', 'users', '--step', '10'], { env });
      assert.match(duplicate.stderr, /tag "users" already exists/);
      assert.notEqual(duplicate.code, 0);
    });

    it("db init refuses an empty database in a lost member's place; --replace", async (t) => {
      const table = uniqueName('cliset');
      const replacement = [urls[0], urls[1], SET_URLS.redis] as string[];
      t.after(() => dropSet([...urls, SET_URLS.redis], table));
      const idmint = (...args: string[]) =>
        runIdmint([...args, '--table', table], { env: clean() });
      const init = await idmint('db', 'init', '--stores', urls.join(','));
      assert.equal(init.code, 0, init.stderr);
      const created = await idmint(
        'tags',
        'create',
        'orders',
        '--step',
        '10',
        '--stores',
        urls.join(','),
      );
      assert.equal(created.code, 0, created.stderr);
      const set = await openSegmentStores(urls, { table });
      const clock = new MonotonicClock();
      const service = new SegmentService({
        store: set,
        clock,
        tagRefreshMs: 0,
        step: { maxStep: 10 },
      });
      const issued: bigint[] = [];
      for (let i = 0; i < 300; i++)
        issued.push(service.nextSync('orders') ?? (await service.next('orders')));
      await service.close();
      await set.close();
      const lostHighest = issued.filter((id) => id % 3n === 2n).reduce((a, b) => (a > b ? a : b));

      // Database 2 (MariaDB) is lost; an empty Redis takes its place.
      const command = `idmint db init --stores ${replacement.join(',')} --replace 2`;
      const refused = await idmint('db', 'init', '--stores', replacement.join(','));
      assert.notEqual(refused.code, 0);
      assert.ok(refused.stderr.includes(`run "${command}"`), refused.stderr);
      const create = await idmint(
        'tags',
        'create',
        'users',
        '--step',
        '10',
        '--stores',
        replacement.join(','),
      );
      assert.notEqual(create.code, 0);
      assert.ok(create.stderr.includes(`run "${command}" to replace it`), create.stderr);
      const replaced = await idmint(
        'db',
        'init',
        '--stores',
        replacement.join(','),
        '--replace',
        '2',
      );
      assert.equal(replaced.code, 0, replaced.stderr);
      assert.match(
        replaced.stdout,
        /\n {2}2 {2}redis:\/\/\S+ {2}\(replaces the lost one\)\ntag orders: rows added/,
      );
      const floor = BigInt(/rows added above (\d+)/.exec(replaced.stdout)?.[1] ?? '0');
      assert.ok(
        floor > lostHighest,
        `the new database starts above ${lostHighest}, the lost one's highest ID: ${floor}`,
      );
      const row = await rowOf(SET_URLS.redis, table, 2, 3);
      assert.ok((row?.maxId as bigint) > lostHighest);
      const usage = await idmint('db', 'init', '--store', urls[0] as string, '--replace', '2');
      assert.equal(usage.code, 2);
      assert.match(usage.stderr, /--replace names a database of a set/);
    });

    it('serve refuses a set in another order; serves one with a database down', async (t) => {
      const table = uniqueName('cliset');
      t.after(() => dropSet(urls, table));
      const init = await runIdmint(['db', 'init', '--stores', urls.join(','), '--table', table], {
        env: clean(),
      });
      assert.equal(init.code, 0, init.stderr);
      const created = await runIdmint(
        ['tags', 'create', 'orders', '--step', '10', '--stores', urls.join(','), '--table', table],
        { env: clean() },
      );
      assert.equal(created.code, 0, created.stderr);

      const swapped = [urls[1], urls[0], urls[2]].join(',');
      const refused = spawnServe(
        ['--no-snowflake-enabled', '--segment-stores', swapped, '--segment-table', table],
        { env: clean() },
      );
      const exit = await refused.exited;
      assert.notEqual(exit.code, 0);
      const disagrees = new RegExp(
        'disagrees with their rows and records, so it is not used: database 0 ' +
          '\\(postgres:.*\\) holds',
      );
      assert.match(refused.stderr(), disagrees);

      // A database that does not answer at start-up: the set serves from the others.
      const down = [urls[0], 'mysql://root@127.0.0.1:1/test', urls[2]].join(',');
      const serve = await startServe(
        [
          '--no-snowflake-enabled',
          '--segment-stores',
          down,
          '--segment-table',
          table,
          '--segment-timeout-ms',
          '1000',
        ],
        { env: clean() },
      );
      t.after(() => serve.stop());
      const ids: bigint[] = [];
      for (let i = 0; i < 5; i++) {
        const response = await fetch(`${serve.url}/v1/segment/orders?count=20`);
        const body = (await response.json()) as { ids: string[] };
        assert.equal(response.status, 200, JSON.stringify(body));
        for (const id of body.ids) ids.push(BigInt(id));
      }
      assert.equal(new Set(ids).size, 100);
      assert.ok(!ids.some((id) => id % 3n === 1n), 'nothing from the database that is down');
      const metrics = await (await fetch(`${serve.url}/metrics`)).text();
      assert.match(metrics, /\nidmint_segment_database_up\{database="0",backend="postgres"\} 1\n/);
      assert.match(metrics, /\nidmint_segment_database_up\{database="1",backend="mysql"\} 0\n/);
      assert.match(
        metrics,
        /\nidmint_segment_database_failures_total\{database="1",backend="mysql"\} [1-9]/,
      );
      assert.match(
        metrics,
        /\nidmint_segment_database_allocations_total\{database="2",backend="mysql"\} [1-9]/,
      );
      // Prometheus's own linter on the output with a set's metrics in it (as
      // test/server-metrics.test.ts does without).
      const lint = spawnSync('promtool', ['check', 'metrics'], {
        input: metrics,
        encoding: 'utf8',
      });
      if (lint.error === undefined || REQUIRE_SERVICES)
        assert.equal(
          `${lint.stdout}${lint.stderr}${lint.error?.message ?? ''}`,
          '',
          'promtool check metrics',
        );
      else
        process.stderr.write(
          "\n!!! SKIPPING the promtool check of a set's metrics: promtool not found\n",
        );
    });
  },
);
