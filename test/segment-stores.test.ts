import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { PostgresSegmentStore } from '../src/stores/postgres/postgres-segment-store.ts';
import { MysqlSegmentStore } from '../src/stores/mysql/mysql-segment-store.ts';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { rejectsWith, runSegmentStoreSuite } from './support/segment-store-suite.ts';
import { SERVICES, describeWithServices, uniqueName } from './support/services.ts';

// One contract, every adapter (hono's shared router cases): each backend runs the same suite on
// a table or key prefix of its own.
for (const backend of Object.values(SEGMENT_BACKENDS)) {
  await describeWithServices(`SegmentStore conformance: ${backend.name}`, backend.services, () => {
    runSegmentStoreSuite({ create: () => backend.open() });
  });
}

describe('SegmentStore conformance: sqlite :memory:', () => {
  runSegmentStoreSuite({
    // Private to its one store: the history tests that need a second store run on SQLite files.
    shared: false,
    create: async () => {
      const store = new SqliteSegmentStore({ path: ':memory:' });
      return { store, dispose: () => store.close() };
    },
  });
});

// A pool the application already has, configured the lossy way (int8 and BIGINT parsed as
// numbers): the adapters' per-query parsing must still give exact bigints, and close() must leave
// the caller's pool open.
await describeWithServices('SegmentStore on a pool the caller owns', ['postgres', 'mysql'], () => {
  const table = uniqueName('seg_pool');
  const big = 2n ** 62n + 7n;

  it('postgres: exact bigints despite a number parser for int8; the pool stays open', async () => {
    const { default: pg } = await import('pg');
    const pool = new pg.Pool({
      connectionString: SERVICES.postgres.url,
      types: {
        getTypeParser: ((oid: number, format?: 'text') =>
          oid === 20
            ? Number
            : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
      },
    });
    after(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${table}`);
      await pool.end();
    });
    const store = new PostgresSegmentStore({ pool, table });
    await store.init();
    await store.createTag({ tag: 'big', step: 10, startId: big });
    assert.equal((await store.allocate('big')).end, big + 10n);
    assert.equal((await store.getTag('big'))?.maxId, big + 10n);
    await store.close();
    assert.equal(
      (await pool.query('select 1 as one')).rows[0].one,
      1,
      "the caller's pool was ended",
    );
  });

  it('mysql: exact bigints from a pool without bigNumberStrings; the pool stays open', async () => {
    const mysql = await import('mysql2/promise');
    const pool = mysql.createPool({ uri: SERVICES.mysql.url, connectionLimit: 2 });
    after(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${table}`);
      await pool.end();
    });
    const store = new MysqlSegmentStore({ pool, table });
    await store.init();
    await store.createTag({ tag: 'big', step: 10, startId: big });
    assert.equal((await store.allocate('big')).end, big + 10n);
    assert.equal((await store.getTag('big'))?.maxId, big + 10n);
    await store.close();
    const [rows] = await pool.query('select 1 as one');
    assert.deepEqual(rows, [{ one: 1 }]);
  });
});

describe('SegmentStore options', () => {
  it('refuses a table name that is not a plain identifier', () => {
    for (const table of [
      '',
      '1abc',
      'leaf alloc',
      'x;drop table y',
      'a'.repeat(64),
      'schema.table',
    ]) {
      assert.throws(
        () => new SqliteSegmentStore({ path: ':memory:', table }),
        /table must be an identifier/,
        table,
      );
    }
    assert.throws(
      () => new SqliteSegmentStore({ path: ':memory:', timeoutMs: 0 }),
      /timeoutMs must be a positive integer/,
    );
  });

  it('bounds every call by timeoutMs (STORE_UNAVAILABLE), keeps the cause', async () => {
    const pool = { connect: () => new Promise<never>(() => undefined), end: async () => undefined };
    const store = new PostgresSegmentStore({ pool, timeoutMs: 30 });
    await rejectsWith(
      store.allocate('x'),
      'STORE_UNAVAILABLE',
      /^postgres segment store, allocating a range: timed out after 30 ms$/,
    );
    const refused = new PostgresSegmentStore({
      pool: {
        connect: async () => {
          throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), {
            code: 'ECONNREFUSED',
          });
        },
        end: async () => undefined,
      },
    });
    await assert.rejects(
      refused.listTags(),
      (error: Error & { code?: string; retryable?: boolean }) => {
        assert.equal(error.code, 'STORE_UNAVAILABLE');
        assert.equal(error.retryable, true);
        // The cause as the system gave it, the operation in words, never the method's name.
        assert.equal(
          error.message,
          'postgres segment store, reading the tag list: connection refused',
        );
        assert.equal((error.cause as { code?: string }).code, 'ECONNREFUSED');
        return true;
      },
    );
  });
});
