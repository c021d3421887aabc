// Sets of segment databases on real services: each backend as one database of a set (its residue
// columns, allocation, guards), a set of one passing the whole store contract, and sets across
// two PostgreSQL databases, MariaDB and Redis: forming one from a Leaf table in use, adding a
// database under live nodes, refusals of a set that would repeat IDs, and a database that hangs.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, it } from 'node:test';
import { MonotonicClock } from '../src/clocks/monotonic-clock.ts';
import { MAX_TAG_STEP } from '../src/core/segment-limits.ts';
import type { SegmentResidue, SegmentStore } from '../src/ports/segment-store.ts';
import { SegmentService } from '../src/service/segment-service.ts';
import type { MultiSegmentStore, SetMemberStore } from '../src/stores/multi/multi-segment-store.ts';
import { openSegmentStore, openSegmentStores } from '../src/backends/open-segment-store.ts';
import { SET_URLS, dropSet, proxied, rawSql } from './support/segment-sets.ts';
import { setRecordedHistory } from './support/segment-backends.ts';
import { rejectsWith, runSegmentStoreSuite } from './support/segment-store-suite.ts';
import { describeWithServices, uniqueName, type ServiceName } from './support/services.ts';

const sqliteDir = mkdtempSync(join(tmpdir(), 'idmint-sets-'));
process.on('exit', () => rmSync(sqliteDir, { recursive: true, force: true }));

/** Sets a tag's stored max_id directly, as an operator or a restored backup would. */
async function setMaxId(url: string, table: string, tag: string, maxId: bigint): Promise<void> {
  if (url.startsWith('sqlite:')) {
    const db = new DatabaseSync(url.slice('sqlite:'.length));
    db.prepare(`UPDATE ${table} SET max_id = ? WHERE biz_tag = ?`).run(maxId, tag);
    db.close();
  } else if (url.startsWith('redis')) {
    const { Redis } = await import('ioredis');
    const client = new Redis(url);
    await client.hset(`${table}:tag:${tag}`, 'max_id', maxId.toString());
    await client.quit();
  } else {
    await rawSql(url, `UPDATE ${table} SET max_id = ${maxId} WHERE biz_tag = '${tag}'`);
  }
}

const BACKENDS: { name: string; services: ServiceName[]; url: () => string }[] = [
  {
    name: 'sqlite',
    services: [],
    url: () => `sqlite:${join(sqliteDir, `${uniqueName('db')}.db`)}`,
  },
  { name: 'postgres', services: ['postgres'], url: () => SET_URLS.postgresA },
  { name: 'mariadb', services: ['mysql'], url: () => SET_URLS.mariadb },
  { name: 'redis', services: ['redis'], url: () => SET_URLS.redis },
];

/**
 * Stores a test opened, closed when it ends however it ends (an open pool would keep the process
 * alive).
 */
const opened = new Set<SegmentStore>();
afterEach(async () => {
  for (const store of opened) await store.close().catch(() => undefined);
  opened.clear();
});
function track<T extends SegmentStore>(store: T): T {
  opened.add(store);
  return store;
}

const member = async (url: string, table: string, residue?: SegmentResidue) =>
  track(
    (await openSegmentStore(url, {
      table,
      init: false,
      ...(residue === undefined ? {} : { residue }),
    })) as SetMemberStore,
  );

for (const backend of BACKENDS) {
  await describeWithServices(`a database of a set: ${backend.name}`, backend.services, () => {
    it('init adds id_offset and id_increment to a Leaf table in use', async (t) => {
      const url = backend.url();
      const table = uniqueName('set');
      t.after(() => (url.startsWith('sqlite') ? undefined : dropSet([url], table)));
      const plain = track(await openSegmentStore(url, { table, init: true }));
      await plain.createTag({ tag: 'orders', step: 10, startId: 1001n });
      assert.deepEqual(await plain.allocate('orders'), {
        tag: 'orders',
        start: 1001n,
        end: 1011n,
        step: 10,
        tagStep: 10,
      });
      const one = await member(url, table, { offset: 1, increment: 3 });
      await one.init();
      await one.init(); // idempotent
      const row = await one.getTag('orders');
      assert.equal(row?.maxId, 1011n);
      assert.ok(
        row?.residue === undefined || (row.residue.offset === 0 && row.residue.increment === 1),
        `a plain row: ${JSON.stringify(row?.residue)}`,
      );
      await rejectsWith(
        one.allocate('orders'),
        'TAG_MISCONFIGURED',
        /its row is a plain row \(no set\).*this store is database 1 of a set of 3/,
      );
      assert.equal((await plain.getTag('orders'))?.maxId, 1011n, 'nothing allocated');
      assert.equal(
        (await plain.allocate('orders')).end,
        1021n,
        'the store of its own still serves the plain row',
      );
    });

    it('joins a set with a plain table in use, above every ID issued', async (t) => {
      const url = backend.url();
      const other = `sqlite:${join(sqliteDir, `${uniqueName('other')}.db`)}`;
      const table = uniqueName('set');
      t.after(() => (url.startsWith('sqlite') ? undefined : dropSet([url], table)));
      const plain = track(await openSegmentStore(url, { table, init: true }));
      await plain.createTag({ tag: 'orders', step: 7, startId: 40n });
      for (let i = 0; i < 3; i++) await plain.allocate('orders'); // max_id 61: IDs up to 60 issued
      const set = await openSet([url, other], table);
      assert.deepEqual((await set.join()).tags, [
        { tag: 'orders', action: 'reformed', maxId: 61n },
      ]);
      assert.deepEqual(
        [
          (await (await member(url, table, { offset: 0, increment: 2 })).getTag('orders'))?.maxId,
          (await (await member(other, table, { offset: 1, increment: 2 })).getTag('orders'))?.maxId,
        ],
        [62n, 61n],
      );
      await rejectsWith(plain.allocate('orders'), 'TAG_MISCONFIGURED', /database 0 of a set of 2/);
      const ids = await drawThrough(set, 'orders', 40);
      assert.ok(ids.every((id) => id >= 61n) && new Set(ids).size === 40);
      assert.deepEqual(new Set(ids.map((id) => id % 2n)), new Set([0n, 1n]));
    });

    it("allocates a class's IDs N apart, realigns max_id, 64-bit products", async (t) => {
      const url = backend.url();
      const table = uniqueName('set');
      t.after(() => (url.startsWith('sqlite') ? undefined : dropSet([url], table)));
      const one = await member(url, table, { offset: 1, increment: 3 });
      await one.init();
      assert.equal((await one.createTag({ tag: 'a', step: 5, startId: 100n })).maxId, 100n);
      assert.deepEqual((await one.createTag({ tag: 'b', step: 5, startId: 101n })).residue, {
        offset: 1,
        increment: 3,
      });
      assert.equal((await one.getTag('b'))?.maxId, 103n);
      assert.deepEqual(await one.allocate('a'), {
        tag: 'a',
        start: 100n,
        end: 115n,
        step: 5,
        stride: 3,
        tagStep: 5,
      });
      assert.deepEqual(await one.allocate('a', 2), {
        tag: 'a',
        start: 115n,
        end: 121n,
        step: 2,
        stride: 3,
        tagStep: 5,
      });
      // Moved off its class (a Leaf node, a hand edit): raised to the class, skipping only class-1
      // IDs no one issued.
      await setMaxId(url, table, 'a', 122n);
      assert.deepEqual(await one.allocate('a'), {
        tag: 'a',
        start: 124n,
        end: 139n,
        step: 5,
        stride: 3,
        tagStep: 5,
      });
      // step * N past 2^31: PostgreSQL would compute int * int in 32 bits and fail.
      await one.createTag({ tag: 'big', step: MAX_TAG_STEP, startId: 1n });
      const big = await one.allocate('big');
      assert.equal(big.end - big.start, BigInt(MAX_TAG_STEP) * 3n);
      assert.equal(big.start % 3n, 1n);
      // The tail goes back within the class only.
      assert.equal(await one.release('a', 127n, 139n), true);
      assert.equal((await one.getTag('a'))?.maxId, 127n);
      await rejectsWith(
        one.release('a', 128n, 139n),
        'INVALID_ARGUMENT',
        /both bounds must be ≡ 1 \(mod 3\)/,
      );
    });

    it('refuses a row of another class or fenced; a single store a set row', async (t) => {
      const url = backend.url();
      const table = uniqueName('set');
      t.after(() => (url.startsWith('sqlite') ? undefined : dropSet([url], table)));
      const zero = await member(url, table, { offset: 0, increment: 2 });
      await zero.init();
      const one = await member(url, table, { offset: 1, increment: 2 });
      await one.createTag({ tag: 'orders', step: 10, startId: 1n });
      await rejectsWith(
        zero.allocate('orders'),
        'TAG_MISCONFIGURED',
        /its row is database 1 of a set of 2 .*this store is database 0 of a set of 2/,
      );
      const plain = await member(url, table);
      await rejectsWith(
        plain.allocate('orders'),
        'TAG_MISCONFIGURED',
        /its row is database 1 of a set of 2.*never alone/,
      );
      // MySQL's transaction rolls back and Redis checks first; with RETURNING (PostgreSQL, SQLite)
      // the refused range is made and skipped, never issued.
      const moved = backend.name === 'mariadb' || backend.name === 'redis' ? 0n : 10n;
      assert.equal((await one.getTag('orders'))?.maxId, 1n + moved);
      // The set realigns past a range so skipped.
      assert.equal((await one.allocate('orders')).start, moved === 0n ? 1n : 11n);
      const row = await one.getTag('orders');
      // Fenced, as `idmint db init` does while it re-forms a set: nobody allocates.
      assert.equal(
        await one.reassign(
          'orders',
          { maxId: 0n, residue: { offset: 1, increment: 2 } },
          { maxId: row!.maxId, residue: { offset: 1, increment: 0 } },
        ),
        false,
        'a compare-and-set on a stale max_id',
      );
      assert.equal(
        await one.reassign(
          'orders',
          { maxId: row!.maxId, residue: { offset: 1, increment: 2 } },
          { maxId: row!.maxId, residue: { offset: 1, increment: 0 } },
        ),
        true,
      );
      await rejectsWith(one.allocate('orders'), 'TAG_MISCONFIGURED', /fenced/);
      assert.equal(
        await one.release('orders', row!.maxId - 4n, row!.maxId),
        false,
        'no give-back onto a fenced row',
      );
      assert.equal((await one.getTag('orders'))?.maxId, row!.maxId);
      await rejectsWith(plain.allocate('orders'), 'TAG_MISCONFIGURED', /fenced/);
    });
    it("keeps the set's records beside the table, compare-and-set", async (t) => {
      const url = backend.url();
      const table = uniqueName('set');
      t.after(() => (url.startsWith('sqlite') ? undefined : dropSet([url], table)));
      const one = await member(url, table, { offset: 1, increment: 3 });
      // Before init (no table yet on SQL): nothing recorded, not an error.
      assert.deepEqual(await one.readSetEntries(['self', 'set']), [undefined, undefined]);
      await one.init();
      const tag = 'ünï:cøde/{x} ';
      assert.deepEqual(await one.readSetEntries([]), []);
      assert.deepEqual(await one.readSetEntries(['self', `high/1/${tag}`]), [undefined, undefined]);
      assert.equal(await one.writeSetEntry('self', undefined, '{"id":"a"}'), true);
      assert.equal(
        await one.writeSetEntry('self', undefined, '{"id":"b"}'),
        false,
        'an entry is created once',
      );
      assert.equal(await one.writeSetEntry(`high/1/${tag}`, undefined, 'x'.repeat(3000)), true);
      const entries = await one.readSetEntries(['self', 'set', `high/1/${tag}`]);
      const long = { version: 1, value: 'x'.repeat(3000) };
      assert.deepEqual(entries, [{ version: 1, value: '{"id":"a"}' }, undefined, long]);
      assert.equal(
        await one.writeSetEntry('self', 2, '{"id":"c"}'),
        false,
        'a stale version changes nothing',
      );
      assert.equal(await one.writeSetEntry('self', 1, '{"id":"c"}'), true);
      assert.deepEqual(await one.readSetEntries(['self']), [{ version: 2, value: '{"id":"c"}' }]);
      // Many keys in one read (in chunks), each with its own answer.
      const keys = Array.from({ length: 450 }, (_, i) => `high/0/t${i}`);
      for (const key of keys.slice(0, 3))
        assert.equal(await one.writeSetEntry(key, undefined, key), true);
      const read = await one.readSetEntries(keys);
      assert.equal(read.length, 450);
      const values = read.slice(0, 4).map((entry) => entry?.value);
      assert.deepEqual(values, ['high/0/t0', 'high/0/t1', 'high/0/t2', undefined]);
      // Leaf's own table is untouched: no tag appears.
      assert.deepEqual(await one.listTags(), []);
    });
  });

  await describeWithServices(
    `a set of one database passes the SegmentStore contract: ${backend.name}`,
    backend.services,
    () => {
      const url = backend.url();
      const table = uniqueName('set1');
      runSegmentStoreSuite({
        create: async () => {
          const store = await openSegmentStores([url], { table, init: true });
          const others: SegmentStore[] = [];
          return {
            store,
            sequentialNodes: url.startsWith('sqlite'),
            setRecordedHistory: (value) => setRecordedHistory(url, table, value),
            async openAnother(options = {}) {
              const other = await openSegmentStores([url], { ...options, table, init: false });
              others.push(other);
              return other;
            },
            dispose: async () => {
              for (const other of others) await other.close();
              await store.close();
              if (!url.startsWith('sqlite')) await dropSet([url], table);
            },
          };
        },
      });
    },
  );
}

/** Opens the set at `urls` on `table`; every call after close is refused. */
async function openSet(
  urls: readonly string[],
  table: string,
  options: { verify?: boolean; timeoutMs?: number } = {},
): Promise<MultiSegmentStore> {
  return track(
    await openSegmentStores(urls, {
      table,
      verify: options.verify ?? false,
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    }),
  );
}

/** Draws `count` IDs of `tag` through a SegmentService on `store` with a small fixed step. */
async function drawThrough(store: SegmentStore, tag: string, count: number): Promise<bigint[]> {
  const service = new SegmentService({
    store,
    clock: new MonotonicClock(),
    tagRefreshMs: 0,
    step: { maxStep: 20 },
  });
  await service.start();
  const ids: bigint[] = [];
  for (let i = 0; i < count; i++) ids.push(service.nextSync(tag) ?? (await service.next(tag)));
  await service.close();
  return ids;
}

await describeWithServices(
  'sets across two PostgreSQL databases, MariaDB and Redis',
  ['postgres', 'mysql', 'redis'],
  () => {
    const all = [SET_URLS.postgresA, SET_URLS.postgresB, SET_URLS.mariadb, SET_URLS.redis];

    it('forms a set from a Leaf table in use and two new databases', async (t) => {
      const table = uniqueName('set');
      t.after(() => dropSet(all, table));
      const leaf = track(await openSegmentStore(SET_URLS.postgresA, { table, init: true }));
      await leaf.createTag({ tag: 'orders', step: 100 });
      await leaf.createTag({ tag: 'users', step: 10, startId: 7n, description: 'people' });
      for (let i = 0; i < 50; i++) await leaf.allocate('orders');
      // 5001: every ID issued is below it
      const issued = (await leaf.getTag('orders'))?.maxId as bigint;
      await leaf.close();

      const urls = [SET_URLS.postgresA, SET_URLS.postgresB, SET_URLS.mariadb];
      const set = await openSet(urls, table);
      await rejectsWith(
        set.verify(),
        'CONFIG_INVALID',
        /database 0 \(.*\) holds tag "orders" as a plain row/,
      );
      const report = await set.join();
      assert.deepEqual(
        report.tags.map((r) => [r.tag, r.action, r.maxId]),
        [
          ['orders', 'reformed', issued],
          ['users', 'reformed', 7n],
        ],
      );
      await set.verify();
      const members = await Promise.all(
        urls.map((url, offset) => member(url, table, { offset, increment: 3 })),
      );
      for (const [offset, store] of members.entries()) {
        const row = await store.getTag('orders');
        assert.deepEqual(row?.residue, { offset, increment: 3 });
        assert.ok(
          (row?.maxId as bigint) >= issued &&
            (row?.maxId as bigint) < issued + 3n &&
            (row?.maxId as bigint) % 3n === BigInt(offset),
          `database ${offset}: ${row?.maxId}`,
        );
        assert.equal((await store.getTag('users'))?.description, 'people');
        await store.close();
      }
      assert.deepEqual(
        (await set.join()).tags.map((r) => r.action),
        ['unchanged', 'unchanged'],
        'joining again changes nothing',
      );
      const ids = await drawThrough(set, 'orders', 300);
      assert.ok(
        ids.every((id) => id >= issued),
        "no ID at or below the Leaf table's",
      );
      assert.equal(new Set(ids).size, ids.length);
      assert.deepEqual(new Set(ids.map((id) => id % 3n)), new Set([0n, 1n, 2n]));
      await set.close();
    });

    it('adds a database under running nodes: no ID twice, old nodes refused', async (t) => {
      const table = uniqueName('set');
      t.after(() => dropSet(all, table));
      const twoUrls = [SET_URLS.postgresA, SET_URLS.mariadb];
      const two = await openSet(twoUrls, table);
      await two.join();
      await two.createTag({ tag: 'orders', step: 10 });
      const oldNode = new SegmentService({
        store: two,
        clock: new MonotonicClock(),
        tagRefreshMs: 0,
        step: { maxStep: 10 },
        retryAfterMs: 20,
      });
      await oldNode.start();
      const oldIds: bigint[] = [];
      const oldErrors: string[] = [];
      let stop = false;
      const drawing = (async () => {
        while (!stop) {
          try {
            oldIds.push(oldNode.nextSync('orders') ?? (await oldNode.next('orders')));
          } catch (error) {
            oldErrors.push((error as { code?: string }).code ?? String(error));
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
          if (oldIds.length % 20 === 0) await new Promise((resolve) => setImmediate(resolve));
        }
      })();
      while (oldIds.length < 200) await new Promise((resolve) => setTimeout(resolve, 5));

      const threeUrls = [SET_URLS.postgresA, SET_URLS.mariadb, SET_URLS.postgresB];
      const three = await openSet(threeUrls, table);
      const { tags } = await three.join();
      const floor = tags[0]?.maxId as bigint;
      await three.verify();
      const newIds = await drawThrough(three, 'orders', 300);
      while (oldErrors.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      stop = true;
      await drawing;
      await oldNode.close();
      assert.ok(
        oldErrors.every((code) => code === 'TAG_MISCONFIGURED'),
        `the old node is refused by every re-formed row: ${[...new Set(oldErrors)].join(', ')}`,
      );
      assert.ok(
        newIds.every((id) => id >= floor),
        'the new set starts above everything the old one allocated',
      );
      assert.ok(
        oldIds.every((id) => id < floor),
        'the old node issued only from ranges allocated before the re-forming',
      );
      const everything = [...oldIds, ...newIds];
      assert.equal(new Set(everything).size, everything.length, 'an ID was issued twice');
      await rejectsWith(
        openSet(twoUrls, table, { verify: true }),
        'CONFIG_INVALID',
        /holds tag "orders" as database 0 of a set of 3/,
      );
      await two.close();
      await three.close();
    });

    it('refuses to re-form a set that leaves out a database', async (t) => {
      const table = uniqueName('set');
      t.after(() => dropSet(all, table));
      const urls = [SET_URLS.postgresA, SET_URLS.postgresB, SET_URLS.mariadb];
      const three = await openSet(urls, table);
      await three.join();
      await three.createTag({ tag: 'orders', step: 10 });
      await drawThrough(three, 'orders', 100);
      const before = await Promise.all(
        urls.map(async (url, offset) =>
          (await member(url, table, { offset, increment: 3 })).getTag('orders'),
        ),
      );
      const withoutOne = await openSet(
        [SET_URLS.postgresA, SET_URLS.mariadb, SET_URLS.redis, SET_URLS.postgresB].slice(0, 2),
        table,
      );
      const leftOut = new RegExp(
        'database 1 of the set recorded in database 0 \\(postgres:.*\\), postgres:.*, is ' +
          'not in the list: ',
      );
      await rejectsWith(withoutOne.join(), 'INVALID_ARGUMENT', leftOut);
      const after = await Promise.all(
        urls.map(async (url, offset) =>
          (await member(url, table, { offset, increment: 3 })).getTag('orders'),
        ),
      );
      assert.deepEqual(
        after.map((r) => [r?.maxId, r?.residue]),
        before.map((r) => [r?.maxId, r?.residue]),
        'no row was fenced or moved',
      );
      // An empty database in place of a member of a formed set of the same size: refused, naming
      // the command that replaces it (test/segment-set-members.test.ts runs it).
      const replaced = await openSet([SET_URLS.postgresA, SET_URLS.redis, SET_URLS.mariadb], table);
      const command = new RegExp(
        'lost for good and redis:.* replaces it, run "idmint db init --stores ' +
          'postgres:.*,redis:.*,mysql:',
      );
      await rejectsWith(replaced.join(), 'INVALID_ARGUMENT', command);
      for (const store of [three, withoutOne, replaced]) await store.close();
    });

    it('a cut-short re-forming is refused at start-up, completed on a rerun', async (t) => {
      const table = uniqueName('set');
      t.after(() => dropSet(all, table));
      const urls = [SET_URLS.postgresB, SET_URLS.redis];
      const set = await openSet(urls, table);
      await set.join();
      await set.createTag({ tag: 'orders', step: 10 });
      const ids = await drawThrough(set, 'orders', 100);
      const redis = await member(SET_URLS.redis, table, { offset: 1, increment: 2 });
      const row = await redis.getTag('orders');
      assert.equal(
        await redis.reassign(
          'orders',
          { maxId: row!.maxId, residue: { offset: 1, increment: 2 } },
          { maxId: row!.maxId, residue: { offset: 1, increment: 0 } },
        ),
        true,
      );
      await rejectsWith(
        openSet(urls, table, { verify: true }),
        'CONFIG_INVALID',
        /database 1 \(redis:.*\) holds tag "orders" as fenced/,
      );
      assert.deepEqual(
        (await set.join()).tags.map((r) => r.action),
        ['reformed'],
      );
      const reopened = await openSet(urls, table, { verify: true });
      const more = await drawThrough(reopened, 'orders', 100);
      assert.equal(new Set([...ids, ...more]).size, 200);
      for (const store of [set, reopened, redis]) await store.close();
    });

    it('refuses at start-up a set in another order or size, naming each', async (t) => {
      const table = uniqueName('set');
      t.after(() => dropSet(all, table));
      const withPassword = SET_URLS.postgresA.replace('postgres@', 'postgres:s3cret-pw@');
      const urls = [withPassword, SET_URLS.postgresB, SET_URLS.mariadb];
      const set = await openSet(urls, table);
      await set.join();
      await set.createTag({ tag: 'orders', step: 10 });
      await set.close();
      const swapped = openSegmentStores([SET_URLS.postgresB, withPassword, SET_URLS.mariadb], {
        table,
      });
      await rejectsWith(
        swapped,
        'CONFIG_INVALID',
        new RegExp(
          'database 0 \\(.*\\) holds tag "orders" as database 1 of a set of 3; database 1 ' +
            '\\(postgres://postgres:\\*\\*\\*@.*\\) holds tag "orders" as database 0 of a set ' +
            'of 3',
        ),
      );
      await assert.rejects(
        openSegmentStores([SET_URLS.postgresB, withPassword, SET_URLS.mariadb], { table }),
        (error: Error) => !error.message.includes('s3cret'),
      );
      await rejectsWith(
        openSegmentStores([withPassword, SET_URLS.postgresB], { table }),
        'CONFIG_INVALID',
        /as database 0 of a set of 3/,
      );
      await rejectsWith(
        openSegmentStores([withPassword, withPassword], { table }),
        'CONFIG_INVALID',
        /is listed twice/,
      );
      const ok = track(await openSegmentStores(urls, { table }));
      assert.equal(ok.size, 3);
      await ok.close();
    });

    it('a black-holed database costs one timeout, then is skipped', async (t) => {
      const table = uniqueName('set');
      t.after(() => dropSet(all, table));
      const through = await proxied([SET_URLS.postgresA, SET_URLS.postgresB, SET_URLS.mariadb]);
      t.after(() => through.close());
      // Long enough for init's DDL on a loaded machine; twelve timeouts would still take 12 s.
      const timeoutMs = 1000;
      const set = track(await openSegmentStores(through.urls, { table, timeoutMs, verify: false }));
      await set.join();
      await set.createTag({ tag: 'orders', step: 10 });
      for (let i = 0; i < 6; i++) await set.allocate('orders');
      through.proxies[1]?.hang();
      const started = performance.now();
      const classes: bigint[] = [];
      for (let i = 0; i < 12; i++) classes.push((await set.allocate('orders')).start % 3n);
      const took = performance.now() - started;
      assert.ok(!classes.includes(1n), 'nothing from the hung database');
      assert.ok(
        took < timeoutMs * 3,
        `one timeout, not one per allocation: ${Math.round(took)} ms`,
      );
      assert.equal(set.stats()[1]?.up, false);
      through.proxies[1]?.restore();
      await set.close();
    });
  },
);
