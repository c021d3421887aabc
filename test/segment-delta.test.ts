// A tag's own delta and remainder (TinyId's) on every store: ranges of the tag's class only, on a
// store of its own and on each database of a set (one class mod N * delta per database, inside its
// own class mod N), a change taking effect above max_id, and what cannot combine refused.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { openSegmentStores } from '../src/backends/open-segment-store.ts';
import type { SegmentRange } from '../src/ports/segment-store.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { SERVICES, describeWithServices, uniqueName } from './support/services.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-delta-'));
after(() => rmSync(root, { recursive: true, force: true }));

function idsOf(range: SegmentRange): bigint[] {
  const ids: bigint[] = [];
  for (let id = range.start; id < range.end; id += BigInt(range.stride ?? 1)) ids.push(id);
  assert.equal(ids.length, range.step);
  return ids;
}

/** Writes a remainder TinyId would accept (5 for delta 3) into the row by hand. */
async function handWrittenRemainder(
  backend: (typeof SEGMENT_BACKENDS)[keyof typeof SEGMENT_BACKENDS],
  fixture: { url: string; table: string },
): Promise<void> {
  if (backend.sql !== undefined) {
    await backend.sql(
      fixture.url,
      `UPDATE ${fixture.table} SET remainder = 5 WHERE biz_tag = 'odd'`,
    );
    return;
  }
  const { Redis } = await import('ioredis');
  const client = new Redis(fixture.url);
  try {
    await client.hset(`${fixture.table}:tag:odd`, 'remainder', '5');
  } finally {
    client.disconnect();
  }
}

for (const backend of [
  SEGMENT_BACKENDS.sqlite,
  SEGMENT_BACKENDS.postgres,
  SEGMENT_BACKENDS.mariadb,
  SEGMENT_BACKENDS.redis,
]) {
  await describeWithServices(`delta and remainder on ${backend.name}`, backend.services, () => {
    it('issues only the class, changes above max_id, refuses a bad pair', async (t) => {
      const fixture = await backend.open();
      t.after(() => fixture.dispose());
      const { store } = fixture;
      const created = await store.createTag({
        tag: 'odd',
        step: 3,
        delta: 2,
        remainder: 1,
        startId: 4n,
      });
      assert.deepEqual([created.delta, created.remainder], [2, 1]);
      const first = idsOf(await store.allocate('odd'));
      assert.deepEqual(first, [5n, 7n, 9n]);
      assert.deepEqual(idsOf(await store.allocate('odd', 2)), [11n, 13n]);
      await store.updateTag('odd', { delta: 3, remainder: 1 });
      assert.deepEqual(idsOf(await store.allocate('odd')), [16n, 19n, 22n]);
      await assert.rejects(store.updateTag('odd', { delta: 2, remainder: 2 }), {
        code: 'INVALID_ARGUMENT',
      });
      // A row written by hand with a remainder TinyId would accept: nothing is allocated from it.
      await handWrittenRemainder(backend, fixture);
      await assert.rejects(store.allocate('odd'), { code: 'TAG_MISCONFIGURED' });
    });
  });
}

describe('delta and remainder in a set of databases', () => {
  it('each database gets a class mod N * delta; a delta with a factor of N refused', async () => {
    const urls = [1, 2].map((n) => `sqlite:${join(root, `set-${n}.db`)}`);
    const set = await openSegmentStores(urls, { verify: false });
    try {
      await set.join();
      await set.createTag({ tag: 'thirds', step: 4, delta: 3, remainder: 2 });
      const ids = new Set<bigint>();
      for (let i = 0; i < 6; i++) {
        const range = await set.allocate('thirds');
        assert.equal(range.stride, 6);
        for (const id of idsOf(range)) {
          assert.equal(id % 3n, 2n, `${id} is of the tag's class`);
          assert.ok(!ids.has(id), `${id} twice`);
          ids.add(id);
        }
      }
      // Both databases served: classes 2 and 5 mod 6 (database 0 even, database 1 odd).
      assert.deepEqual(new Set([...ids].map((id) => id % 6n)), new Set([2n, 5n]));
      await assert.rejects(set.createTag({ tag: 'halves', step: 4, delta: 2, remainder: 1 }), {
        code: 'INVALID_ARGUMENT',
        message: /share a factor/,
      });
      await assert.rejects(set.updateTag('thirds', { delta: 4, remainder: 1 }), /share a factor/);
    } finally {
      await set.close();
    }
  });
});

await describeWithServices('delta and remainder in a set of Redis databases', ['redis'], () => {
  it('gives each database its class mod N * delta; reads delta and remainder back', async () => {
    const prefix = uniqueName('delta');
    const base = SERVICES.redis.url.replace(/\/\d*$/, '');
    const set = await openSegmentStores([`${base}/1`, `${base}/2`], {
      verify: false,
      table: prefix,
    });
    try {
      await set.join();
      const created = await set.createTag({ tag: 'thirds', step: 4, delta: 3, remainder: 2 });
      assert.deepEqual([created.delta, created.remainder], [3, 2]);
      const ids = new Set<bigint>();
      for (let i = 0; i < 6; i++) {
        const range = await set.allocate('thirds');
        assert.equal(range.stride, 6);
        for (const id of idsOf(range)) {
          assert.equal(id % 3n, 2n, `${id} is of the tag's class`);
          assert.ok(!ids.has(id), `${id} twice`);
          ids.add(id);
        }
      }
      assert.deepEqual(new Set([...ids].map((id) => id % 6n)), new Set([2n, 5n]));
    } finally {
      await set.close();
      const { Redis } = await import('ioredis');
      for (const db of [1, 2]) {
        const client = new Redis(`${base}/${db}`);
        const keys = await client.keys(`${prefix}:*`);
        if (keys.length > 0) await client.del(...keys);
        client.disconnect();
      }
    }
  });
});

// A node that opened a Leaf table (no delta columns) keeps its statements until it learns of the
// columns. If `idmint db init` adds them and a tag is given a delta before the node's next full
// tag read, its next allocation must still be in the tag's class: the row it gets back shows the
// columns, and the range outside the class is skipped.
for (const backend of [
  SEGMENT_BACKENDS.sqlite,
  SEGMENT_BACKENDS.postgres,
  SEGMENT_BACKENDS.mariadb,
]) {
  await describeWithServices(
    `a delta given after db init (${backend.name})`,
    backend.services,
    () => {
      it('a node that saw a Leaf table allocates in the class at once', async (t) => {
        const fixture = await backend.open({ init: false });
        t.after(() => fixture.dispose());
        const sql = backend.sql;
        assert.ok(sql !== undefined);
        await sql(
          fixture.url,
          `CREATE TABLE ${fixture.table} (biz_tag varchar(128) NOT NULL PRIMARY KEY, ` +
            'max_id bigint NOT NULL DEFAULT 1, step int NOT NULL, ' +
            'description varchar(256) DEFAULT NULL, update_time timestamp NULL)',
        );
        await sql(
          fixture.url,
          `INSERT INTO ${fixture.table} (biz_tag, max_id, step) VALUES ('late', 1, 4)`,
        );
        const node = fixture.store;
        const before = await node.allocate('late');
        assert.equal(before.stride ?? 1, 1, 'a Leaf table: every ID');
        const operator = await fixture.openAnother();
        await operator.init();
        await operator.updateTag('late', { delta: 2, remainder: 1 });
        const after = await node.allocate('late');
        assert.equal(after.stride, 2);
        assert.deepEqual(
          idsOf(after).filter((id) => id % 2n !== 1n),
          [],
        );
        assert.ok(after.start >= before.end);
        // And from then on, without a second look.
        assert.equal((await node.allocate('late')).start % 2n, 1n);
      });
    },
  );
}
