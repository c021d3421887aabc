import assert from 'node:assert/strict';
import { it, type TestContext } from 'node:test';
import { MonotonicClock } from '../src/clocks/monotonic-clock.ts';
import { isIdMintError } from '../src/core/errors.ts';
import { SegmentService } from '../src/service/segment-service.ts';
import { assertError } from './support/http.ts';
import { SEGMENT_BACKENDS, type SegmentBackend } from './support/segment-backends.ts';
import { rejectsWith } from './support/segment-store-suite.ts';
import { testServer } from './support/server.ts';
import { SERVICES, describeWithServices } from './support/services.ts';

// Rows a Leaf table can hold that idmint itself would never write: written here directly, with
// SQL (or HSET on Redis), as a migrated Leaf table or an operator's hand may have them.

type Fixture = Awaited<ReturnType<SegmentBackend['open']>>;

/** Writes `(biz_tag, max_id, step)` rows as Leaf's own INSERT does (no update_time). */
async function writeRows(
  backend: SegmentBackend,
  fixture: Fixture,
  rows: readonly (readonly [string, number, number])[],
): Promise<void> {
  if (backend.sql !== undefined) {
    for (const [tag, maxId, step] of rows) {
      await backend.sql(
        fixture.url,
        `insert into ${fixture.table}(biz_tag, max_id, step, description) values('${tag}', ` +
          `${maxId}, ${step}, 'written by hand')`,
      );
    }
    return;
  }
  const { Redis } = await import('ioredis');
  const client = new Redis(SERVICES.redis.url);
  try {
    for (const [tag, maxId, step] of rows) {
      await client.hset(
        `${fixture.table}:tag:${tag}`,
        'max_id',
        String(maxId),
        'step',
        String(step),
      );
      await client.sadd(`${fixture.table}:tags`, tag);
    }
  } finally {
    await client.quit();
  }
}

async function open(t: TestContext, backend: SegmentBackend): Promise<Fixture> {
  const fixture = await backend.open();
  t.after(() => fixture.dispose());
  return fixture;
}

const MISCONFIGURED = [
  ['zero-step', 100, 0, 'step', '0'],
  ['negative-step', 100, -5, 'step', '-5'],
  ['negative-max-id', -10, 10, 'max_id', '-10'],
] as const;

for (const backend of Object.values(SEGMENT_BACKENDS)) {
  await describeWithServices(
    `rows written outside idmint (${backend.name})`,
    backend.services,
    () => {
      it('step <= 0 or max_id < 0 is TAG_MISCONFIGURED, not retryable, no change', async (t) => {
        const fixture = await open(t, backend);
        await writeRows(
          backend,
          fixture,
          MISCONFIGURED.map(([tag, maxId, step]) => [tag, maxId, step] as const),
        );
        for (const [tag, maxId, , column, value] of MISCONFIGURED) {
          for (const step of [undefined, 10]) {
            await assert.rejects(fixture.store.allocate(tag, step), (error: unknown) => {
              assert.ok(isIdMintError(error, 'TAG_MISCONFIGURED'), `${tag}: ${String(error)}`);
              assert.equal(error.retryable, false);
              assert.equal(error.status, 500);
              assert.match(
                error.message,
                new RegExp(
                  `^tag "${tag}": its stored ${column} is ${value}, which must be an integer from`,
                ),
              );
              // Neither SQL nor a driver's words (MySQL quoted the failing expression).
              assert.doesNotMatch(
                error.message,
                /select|update|where|coalesce|bigint|out of range|9223372036854775807 -/i,
              );
              assert.deepEqual(error.details, { tag, column, value });
              return true;
            });
          }
          assert.equal(
            (await fixture.store.getTag(tag))?.maxId,
            BigInt(maxId),
            `${tag}: max_id unchanged`,
          );
        }
        // The service answers the same, and keeps answering it (no range is ever made from the
        // row).
        const service = new SegmentService({
          store: fixture.store,
          clock: new MonotonicClock(),
          tagRefreshMs: 0,
          retryAfterMs: 0,
        });
        await service.start();
        for (let i = 0; i < 2; i++)
          await rejectsWith(
            service.next('zero-step'),
            'TAG_MISCONFIGURED',
            /tag "zero-step": its stored step is 0/,
          );
        // Fixed through idmint, the tag is served.
        await fixture.store.updateTag('zero-step', { step: 10 });
        assert.equal(await service.next('zero-step'), 100n);
        await service.close();
      });
    },
  );
}

// Leaf's own DDL (MySQL), as scripts/leaf_alloc.sql has it, and the portable one elsewhere.
const LEAF_MYSQL_DDL = (table: string, charset = '') => `CREATE TABLE \`${table}\` (
  \`biz_tag\` varchar(128)  NOT NULL DEFAULT '',
  \`max_id\` bigint(20) NOT NULL DEFAULT '1',
  \`step\` int(11) NOT NULL,
  \`description\` varchar(256)  DEFAULT NULL,
  \`update_time\` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (\`biz_tag\`)
) ENGINE=InnoDB${charset}`;
const PORTABLE_DDL = (table: string) =>
  `create table ${table} (biz_tag varchar(128) primary key, max_id bigint not null default ` +
  `1, step int not null, description varchar(256), update_time timestamp)`;

/**
 * The fence margin of the stores opened on Leaf tables idmint has no record of: the first
 * allocation fences every tag by it (docs/segments.md, Failover and restore).
 */
const FIRST_SIGHT = 1_000_000n;

const LEAF_TABLES: [SegmentBackend, (table: string) => string][] = [
  [SEGMENT_BACKENDS.mariadb, LEAF_MYSQL_DDL],
  [SEGMENT_BACKENDS.postgres, PORTABLE_DDL],
  [SEGMENT_BACKENDS.sqlite, PORTABLE_DDL],
];

/** Tags a varchar(128) holds that the JSON API would not create (its stricter rule). */
const LEAF_TAGS = ['order service', '订单/支付', 'a:b{c}', 'x'.repeat(128), '中'.repeat(128)];

for (const [backend, ddl] of LEAF_TABLES) {
  await describeWithServices(`Leaf's own table (${backend.name})`, backend.services, () => {
    it('serves every tag Leaf stored, Unicode, spaces and / included', async (t) => {
      const fixture = await backend.open({ init: false, fence: { ids: FIRST_SIGHT } });
      t.after(() => fixture.dispose());
      const sql = (statement: string) =>
        backend.sql?.(fixture.url, statement) ?? Promise.resolve([]);
      await sql(ddl(fixture.table));
      for (const [i, tag] of LEAF_TAGS.entries()) {
        await sql(
          `insert into ${fixture.table}(biz_tag, max_id, step, description) ` +
            `values('${tag}', ${1000 * (i + 1)}, 100, 'from Leaf')`,
        );
      }
      const service = new SegmentService({
        store: fixture.store,
        clock: new MonotonicClock(),
        tagRefreshMs: 0,
      });
      await service.start();
      assert.deepEqual(
        service
          .stats()
          .tags.map((stats) => stats.tag)
          .sort(),
        [...LEAF_TAGS].sort(),
      );
      for (const [i, tag] of LEAF_TAGS.entries()) {
        const first = BigInt(1000 * (i + 1)) + FIRST_SIGHT;
        assert.deepEqual(await service.nextBatch(tag, 2), [first, first + 1n], tag);
      }
      await service.close();
    });

    it('serves a tag only by its exact name, whatever the collation', async (t) => {
      const fixture = await backend.open({ init: false, fence: { ids: FIRST_SIGHT } });
      t.after(() => fixture.dispose());
      await backend.sql?.(fixture.url, ddl(fixture.table));
      await backend.sql?.(
        fixture.url,
        `insert into ${fixture.table}(biz_tag, max_id, step) values('Orders', 1, 100)`,
      );
      const service = new SegmentService({
        store: fixture.store,
        clock: new MonotonicClock(),
        tagRefreshMs: 0,
        negativeCacheMs: 60_000,
      });
      await service.start();
      // Leaf's MySQL table compares case-insensitively and ignores trailing spaces; Leaf's cache
      // (and idmint's) does not.
      for (const name of ['ORDERS', 'orders', 'Orders '])
        await rejectsWith(
          service.next(name),
          'TAG_NOT_FOUND',
          new RegExp(`"${name}" does not exist`),
        );
      assert.equal(await service.next('Orders'), 1n + FIRST_SIGHT);
      await service.close();
    });

    const onUpdate = backend.name === 'mariadb' ? ' and on every update' : '';
    it(`db init creates update_time as Leaf does: filled on insert${onUpdate}`, async (t) => {
      const fixture = await open(t, backend); // the table as `idmint db init` creates it
      const sql = (statement: string) =>
        backend.sql?.(fixture.url, statement) ?? Promise.resolve([]);
      // Leaf's INSERT names no update_time (and nor does an operator's, usually).
      await sql(
        `insert into ${fixture.table}(biz_tag, max_id, step, description) values('by-hand', ` +
          `1, 10, 'no update_time')`,
      );
      const inserted = (await fixture.store.getTag('by-hand'))?.updatedAt;
      assert.ok(inserted instanceof Date, `update_time after insert: ${String(inserted)}`);
      assert.ok(
        Math.abs(inserted.getTime() - Date.now()) < 10 * 60_000,
        `update_time ${inserted.toISOString()} is not the insert's time`,
      );
      if (backend.name === 'mariadb') {
        // Leaf's own allocation names no update_time either: ON UPDATE sets it.
        await sql(
          `update ${fixture.table} set update_time = '2001-02-03 04:05:06' where biz_tag = ` +
            `'by-hand'`,
        );
        await sql(`update ${fixture.table} set max_id = max_id + step where biz_tag = 'by-hand'`);
        const updated = (await fixture.store.getTag('by-hand'))?.updatedAt;
        assert.ok(
          updated instanceof Date && Math.abs(updated.getTime() - Date.now()) < 10 * 60_000,
          `update_time after Leaf's UPDATE: ${updated?.toISOString()}`,
        );
      }
    });
  });
}

await describeWithServices(
  'a Leaf table in a character set that cannot hold every tag (MariaDB, latin1)',
  ['mysql'],
  () => {
    it('a tag the table cannot hold is not found; creating one is 400', async (t) => {
      const backend = SEGMENT_BACKENDS.mariadb;
      const fixture = await backend.open({ init: false, fence: { ids: FIRST_SIGHT } });
      t.after(() => fixture.dispose());
      await backend.sql?.(fixture.url, LEAF_MYSQL_DDL(fixture.table, ' DEFAULT CHARSET=latin1'));
      await backend.sql?.(
        fixture.url,
        `insert into ${fixture.table}(biz_tag, max_id, step) values('plain', 1, 10)`,
      );
      const store = fixture.store;
      assert.equal(await store.getTag('订单'), undefined);
      await rejectsWith(store.allocate('订单'), 'TAG_NOT_FOUND');
      assert.equal(await store.release('订单', 1n, 2n), false);
      await rejectsWith(
        store.updateTag('订单', { step: 5 }),
        'INVALID_ARGUMENT',
        /cannot store this tag or description/,
      );
      await rejectsWith(
        store.createTag({ tag: '订单', step: 10 }),
        'INVALID_ARGUMENT',
        /table \w+ cannot store this tag or description \(Incorrect string value/,
      );
      await rejectsWith(
        store.updateTag('plain', { description: '说明' }),
        'INVALID_ARGUMENT',
        /cannot store/,
      );
      const service = new SegmentService({ store, clock: new MonotonicClock(), tagRefreshMs: 0 });
      await service.start();
      await rejectsWith(service.next('订单'), 'TAG_NOT_FOUND');
      assert.equal(await service.next('plain'), 1n + FIRST_SIGHT);
      await service.close();
    });
  },
);

await describeWithServices('a misconfigured row over HTTP (PostgreSQL)', ['postgres'], () => {
  it('answers 500 TAG_MISCONFIGURED, no Retry-After, Leaf and JSON routes', async (t) => {
    const fixture = await open(t, SEGMENT_BACKENDS.postgres);
    await writeRows(SEGMENT_BACKENDS.postgres, fixture, [['broken', 1, 0]]);
    const server = await testServer({
      segment: { store: SERVICES.postgres.url, table: fixture.table },
    });
    t.after(() => server.close());
    for (const url of ['/api/segment/get/broken', '/v1/segment/broken?count=2']) {
      const message = assertError(await server.app.inject(url), 500, 'TAG_MISCONFIGURED', false);
      // The answer names the tag; the stored value is the operator's to read in the log.
      assert.match(
        message,
        /^tag "broken": its row in the segment store has a step or max_id no range can come from/,
      );
    }
  });
});
