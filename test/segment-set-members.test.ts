// A set of segment databases stays whole (docs/segments.md, Several databases): its members are
// recorded in every one of them, so neither a re-forming cut short and run again with a shorter
// list, nor an empty database put in a lost member's place, can repeat an ID that member issued.
// Each case runs on SQLite files (faults injected around the real stores) and on real
// PostgreSQL, MariaDB and Redis (faults through TCP proxies), with IDs drawn through the service.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, it } from 'node:test';
import { MonotonicClock } from '../src/clocks/monotonic-clock.ts';
import type { SegmentStore } from '../src/ports/segment-store.ts';
import { SegmentService } from '../src/service/segment-service.ts';
import { MultiSegmentStore, type SetMemberStore } from '../src/stores/multi/multi-segment-store.ts';
import { highKey, parseHigh } from '../src/stores/multi/set-records.ts';
import { openSegmentStore, openSegmentStores } from '../src/backends/open-segment-store.ts';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { FaultySegmentStore } from './support/faulty-segment-store.ts';
import { deleteRedisPrefix } from './support/segment-backends.ts';
import { SET_URLS, dropSet, proxied } from './support/segment-sets.ts';
import { rejectsWith } from './support/segment-store-suite.ts';
import { describeWithServices, uniqueName, type ServiceName } from './support/services.ts';

const directory = mkdtempSync(join(tmpdir(), 'idmint-set-members-'));
after(() => rmSync(directory, { recursive: true, force: true }));

/**
 * Four databases a test forms sets of: A, B and C, the set, and D, an empty database that takes
 * C's place once C is lost. A set is opened on a list of them, by number, in order.
 */
interface Pool {
  open(list: readonly number[]): Promise<MultiSegmentStore>;
  /** The database stops answering (every set opened on it sees it down), or answers again. */
  down(db: number): void;
  up(db: number): void;
  /** A store on database `db` alone as database `offset` of a set of `increment`. */
  member(db: number, offset: number, increment: number): Promise<SetMemberStore>;
  /** Deletes every tag row of database `db`. */
  clearRows(db: number): Promise<void>;
  dispose(): Promise<void>;
}

const A = 0;
const B = 1;
const C = 2;
const D = 3;

/** SQLite files, each behind a fault injector; `wrappers` are those of the set opened last. */
function sqlitePool(): Pool & { wrappers: FaultySegmentStore[] } {
  const paths = [A, B, C, D].map((db) => join(directory, `${uniqueName('db')}-${db}.db`));
  const faulty: FaultySegmentStore[][] = [[], [], [], []];
  const opened: SegmentStore[] = [];
  const isDown = [false, false, false, false];
  const wrap = (db: number, offset: number, increment: number) => {
    const real = new SqliteSegmentStore({
      path: paths[db] as string,
      residue: { offset, increment },
    });
    const store = new FaultySegmentStore(real) as FaultySegmentStore & SetMemberStore;
    if (isDown[db]) store.mode = 'fail';
    faulty[db]?.push(store);
    opened.push(store);
    return store;
  };
  const pool = {
    wrappers: [] as FaultySegmentStore[],
    async open(list: readonly number[]) {
      pool.wrappers = list.map((db, index) => wrap(db, index, list.length));
      const name = (db: number) => `sqlite:${paths[db]}`;
      const databases = list.map((db, index) => ({
        store: pool.wrappers[index] as Member,
        name: name(db),
      }));
      const set = new MultiSegmentStore({ databases, backoffMs: 100, maxBackoffMs: 400 });
      await set.init();
      return set;
    },
    down: (db: number) => {
      isDown[db] = true;
      for (const store of faulty[db] ?? []) store.mode = 'fail';
    },
    up: (db: number) => {
      isDown[db] = false;
      for (const store of faulty[db] ?? []) store.mode = 'pass';
    },
    member: async (db: number, offset: number, increment: number) => wrap(db, offset, increment),
    clearRows: async (db: number) => {
      const file = new DatabaseSync(paths[db] as string);
      file.exec('DELETE FROM leaf_alloc');
      file.close();
    },
    dispose: async () => {
      for (const store of opened) await store.close().catch(() => undefined);
    },
  };
  return pool;
}

/** PostgreSQL (two databases), MariaDB, each behind a TCP proxy, and Redis as D. */
async function servicesPool(): Promise<Pool> {
  const table = uniqueName('members');
  const urls = [SET_URLS.postgresA, SET_URLS.mariadb, SET_URLS.postgresB];
  const through = await proxied(urls);
  const all = [...through.urls, SET_URLS.redis];
  const opened: SegmentStore[] = [];
  return {
    async open(list) {
      const options = { table, verify: false, timeoutMs: 1000, backoffMs: 200, maxBackoffMs: 1000 };
      const set = await openSegmentStores(
        list.map((db) => all[db] as string),
        options,
      );
      opened.push(set);
      return set;
    },
    down: (db) => through.proxies[db]?.cut(),
    up: (db) => through.proxies[db]?.restore(),
    member: async (db, offset, increment) => {
      const store = (await openSegmentStore(all[db] as string, {
        table,
        residue: { offset, increment },
      })) as Member;
      opened.push(store);
      return store;
    },
    // D is Redis: its tag hashes and tag set (the set's own hash goes too; D records no set yet).
    clearRows: (db) =>
      db === D ? deleteRedisPrefix(SET_URLS.redis, table) : Promise.reject(new Error('D only')),
    dispose: async () => {
      for (const store of opened) await store.close().catch(() => undefined);
      await through.close();
      await dropSet([...urls, SET_URLS.redis], table);
    },
  };
}

/**
 * `count` IDs of `orders` through a SegmentService on `store`, with a small fixed step; failures
 * counted by code.
 */
async function draw(
  store: SegmentStore,
  count: number,
): Promise<{ ids: bigint[]; codes: Map<string, number> }> {
  const clock = new MonotonicClock();
  const service = new SegmentService({
    store,
    clock,
    tagRefreshMs: 0,
    step: { maxStep: 10 },
    retryAfterMs: 10,
  });
  await service.start().catch(() => undefined);
  const ids: bigint[] = [];
  const codes = new Map<string, number>();
  for (let attempts = 0; ids.length < count && attempts < count * 20; attempts++) {
    try {
      ids.push(service.nextSync('orders') ?? (await service.next('orders')));
    } catch (error) {
      const code = (error as { code?: string }).code ?? String(error);
      codes.set(code, (codes.get(code) ?? 0) + 1);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  await service.close();
  return { ids, codes };
}

function assertNoRepeat(ids: readonly bigint[], what: string): void {
  const seen = new Set<bigint>();
  const repeated = ids.filter((id) => seen.has(id) || !seen.add(id));
  assert.deepEqual(
    repeated.slice(0, 5),
    [],
    `${what}: ${repeated.length} of ${ids.length} IDs issued twice`,
  );
}

const maxOf = (ids: readonly bigint[]) => ids.reduce((a, b) => (a > b ? a : b), 0n);

/** `idmint db init` leaving out a recorded member. */
const LEFT_OUT = new RegExp(
  'database 2 of the set recorded in database 0 \\(.*\\), .*, is not in the list: a ' +
    'database that issued',
);

type Member = FaultySegmentStore & SetMemberStore;

const POOLS: { name: string; services: ServiceName[]; create: () => Promise<Pool> }[] = [
  { name: 'SQLite files', services: [], create: async () => sqlitePool() },
  {
    name: 'PostgreSQL, MariaDB and Redis',
    services: ['postgres', 'mysql', 'redis'],
    create: servicesPool,
  },
];

for (const { name, services, create } of POOLS) {
  await describeWithServices(`a set's members stay whole: ${name}`, services, () => {
    it('a cut-short re-forming run again without a member is refused', async (t) => {
      const pool = await create();
      t.after(() => pool.dispose());
      const abc = await pool.open([A, B, C]);
      await abc.join();
      await abc.createTag({ tag: 'orders', step: 10 });
      const before = await draw(abc, 300);
      assert.ok(
        before.ids.some((id) => id % 3n === 2n),
        'C issued some of them',
      );
      // What an `idmint db init` cut short leaves: a row fenced, its set's size no longer in it.
      const a = await pool.member(A, 0, 3);
      const row = await a.getTag('orders');
      const maxId = row?.maxId as bigint;
      const fenced = { maxId, residue: { offset: 0, increment: 0 } };
      assert.equal(
        await a.reassign('orders', { maxId, residue: { offset: 0, increment: 3 } }, fenced),
        true,
      );
      const ab = await pool.open([A, B]);
      await rejectsWith(ab.join(), 'INVALID_ARGUMENT', LEFT_OUT);
      await rejectsWith(ab.verify(), 'CONFIG_INVALID', /the set its databases record 3/);
      // The same list as the run cut short completes it.
      assert.deepEqual(
        (await abc.join()).tags.map((r) => r.action),
        ['reformed'],
      );
      await abc.verify();
      const after = await draw(abc, 300);
      assertNoRepeat([...before.ids, ...after.ids], 'before and after the re-forming');
    });

    it("an empty database in a lost one's place starts above its IDs", async (t) => {
      const pool = await create();
      t.after(() => pool.dispose());
      const abc = await pool.open([A, B, C]);
      await abc.join();
      await abc.createTag({ tag: 'orders', step: 10 });
      const together = await draw(abc, 300);
      // A and B down: C serves alone, up to its high-water mark, and runs far ahead of them.
      pool.down(A);
      pool.down(B);
      const alone = await draw(abc, 2000);
      pool.up(A);
      pool.up(B);
      const failures = JSON.stringify([...alone.codes]);
      assert.equal(
        alone.ids.length,
        2000,
        `C alone served within its mark (failures: ${failures})`,
      );
      const fromC = [...together.ids, ...alone.ids].filter((id) => id % 3n === 2n);
      const a = await pool.member(A, 0, 3);
      const aMaxId = (await a.getTag('orders'))?.maxId as bigint;
      assert.ok(maxOf(fromC) > aMaxId + 3000n, `C ran ahead of A: ${maxOf(fromC)}`);

      // C is lost for good; D, empty, takes its place. Completing the tag row in D (what "idmint
      // tags create" does for a database that lacks it) starts above C's marks, not at A's and
      // B's max_id; and D issues nothing before "idmint db init --replace" makes it database 2.
      const abd = await pool.open([A, B, D]);
      await abd.createTag({ tag: 'orders', step: 10 });
      const d = await pool.member(D, 2, 3);
      assert.ok(
        ((await d.getTag('orders'))?.maxId as bigint) > maxOf(fromC),
        "D's row starts above every ID C issued",
      );
      const meanwhile = await draw(abd, 300);
      assertNoRepeat(
        [...together.ids, ...alone.ids, ...meanwhile.ids],
        'with D in the list before it replaced C',
      );
      assert.ok(
        !meanwhile.ids.some((id) => id % 3n === 2n),
        'D issues nothing while the marks name C',
      );

      await rejectsWith(abd.join(), 'INVALID_ARGUMENT', LEFT_OUT);
      const replace =
        /database 2 \(.*\) is not in the set .* record, whose database 2 is .*: .* --replace 2"/;
      await rejectsWith(abd.verify(), 'CONFIG_INVALID', replace);
      await rejectsWith(
        abd.join({ replace: 1 }),
        'INVALID_ARGUMENT',
        /--replace 1: the list must be the recorded set/,
      );
      // A replacement must be empty: its rows' IDs would be unknown.
      const notEmpty = /--replace 2: .* must be an empty database .*; it holds tag rows/;
      await rejectsWith(abd.join({ replace: 2 }), 'INVALID_ARGUMENT', notEmpty);
      await pool.clearRows(D);
      await abd.join({ replace: 2 });
      await abd.verify();
      const replaced = await draw(abd, 600);
      const fromD = replaced.ids.filter((id) => id % 3n === 2n);
      assert.ok(
        fromD.length > 0 && fromD.every((id) => id > maxOf(fromC)),
        'D issues above every ID C issued',
      );
      assertNoRepeat(
        [...together.ids, ...alone.ids, ...meanwhile.ids, ...replaced.ids],
        'across the replacement',
      );

      // A node still running with the old list: C's ranges are refused once past the marks it
      // knows, and what it issued below them is below D's IDs.
      const zombie = await draw(abc, 600);
      const everything = [
        ...together.ids,
        ...alone.ids,
        ...meanwhile.ids,
        ...replaced.ids,
        ...zombie.ids,
      ];
      assertNoRepeat(everything, 'with a node still using the lost database');
      await rejectsWith(
        abc.verify(),
        'CONFIG_INVALID',
        /database 2 \(.*\) is not in the set its databases record/,
      );
    });

    it('refuses a set whose members are not recorded until db init', async (t) => {
      const pool = await create();
      t.after(() => pool.dispose());
      const abc = await pool.open([A, B, C]);
      await abc.init();
      await abc.createTag({ tag: 'orders', step: 10 });
      const unrecorded =
        /no database records the set's members .*: run "idmint db init --stores .*" once/;
      await rejectsWith(abc.verify(), 'CONFIG_INVALID', unrecorded);
      assert.deepEqual(
        (await abc.join()).tags.map((r) => r.action),
        ['unchanged'],
      );
      await abc.verify();
      // Every mark at least its row's max_id: what was issued before marks were kept is bounded.
      for (const [index, db] of [A, B, C].entries()) {
        const row = await (await pool.member(db, index, 3)).getTag('orders');
        for (const holder of [A, B, C]) {
          const store = await pool.member(holder, [A, B, C].indexOf(holder), 3);
          const [entry] = await store.readSetEntries([highKey(index, 'orders')]);
          const high = entry === undefined ? -1n : parseHigh(entry, 'test', 'high').high;
          assert.ok(high >= (row?.maxId as bigint), `database ${holder}'s mark for ${index}`);
        }
      }
    });
  });
}

await describeWithServices(
  'a database alone serves up to its high-water mark, then stops (SQLite files)',
  [],
  () => {
    it('stops at the mark the others keep, starts again once one is back', async (t) => {
      const pool = sqlitePool();
      t.after(() => pool.dispose());
      const set = await pool.open([A, B, C]);
      await set.join();
      await set.createTag({ tag: 'orders', step: 1 });
      // One range from each: every mark raised while all answer.
      for (let i = 0; i < 3; i++) await set.allocate('orders');
      pool.down(A);
      pool.down(B);
      let last = 0n;
      let refused: unknown;
      for (let i = 0; i < 5000 && refused === undefined; i++) {
        try {
          const range = await set.allocate('orders');
          assert.equal(range.start % 3n, 2n);
          last = range.end;
        } catch (error) {
          refused = error;
        }
      }
      const stopped = new RegExp(
        'database 2 allocated a range past its high-water mark, and the mark could not be ' +
          'raised on any',
      );
      await rejectsWith(Promise.reject(refused), 'STORE_UNAVAILABLE', stopped);
      pool.up(A);
      const [mark] = await (await pool.member(A, 0, 3)).readSetEntries([highKey(2, 'orders')]);
      const high = parseHigh(mark!, 'test', 'high').high;
      assert.ok(
        last <= high,
        `every range C handed out (up to ${last}) is below the mark A keeps (${high})`,
      );
      assert.ok(last > 1000n, `C served on alone for a while (up to ${last})`);
      pool.up(B);
      await new Promise((resolve) => setTimeout(resolve, 500)); // the backoffs end
      assert.ok(
        (await set.allocate('orders')).end > 0n,
        'allocates again once the others are back',
      );
    });

    it('a node alone with its database serves up to the mark there', async (t) => {
      const pool = sqlitePool();
      t.after(() => pool.dispose());
      const first = await pool.open([A, B, C]);
      await first.join();
      await first.createTag({ tag: 'orders', step: 1 });
      await first.createTag({ tag: 'fresh', step: 1 });
      for (let i = 0; i < 3; i++) await first.allocate('orders'); // marks for orders only
      pool.down(A);
      pool.down(B);
      const restarted = await pool.open([A, B, C]);
      const range = await restarted.allocate('orders');
      assert.equal(range.start % 3n, 2n, 'served from C, under the mark C keeps of itself');
      await rejectsWith(
        restarted.allocate('fresh'),
        'STORE_UNAVAILABLE',
        /database 2 allocated a range past its/,
      );
    });

    it('a raise for the lost database loses to --replace moving the marks', async (t) => {
      const pool = sqlitePool();
      t.after(() => pool.dispose());
      const abc = await pool.open([A, B, C]);
      await abc.join();
      await abc.createTag({ tag: 'orders', step: 10 });
      const before = await draw(abc, 60);
      // A node with the old list asks C for a range far past C's marks: its raise reads A's and B's
      // marks, and its writes are held there.
      const old = await pool.open([A, B, C]);
      const [toA, toB] = pool.wrappers as [FaultySegmentStore, FaultySegmentStore];
      const releaseA = toA.hold(['writeSetEntry']);
      const releaseB = toB.hold(['writeSetEntry']);
      // Two look-ups turn the old node's round to C, so its next allocation asks C first.
      await old.getTag('orders');
      await old.getTag('orders');
      const pending = old.allocate('orders', 100_000);
      const held = () => toA.calls.writeSetEntry > 0 && toB.calls.writeSetEntry > 0;
      while (!held()) await new Promise((resolve) => setTimeout(resolve, 1));
      // Meanwhile C is declared lost, and D replaces it.
      const abd = await pool.open([A, B, D]);
      await abd.join({ replace: 2 });
      releaseA();
      releaseB();
      // The held writes lose their compare-and-set, and the marks now name D: C's range is skipped
      // (the set moves on to A), never used.
      const range = await pending;
      assert.notEqual(range.start % 3n, 2n, `C's range was used: [${range.start}, ${range.end})`);
      const c = await pool.member(C, 2, 3);
      const cMaxId = (await c.getTag('orders'))?.maxId as bigint;
      for (const holder of [A, B]) {
        const [entry] = await (await pool.member(holder, holder, 3)).readSetEntries([
          highKey(2, 'orders'),
        ]);
        const mark = parseHigh(entry!, 'test', 'high');
        assert.ok(
          mark.high < cMaxId,
          `the mark on database ${holder} was not raised past C's skipped range`,
        );
      }
      const d = await pool.member(D, 2, 3);
      const after = await draw(abd, 300);
      assertNoRepeat([...before.ids, ...after.ids], 'across the replacement');
      assert.ok(((await d.getTag('orders'))?.maxId as bigint) > maxOf(before.ids));
    });
  },
);
