// The incremental tag refresh on every real backend (issue 13): a read from a change cursor
// costs the rows written since, not the rows that exist; a write still in flight when a cursor
// was taken is not lost; `db init` indexes update_time for it.
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { it } from 'node:test';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import { SegmentService } from '../src/service/segment-service.ts';
import { changeOverlapMs } from '../src/stores/store-support.ts';
import { changeIndexName } from '../src/stores/sql/sql-segment-store.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { SERVICES, describeWithServices } from './support/services.ts';

/** The store timeout: long enough for init's DDL on a loaded machine, short for the look-back. */
const TIMEOUT_MS = 1000;

for (const backend of Object.values(SEGMENT_BACKENDS)) {
  await describeWithServices(`tag refresh: ${backend.name}`, backend.services, () => {
    it('a read from a change cursor returns exactly the tags written since', async () => {
      const fixture = await backend.open({ timeoutMs: TIMEOUT_MS });
      try {
        const { store } = fixture;
        for (let i = 0; i < 40; i++) await store.createTag({ tag: `old-${i}`, step: 10 });
        await store.allocate('old-0');
        // Past the overlap a change read looks back, and a second more for whole-second timestamps.
        await sleep(changeOverlapMs(TIMEOUT_MS) + 1200);
        const { cursor } = await store.listTagChanges(undefined);
        await store.allocate('old-1');
        await store.updateTag('old-2', { step: 5 });
        await store.createTag({ tag: 'new', step: 10 });
        const changes = await store.listTagChanges(cursor);
        assert.deepEqual(
          changes.records.map((record) => record.tag).sort(),
          ['new', 'old-1', 'old-2'],
          'the 41 rows not written since are not read',
        );
        assert.equal(changes.records.find((record) => record.tag === 'old-2')?.step, 5);
        assert.ok(Number(changes.cursor) >= Number(cursor), 'the cursor moves forward');
        const again = await store.listTagChanges(changes.cursor);
        assert.deepEqual(
          again.records.map((record) => record.tag).sort(),
          ['new', 'old-1', 'old-2'],
          'within the overlap the same rows come again, nothing else',
        );
      } finally {
        await fixture.dispose();
      }
    });
  });
}

await describeWithServices(
  'tag refresh: the update_time index db init creates',
  ['postgres', 'mysql'],
  () => {
    it('sqlite: the change read goes through the index', async () => {
      const fixture = await SEGMENT_BACKENDS.sqlite.open();
      try {
        const db = new DatabaseSync(fixture.url.slice('sqlite:'.length));
        const plan = db
          .prepare(
            `EXPLAIN QUERY PLAN SELECT * FROM ${fixture.table} WHERE update_time >= ` +
              `datetime(0 / 1000, 'unixepoch')`,
          )
          .all();
        db.close();
        assert.match(
          JSON.stringify(plan),
          new RegExp(`USING INDEX ${changeIndexName(fixture.table)}`),
        );
      } finally {
        await fixture.dispose();
      }
    });

    it('postgres and mariadb: init creates the index once, and again is a no-op', async () => {
      for (const backend of [SEGMENT_BACKENDS.postgres, SEGMENT_BACKENDS.mariadb]) {
        const fixture = await backend.open();
        try {
          await fixture.store.init(); // a second time: the index exists
          const rows =
            backend === SEGMENT_BACKENDS.postgres
              ? await backend.sql!(
                  fixture.url,
                  `SELECT indexname AS name FROM pg_indexes WHERE tablename = '${fixture.table}'`,
                )
              : await backend.sql!(
                  fixture.url,
                  `SELECT INDEX_NAME AS name FROM information_schema.statistics WHERE ` +
                    `TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '${fixture.table}'`,
                );
          assert.ok(
            rows.some((row) => row['name'] === changeIndexName(fixture.table)),
            `${backend.name}: ${JSON.stringify(rows)}`,
          );
        } finally {
          await fixture.dispose();
        }
      }
    });
  },
);

// Interleaving: another node's write is stamped (its transaction starts), then this node takes a
// change cursor, then that write commits. The next incremental read must still see it: a cursor
// alone would miss it, since its update_time is older than the cursor.
await describeWithServices(
  'tag refresh: a write in flight across a cursor is not missed',
  ['postgres', 'mysql'],
  () => {
    it('postgres and mariadb: a step committed after a refresh is read next', async () => {
      for (const backend of [SEGMENT_BACKENDS.postgres, SEGMENT_BACKENDS.mariadb]) {
        const fixture = await backend.open({ timeoutMs: 2000 });
        const other = await openRawConnection(
          backend === SEGMENT_BACKENDS.postgres ? 'postgres' : 'mysql',
        );
        try {
          await fixture.store.createTag({ tag: 'orders', step: 10 });
          const service = new SegmentService({
            store: fixture.store,
            clock: new ManualClock(0),
            tagRefreshMs: 0,
            tagFullRefreshMs: 3_600_000,
          });
          await service.start();
          await other.query('BEGIN');
          const now =
            backend === SEGMENT_BACKENDS.postgres
              ? "(now() AT TIME ZONE 'UTC')"
              : 'UTC_TIMESTAMP()';
          await other.query(
            `UPDATE ${fixture.table} SET step = 77, update_time = ${now} WHERE biz_tag = 'orders'`,
          );
          await sleep(1200); // the write's stamp is now well before any cursor taken from here on
          await service.refreshTags(); // takes a cursor while the write is uncommitted
          assert.equal(
            service.stats().tags.find((t) => t.tag === 'orders')?.tagStep,
            10,
            'not committed yet',
          );
          await other.query('COMMIT');
          await service.refreshTags();
          assert.equal(
            service.stats().tags.find((t) => t.tag === 'orders')?.tagStep,
            77,
            'the committed write is read although stamped before the cursor',
          );
          assert.equal(
            service.stats().fullTagRefreshes,
            1,
            'by an incremental read, not a full one',
          );
          await service.close();
        } finally {
          await other.end();
          await fixture.dispose();
        }
      }
    });
  },
);

/** One raw connection outside the store, to hold a transaction open. */
async function openRawConnection(
  kind: 'postgres' | 'mysql',
): Promise<{ query(sql: string): Promise<unknown>; end(): Promise<void> }> {
  if (kind === 'postgres') {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: SERVICES.postgres.url });
    await client.connect();
    return { query: (sql) => client.query(sql), end: () => client.end() };
  }
  const mysql = await import('mysql2/promise');
  const connection = await mysql.createConnection({ uri: SERVICES.mysql.url });
  await connection.query("SET time_zone = '+00:00'");
  return { query: (sql) => connection.query(sql), end: () => connection.end() };
}
