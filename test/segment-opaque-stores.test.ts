import assert from 'node:assert/strict';
import { it, type TestContext } from 'node:test';
import { isIdMintError } from '../src/core/errors.ts';
import { openSegmentStore } from '../src/backends/open-segment-store.ts';
import { assertError } from './support/http.ts';
import { SEGMENT_BACKENDS, type SegmentBackend } from './support/segment-backends.ts';
import { rejectsWith } from './support/segment-store-suite.ts';
import { testServer } from './support/server.ts';
import { SERVICES, describeWithServices } from './support/services.ts';

// Where a tag's opaque mark lives, on every real store: idmint's `opaque` column in the segment
// table (SQL), a hash field (Redis). A Leaf table without the column keeps working for plain tags,
// refuses to mark one opaque with a clear error, and gets the column from `idmint db init`
// (store.init()), idempotently.

type Fixture = Awaited<ReturnType<SegmentBackend['open']>>;

/**
 * The fence margin of a store on a Leaf table idmint has no record of: the first allocation (or
 * init) fences every tag by it (docs/segments.md, Failover and restore).
 */
const FIRST_SIGHT = 1_000_000n;

async function open(t: TestContext, backend: SegmentBackend, init = true): Promise<Fixture> {
  const fixture = await backend.open({ init, fence: { ids: FIRST_SIGHT } });
  t.after(() => fixture.dispose());
  return fixture;
}

// Leaf's own DDL (MySQL, as scripts/leaf_alloc.sql has it) and the portable one elsewhere: no
// opaque column.
const LEAF_MYSQL_DDL = (table: string) => `CREATE TABLE \`${table}\` (
  \`biz_tag\` varchar(128)  NOT NULL DEFAULT '',
  \`max_id\` bigint(20) NOT NULL DEFAULT '1',
  \`step\` int(11) NOT NULL,
  \`description\` varchar(256)  DEFAULT NULL,
  \`update_time\` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (\`biz_tag\`)
) ENGINE=InnoDB`;
const PORTABLE_DDL = (table: string) =>
  `create table ${table} (biz_tag varchar(128) primary key, max_id bigint not null default ` +
  `1, step int not null, description varchar(256), update_time timestamp)`;

for (const backend of Object.values(SEGMENT_BACKENDS)) {
  await describeWithServices(`opaque tags in the store (${backend.name})`, backend.services, () => {
    it('stores the opaque mark with the tag; never unmarked', async (t) => {
      const { store } = await open(t, backend);
      assert.equal((await store.createTag({ tag: 'secret', step: 10, opaque: true })).opaque, true);
      assert.equal((await store.createTag({ tag: 'plain', step: 10 })).opaque, false);
      assert.equal(
        (await store.createTag({ tag: 'later', step: 10, description: 'd' })).opaque,
        false,
      );
      assert.equal((await store.getTag('secret'))?.opaque, true);
      assert.deepEqual(
        (await store.listTags()).map((r) => [r.tag, r.opaque]),
        [
          ['later', false],
          ['plain', false],
          ['secret', true],
        ],
      );
      const marked = await store.updateTag('later', { opaque: true });
      assert.deepEqual([marked.opaque, marked.description, marked.step], [true, 'd', 10]);
      // Other changes leave the mark as it is, either way.
      assert.equal((await store.updateTag('later', { step: 20, description: null })).opaque, true);
      assert.equal((await store.updateTag('plain', { step: 20 })).opaque, false);
      await rejectsWith(
        store.updateTag('later', { opaque: false as unknown as true }),
        'INVALID_ARGUMENT',
        /opaque can only be set to true/,
      );
      assert.equal((await store.getTag('later'))?.opaque, true);
      await rejectsWith(store.updateTag('nope', { opaque: true }), 'TAG_NOT_FOUND');
      // Allocation is the same for both kinds: the mark changes how IDs are shown, not which.
      assert.deepEqual(
        [(await store.allocate('secret')).start, (await store.allocate('plain')).start],
        [1n, 1n],
      );
      await rejectsWith(
        store.createTag({ tag: 'far', step: 10, startId: 10n ** 15n, opaque: true }),
        'INVALID_ARGUMENT',
        /cannot be opaque from ID 1000000000000000/,
      );
      assert.equal(await store.getTag('far'), undefined);
    });

    it('servers share an opaque tag: every opaque and dense ID unique', async (t) => {
      const fixture = await open(t, backend);
      const keys = '1:000102030405060708090a0b0c0d0e0f';
      const values = { segment: { store: fixture.url, table: fixture.table }, opaque: { keys } };
      const a = await testServer(values);
      const b = await testServer(values);
      const issued: string[] = [];
      try {
        assert.equal(
          (
            await a.app.inject({
              method: 'POST',
              url: '/v1/tags',
              payload: { tag: 'orders', step: 20, opaque: true },
            })
          ).statusCode,
          201,
        );
        const draws = [];
        for (let i = 0; i < 30; i++) {
          for (const server of [a, b]) {
            draws.push(server.app.inject('/api/segment/get/orders').then((r) => [r.body]));
            draws.push(
              server.app
                .inject('/v1/segment/orders?count=7')
                .then((r) => (r.json() as { ids: string[] }).ids),
            );
          }
        }
        for (const ids of await Promise.all(draws)) issued.push(...ids);
      } finally {
        await a.close();
        await b.close();
      }
      const c = await testServer(values);
      try {
        issued.push(
          ...((await c.app.inject('/v1/segment/orders?count=50')).json() as { ids: string[] }).ids,
        );
      } finally {
        await c.close();
      }
      assert.equal(issued.length, 30 * 2 * 8 + 50);
      assert.ok(
        issued.every((id) => /^1[0-9]{18}$/.test(id)),
        issued.find((id) => !/^1[0-9]{18}$/.test(id)),
      );
      assert.equal(new Set(issued).size, issued.length, 'an opaque ID was issued twice');
      const { OpaqueCodec, parseOpaqueKeys } = await import('../src/core/opaque.ts');
      const codec = new OpaqueCodec({ keys: parseOpaqueKeys(keys) });
      const dense = issued.map((id) => codec.decode(id, 'orders').dense);
      assert.equal(new Set(dense).size, dense.length, 'a dense ID was issued twice');
    });

    if (backend.sql !== undefined) {
      const ddl = backend.name === 'mariadb' ? LEAF_MYSQL_DDL : PORTABLE_DDL;
      it('a Leaf table without the opaque column: db init adds it once', async (t) => {
        const fixture = await open(t, backend, false);
        const sql = (statement: string) =>
          backend.sql?.(fixture.url, statement) ?? Promise.resolve([]);
        await sql(ddl(fixture.table));
        await sql(
          `insert into ${fixture.table}(biz_tag, max_id, step, description) ` +
            `values('from-leaf', 3001, 1000, 'Leaf row')`,
        );
        const { store } = fixture;
        // A full read's pages name only the listing's columns: none is missing on a Leaf table.
        const paged = async () =>
          (await store.listTagPage(undefined, 100)).records
            .map((r) => [r.tag, r.step, r.opaque])
            .sort();
        assert.deepEqual(await paged(), [['from-leaf', 1000, false]]);
        assert.deepEqual(
          (await store.listTags()).map((r) => [r.tag, r.opaque]),
          [['from-leaf', false]],
        );
        assert.equal((await store.getTag('from-leaf'))?.opaque, false);
        assert.equal(
          (await store.allocate('from-leaf')).start,
          3001n + FIRST_SIGHT,
          'fenced once: a first sight',
        );
        assert.equal((await store.createTag({ tag: 'plain', step: 10 })).opaque, false);
        assert.equal((await store.updateTag('plain', { step: 30 })).step, 30);
        for (const attempt of [
          () => store.createTag({ tag: 'secret', step: 10, opaque: true }),
          () => store.updateTag('plain', { opaque: true }),
        ]) {
          await assert.rejects(attempt(), (error: unknown) => {
            assert.ok(isIdMintError(error, 'OPAQUE_UNAVAILABLE'), String(error));
            assert.match(
              error.message,
              new RegExp(
                `table ${fixture.table} has no opaque column \\(a Leaf table\\); run ` +
                  `"idmint db init" on it to add the column`,
              ),
            );
            assert.equal(error.retryable, false);
            return true;
          });
        }
        assert.equal(await store.getTag('secret'), undefined, 'nothing was created');
        assert.equal((await store.getTag('plain'))?.opaque, false, 'nothing was changed');

        // idmint db init: adds the column, once, however many inits run at the same time.
        await Promise.all([store.init(), store.init(), store.init()]);
        await store.init();
        const columns =
          (await sql(`select * from ${fixture.table} where biz_tag = 'from-leaf'`))[0] ?? {};
        assert.ok('opaque' in columns, `columns: ${Object.keys(columns).join(', ')}`);
        assert.equal(Number(columns['opaque']), 0, 'existing rows are plain');
        assert.equal((await store.updateTag('plain', { opaque: true })).opaque, true);
        assert.equal(
          (await store.createTag({ tag: 'secret', step: 10, opaque: true })).opaque,
          true,
        );
        // The next full read looks for the column again at its first page, and sees the marks.
        assert.deepEqual(await paged(), [
          ['from-leaf', 1000, false],
          ['plain', 30, true],
          ['secret', 10, true],
        ]);
        // Leaf's own INSERT, naming only Leaf's columns, still works: the column has a default.
        await sql(
          `insert into ${fixture.table}(biz_tag, max_id, step, description) ` +
            `values('leaf-again', 1, 10, 'x')`,
        );
        assert.equal((await store.getTag('leaf-again'))?.opaque, false);
        assert.equal((await store.allocate('leaf-again')).end, 11n);
      });

      it("idmint's own table has the column, Leaf's INSERT still works", async (t) => {
        const fixture = await open(t, backend);
        await backend.sql?.(
          fixture.url,
          `insert into ${fixture.table}(biz_tag, max_id, step, description) ` +
            `values('by-hand', 1, 10, 'x')`,
        );
        assert.equal((await fixture.store.getTag('by-hand'))?.opaque, false);
        await backend.sql?.(
          fixture.url,
          `update ${fixture.table} set opaque = 1 where biz_tag = 'by-hand'`,
        );
        assert.equal((await fixture.store.getTag('by-hand'))?.opaque, true);
      });

      it(
        backend.name === 'sqlite'
          ? 'a server on a SQLite Leaf table adds the column at start-up (the embedded store ' +
              'is initialized when opened) and keeps serving the Leaf tag'
          : 'a server on a Leaf table without the column serves the Leaf routes as ever and ' +
              'refuses an opaque tag with OPAQUE_UNAVAILABLE',
        async (t) => {
          const fixture = await open(t, backend, false);
          await backend.sql?.(fixture.url, ddl(fixture.table));
          await backend.sql?.(
            fixture.url,
            `insert into ${fixture.table}(biz_tag, max_id, step, description) ` +
              `values('leaf-tag', 1, 100, 'Leaf row')`,
          );
          // A first sight: fenced once by 1 range of max(maxStep 100, step 100), so IDs start at
          // 101.
          const segment = {
            store: fixture.url,
            table: fixture.table,
            fenceRanges: 1,
            maxStep: 100,
          };
          const server = await testServer({
            segment,
            opaque: { keys: '000102030405060708090a0b0c0d0e0f' },
          });
          try {
            assert.equal((await server.app.inject('/api/segment/get/leaf-tag')).body, '101');
            const batch = (await server.app.inject('/v1/segment/leaf-tag?count=2')).json();
            assert.deepEqual(batch, { tag: 'leaf-tag', ids: ['102', '103'] });
            const refused = await server.app.inject({
              method: 'POST',
              url: '/v1/tags',
              payload: { tag: 'secret', step: 10, opaque: true },
            });
            if (backend.name === 'sqlite') {
              assert.equal(refused.statusCode, 201, refused.body);
              assert.equal((await server.app.inject('/api/segment/get/leaf-tag')).body, '104');
              return;
            }
            assert.match(
              assertError(refused, 503, 'OPAQUE_UNAVAILABLE', false),
              /opaque IDs are not set up on this server/,
            );
            assertError(
              await server.app.inject({
                method: 'PATCH',
                url: '/v1/tags/leaf-tag',
                payload: { opaque: true },
              }),
              503,
              'OPAQUE_UNAVAILABLE',
              false,
            );
            assert.equal((await server.app.inject('/api/segment/get/leaf-tag')).body, '104');
            const line = server.logs.find((entry) => entry['code'] === 'OPAQUE_UNAVAILABLE');
            assert.match(
              String((line?.['err'] as { message?: string } | undefined)?.message),
              /has no opaque column \(a Leaf table\); run "idmint db init"/,
            );
          } finally {
            await server.close();
          }
        },
      );
    } else {
      it('a hash without the field is a plain tag; the field marks one', async (t) => {
        const fixture = await open(t, backend);
        const { Redis } = await import('ioredis');
        const client = new Redis(SERVICES.redis.url);
        try {
          await client.hset(`${fixture.table}:tag:by-hand`, 'max_id', '1', 'step', '10');
          await client.sadd(`${fixture.table}:tags`, 'by-hand');
          assert.equal((await fixture.store.getTag('by-hand'))?.opaque, false);
          assert.equal((await fixture.store.updateTag('by-hand', { opaque: true })).opaque, true);
          assert.equal(await client.hget(`${fixture.table}:tag:by-hand`, 'opaque'), '1');
          assert.deepEqual(
            (await fixture.store.listTags()).map((r) => r.opaque),
            [true],
          );
        } finally {
          await client.quit();
        }
      });
    }
  });
}

await describeWithServices('opaque tags through openSegmentStore URLs', [], () => {
  it('SQLite opened by URL has the column at once', async () => {
    const store = await openSegmentStore('sqlite::memory:');
    try {
      assert.equal((await store.createTag({ tag: 'x', step: 1, opaque: true })).opaque, true);
    } finally {
      await store.close();
    }
  });
});
