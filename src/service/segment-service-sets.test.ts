// SegmentService over a set of databases (src/stores/multi/): ranges of stride N, each class of IDs
// on its own, failover, and a shutdown that gives each class's tail back to its own database.
// Every database is a real SQLite file opened with its residue class; faults are injected around
// it (FaultySegmentStore), never in place of it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, describe, it } from 'node:test';
import { FaultySegmentStore } from '../../test/support/faulty-segment-store.ts';
import { rejectsWith } from '../../test/support/segment-store-suite.ts';
import { ManualClock } from '../clocks/manual-clock.ts';
import type { SegmentRange, SegmentStore } from '../ports/segment-store.ts';
import { MultiSegmentStore, type SetMemberStore } from '../stores/multi/multi-segment-store.ts';
import { SqliteSegmentStore } from '../stores/sqlite/sqlite-segment-store.ts';
import { SegmentService, type SegmentServiceOptions } from './segment-service.ts';
import { MAX_SEGMENT_ID } from '../core/segment-limits.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const directory = mkdtempSync(join(tmpdir(), 'idmint-segment-sets-'));
let files = 0;
after(() => rmSync(directory, { recursive: true, force: true }));

/**
 * A set of `n` real SQLite databases, each behind a fault injector, sharing `clock` for backoffs.
 */
async function setOf(n: number, clock: ManualClock, options: { backoffMs?: number } = {}) {
  const paths = Array.from({ length: n }, () => join(directory, `${++files}.db`));
  const members = paths.map(
    (path, offset) =>
      new FaultySegmentStore(new SqliteSegmentStore({ path, residue: { offset, increment: n } })),
  );
  const store = new MultiSegmentStore({
    databases: members.map((member, index) => ({
      store: member as FaultySegmentStore & SetMemberStore,
      name: `db${index}`,
    })),
    now: () => clock.now(),
    backoffMs: options.backoffMs ?? 1000,
  });
  await store.init();
  /** Sets a database's max_id for a tag directly, as an operator (or a restored backup) would. */
  const setMaxId = (index: number, tag: string, maxId: bigint) => {
    const db = new DatabaseSync(paths[index] as string);
    db.prepare('UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ?').run(maxId, tag);
    db.close();
  };
  return { store, members, setMaxId };
}

async function serviceOn(
  store: SegmentStore,
  clock: ManualClock,
  options: Partial<SegmentServiceOptions> = {},
) {
  const service = new SegmentService({
    store,
    clock,
    tagRefreshMs: 0,
    retryAfterMs: 100,
    ...options,
  });
  await service.start();
  return service;
}

async function drawMany(service: SegmentService, count: number, tag = 'orders'): Promise<bigint[]> {
  const ids: bigint[] = [];
  for (let i = 0; i < count; i++) ids.push(service.nextSync(tag) ?? (await service.next(tag)));
  return ids;
}

/** IDs grouped by class mod n, in the order they were issued. */
function byClass(ids: readonly bigint[], n: number): bigint[][] {
  const classes: bigint[][] = Array.from({ length: n }, () => []);
  for (const id of ids) classes[Number(id % BigInt(n))]?.push(id);
  return classes;
}

function assertIncreasing(ids: readonly bigint[], what: string): void {
  for (let i = 1; i < ids.length; i++)
    assert.ok((ids[i] as bigint) > (ids[i - 1] as bigint), `${what}: ${ids[i - 1]} then ${ids[i]}`);
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('SegmentService over a set of databases', () => {
  it('issues from every database, N apart, each class increasing, distinct', async () => {
    const clock = new ManualClock(T0);
    const { store } = await setOf(3, clock);
    await store.createTag({ tag: 'orders', step: 10 });
    const service = await serviceOn(store, clock, { step: { maxStep: 10 } });
    const single = await drawMany(service, 95);
    const batch = await service.nextBatch('orders', 95);
    const ids = [...single, ...batch];
    assert.equal(new Set(ids).size, ids.length, 'an ID was issued twice');
    const classes = byClass(ids, 3);
    for (const [r, list] of classes.entries()) {
      assert.ok(list.length >= 20, `class ${r} served ${list.length} IDs: every database is used`);
      assertIncreasing(list, `class ${r}`);
    }
    // Within one range the IDs are 3 apart: the first ten IDs are one range of one database.
    const first = single.slice(0, 10);
    assert.deepEqual(
      first.map((id, i) => id - (first[0] as bigint) - BigInt(3 * i)),
      Array(10).fill(0n),
    );
    await service.close();
  });

  it('takes a range of another class below IDs loaded; heals its own', async () => {
    const clock = new ManualClock(T0);
    const { store, members, setMaxId } = await setOf(2, clock);
    await store.createTag({ tag: 'orders', step: 10 });
    setMaxId(0, 'orders', 10_000n); // database 0 far ahead of database 1
    const service = await serviceOn(store, clock, { step: { maxStep: 10 }, prefetchThreshold: 1 });
    const ids = await drawMany(service, 40);
    const [even, odd] = byClass(ids, 2) as [bigint[], bigint[]];
    assert.ok(
      (even[0] as bigint) >= 10_000n && (odd[0] as bigint) < 100n,
      `both databases served: ${ids.join(' ')}`,
    );
    // A range of class 1 from below class 0's ranges was taken: the order is per class.
    assert.ok(ids.some((id, i) => i > 0 && id < (ids[i - 1] as bigint)));
    // Database 1 moved back (a restored backup, unfenced): its next range would repeat its own
    // class; the node raises database 1's row past its class's IDs (and only that row) and serves.
    setMaxId(1, 'orders', 1n);
    members[0]!.mode = 'fail';
    const later = await drawMany(service, 40);
    assert.equal(
      new Set([...ids, ...later]).size,
      ids.length + later.length,
      'an ID was issued twice',
    );
    const oddBefore = odd.reduce((a, b) => (a > b ? a : b));
    const above = later.every((id) => id % 2n === 1n && id > oddBefore);
    assert.ok(above, `database 1 serves above its IDs before: ${later.join(' ')}`);
    assert.equal(service.stats().tags[0]?.heals, 1);
    await service.close();
  });

  it('refuses a range whose stride differs from the ranges before it', async () => {
    const clock = new ManualClock(T0);
    const path = join(directory, `${++files}.db`);
    const real = new SqliteSegmentStore({ path, residue: { offset: 0, increment: 2 } });
    await real.init();
    await real.createTag({ tag: 'orders', step: 10 });
    let stride = 2;
    // The real store's range, re-labelled as a store of another set size would return it.
    const store: SegmentStore = {
      backend: real.backend,
      init: () => real.init(),
      allocate: async (tag: string, step?: number): Promise<SegmentRange> => {
        const range = await real.allocate(tag, step);
        return { ...range, stride, start: range.end - BigInt(range.step * stride) };
      },
      release: (tag, from, to) => real.release(tag, from, to),
      history: () => real.history(),
      fence: (request) => real.fence(request),
      raise: (tag, atLeast) => real.raise(tag, atLeast),
      listTags: () => real.listTags(),
      listTagChanges: (since) => real.listTagChanges(since),
      listTagPage: (after, limit) => real.listTagPage(after, limit),
      getTag: (tag) => real.getTag(tag),
      createTag: (tag) => real.createTag(tag),
      updateTag: (tag, update) => real.updateTag(tag, update),
      close: async () => undefined,
    };
    const service = await serviceOn(store, clock, { step: { maxStep: 10 }, prefetchThreshold: 1 });
    assert.equal((await drawMany(service, 10)).length, 10);
    stride = 3;
    await rejectsWith(
      drawMany(service, 10),
      'STORE_UNAVAILABLE',
      /whose stride 3 is not the stride 2 of the ranges before it/,
    );
    await service.close();
    await real.close();
  });

  it('serves past a database that is down, waiting out its backoff', async () => {
    const clock = new ManualClock(T0);
    const { store, members } = await setOf(3, clock, { backoffMs: 5000 });
    await store.createTag({ tag: 'orders', step: 10 });
    const service = await serviceOn(store, clock, { step: { maxStep: 10 } });
    await drawMany(service, 30);
    const down = members[1] as FaultySegmentStore;
    down.mode = 'fail';
    const before = down.calls.allocate;
    const during = await drawMany(service, 300); // 30 ranges: the service never stops
    assert.equal(
      down.calls.allocate - before,
      1,
      'the failed database is tried once, then skipped while it backs off',
    );
    const afterFailure = during.slice(during.findIndex((id) => id % 3n !== 1n));
    assert.ok(byClass(afterFailure, 3)[1]!.length <= 20, 'class 1 only from what was buffered');
    assert.equal(store.stats()[1]?.up, false);
    down.mode = 'pass';
    clock.advance(5000);
    const back = await drawMany(service, 100);
    assert.ok(byClass(back, 3)[1]!.length >= 10, 'database 1 serves again after its backoff');
    assert.equal(store.stats()[1]?.up, true);
    await service.close();
  });

  it('every database down: fails fast naming each, retries, recovers', async () => {
    const clock = new ManualClock(T0);
    const { store, members } = await setOf(2, clock, { backoffMs: 1000 });
    await store.createTag({ tag: 'orders', step: 10 });
    const service = await serviceOn(store, clock, {
      step: { maxStep: 10 },
      prefetchThreshold: 1,
      retryAfterMs: 100,
    });
    await drawMany(service, 10);
    for (const member of members) member.mode = 'fail';
    // Both named, in the round-robin order of the moment.
    const db0 = 'database 0 \\(db0\\): injected failure: allocate';
    const db1 = 'database 1 \\(db1\\): injected failure: allocate';
    await rejectsWith(
      service.next('orders'),
      'STORE_UNAVAILABLE',
      new RegExp(`${db0}; ${db1}|${db1}; ${db0}`),
    );
    const calls = () => members.reduce((sum, member) => sum + member.calls.allocate, 0);
    const tried = calls();
    await rejectsWith(service.next('orders'), 'STORE_UNAVAILABLE');
    assert.equal(calls(), tried, 'within retryAfterMs nothing is tried');
    clock.advance(100);
    await rejectsWith(service.next('orders'), 'STORE_UNAVAILABLE', /down, retried in/);
    assert.equal(
      calls(),
      tried + 1,
      'with every database backing off, only the first due is tried',
    );
    members[0]!.mode = 'pass';
    clock.advance(5000); // both backoffs over: the one back serves, whichever is tried first
    assert.equal((await service.next('orders')) % 2n, 0n);
    await service.close();
  });

  it('serves a tag one database lacks from the others', async () => {
    const clock = new ManualClock(T0);
    const { store, members } = await setOf(3, clock);
    members[2]!.mode = 'fail';
    await rejectsWith(
      store.createTag({ tag: 'orders', step: 10 }),
      'STORE_UNAVAILABLE',
      /every database of the set must answer/,
    );
    assert.equal(
      await members[0]!.getTag('orders'),
      undefined,
      'nothing is created unless every database answers',
    );
    members[2]!.mode = 'pass';
    // as if a create had been cut short
    await members[0]!.inner.createTag({ tag: 'orders', step: 10 });
    const service = await serviceOn(store, clock, { step: { maxStep: 10 } });
    const ids = await drawMany(service, 60);
    assert.deepEqual(
      byClass(ids, 3).map((list) => list.length > 0),
      [true, false, false],
    );
    // Completing the create gives the others the tag above the highest max_id.
    await store.createTag({ tag: 'orders', step: 10 });
    const highest = (await members[0]!.getTag('orders'))?.maxId ?? 0n;
    for (const index of [1, 2])
      assert.ok(((await members[index]!.getTag('orders'))?.maxId ?? 0n) >= highest - 10n * 3n);
    await rejectsWith(store.createTag({ tag: 'orders', step: 10 }), 'TAG_EXISTS');
    await service.close();
  });

  it('refuses a start with no room in any database; bad updates whole', async () => {
    const clock = new ManualClock(T0);
    const { store, members } = await setOf(3, clock);
    // Room for one range of 10 below 2^63-1 as one database counts it, not as database 2 of 3 does.
    await rejectsWith(
      store.createTag({ tag: 'top', step: 10, startId: MAX_SEGMENT_ID - 20n }),
      'INVALID_ARGUMENT',
      /startId must leave room/,
    );
    for (const member of members) assert.equal(await member.getTag('top'), undefined);
    await store.createTag({ tag: 'orders', step: 10 });
    await rejectsWith(
      store.updateTag('orders', { step: 0 }),
      'INVALID_ARGUMENT',
      /step must be an integer/,
    );
    assert.equal(
      members.reduce((sum, member) => sum + member.calls.updateTag, 0),
      0,
      'no database was asked',
    );
  });

  it('merges a tag: step, description from the lowest database, highest max_id', async () => {
    const clock = new ManualClock(T0);
    const { store, members } = await setOf(2, clock);
    await store.createTag({ tag: 'orders', step: 10, description: 'zero' });
    // a set-step cut short
    await members[1]!.inner.updateTag('orders', { step: 20, description: 'one' });
    await members[1]!.inner.allocate('orders');
    const highest = (await members[1]!.getTag('orders'))?.maxId;
    for (let round = 0; round < 4; round++) {
      const [listed] = await store.listTags();
      const got = await store.getTag('orders');
      for (const record of [listed, got])
        assert.deepEqual(
          [record?.step, record?.description, record?.maxId],
          [10, 'zero', highest],
          `round ${round}`,
        );
    }
  });

  it('shutdown gives each class its tail back; a restart continues after it', async () => {
    const clock = new ManualClock(T0);
    const { store, members } = await setOf(2, clock);
    await store.createTag({ tag: 'orders', step: 10 });
    const service = await serviceOn(store, clock, { step: { maxStep: 10 } });
    // the first range's class, three IDs; the prefetch loads the other class
    const ids = await drawMany(service, 3);
    await settle();
    const first = ids[0] as bigint;
    const [current, other] = first % 2n === 0n ? [0, 1] : [1, 0];
    const report = await service.close();
    assert.deepEqual(report, { releasedIds: 7 + 10, wastedIds: 0, failedReleases: [] });
    assert.equal(
      (await members[current]!.getTag('orders'))?.maxId,
      (ids[2] as bigint) + 2n,
      'the current remainder went back to its own database',
    );
    const otherRow = await members[other]!.getTag('orders');
    const restarted = await serviceOn(store, clock, { step: { maxStep: 10 } });
    const again = await drawMany(restarted, 20);
    assert.ok(
      again.includes((ids[2] as bigint) + 2n),
      'the next ID of the first class is issued after the restart',
    );
    assert.ok(
      again.includes(otherRow?.maxId as bigint),
      'the other class starts where its given-back range started',
    );
    assert.equal(new Set([...ids, ...again]).size, 23);
    await restarted.close();
  });
});

describe('MultiSegmentStore.join: interleavings with a node still allocating', () => {
  it('reads a row again that moved between its read and its fence', async () => {
    const clock = new ManualClock(T0);
    const paths = [0, 1, 2].map(() => join(directory, `${++files}.db`));
    // The old set: databases 0 and 1 of 2, with a tag in use.
    const oldMembers = paths
      .slice(0, 2)
      .map((path, offset) => new SqliteSegmentStore({ path, residue: { offset, increment: 2 } }));
    const oldSet = new MultiSegmentStore({
      databases: oldMembers.map((store, index) => ({ store, name: `old${index}` })),
      now: () => clock.now(),
    });
    await oldSet.join();
    await oldSet.createTag({ tag: 'orders', step: 10 });
    for (let i = 0; i < 4; i++) await oldSet.allocate('orders');
    // The new set of 3, each database behind a fault injector; database 1's compare-and-sets are
    // held.
    const newMembers = paths.map(
      (path, offset) =>
        new FaultySegmentStore(new SqliteSegmentStore({ path, residue: { offset, increment: 3 } })),
    );
    const newSet = new MultiSegmentStore({
      databases: newMembers.map((store, index) => ({
        store: store as FaultySegmentStore & SetMemberStore,
        name: `new${index}`,
      })),
      now: () => clock.now(),
    });
    const open = (newMembers[1] as FaultySegmentStore).hold(['reassign']);
    const joining = newSet.join();
    while ((newMembers[1] as FaultySegmentStore).calls.reassign === 0)
      await new Promise((resolve) => setTimeout(resolve, 1));
    // Database 0 is fenced by now; database 1 is not yet: an old node still allocates from it.
    await rejectsWith(oldMembers[0]!.allocate('orders'), 'TAG_MISCONFIGURED', /fenced/);
    const late = await oldMembers[1]!.allocate('orders');
    open();
    const report = await joining;
    assert.equal(report.tags[0]?.action, 'reformed');
    assert.ok(
      (report.tags[0]?.maxId as bigint) >= late.end,
      `H ${report.tags[0]?.maxId} is above the range allocated during the join, ` +
        `[${late.start}, ${late.end})`,
    );
    assert.ok(
      (newMembers[1] as FaultySegmentStore).calls.reassign >= 3,
      'the stale fence was retried after reading again',
    );
    for (let i = 0; i < 6; i++) assert.ok((await newSet.allocate('orders')).start >= late.end);
    await rejectsWith(
      oldMembers[1]!.allocate('orders'),
      'TAG_MISCONFIGURED',
      /database 1 of a set of 3/,
    );
    await oldSet.close();
    await newSet.close();
  });
});

describe('MultiSegmentStore: the tag refresh reads with a database down', () => {
  it('a database down keeps its change cursor and is read when back', async () => {
    const clock = new ManualClock(T0);
    const { store, members } = await setOf(2, clock, { backoffMs: 1 });
    const { cursor } = await store.listTagChanges(undefined);
    members[1]!.mode = 'fail';
    // Created in database 1 only (a create cut short there), while it is unreachable to the set.
    await members[1]!.inner.createTag({ tag: 'late', step: 10 });
    const during = await store.listTagChanges(cursor);
    assert.deepEqual(during.records, []);
    members[1]!.mode = 'pass';
    clock.advance(10);
    const after = await store.listTagChanges(during.cursor);
    assert.deepEqual(
      after.records.map((record) => record.tag),
      ['late'],
      'read from its old cursor, not from a new one',
    );
    members[0]!.mode = 'fail';
    members[1]!.mode = 'fail';
    clock.advance(10);
    await rejectsWith(
      store.listTagChanges(after.cursor),
      'STORE_UNAVAILABLE',
      /no database of the set answered/,
    );
    await rejectsWith(
      store.listTagChanges('[null]'),
      'INVALID_ARGUMENT',
      /a list of 2 database cursors/,
    );
    await store.close();
  });

  it('pages every tag from the databases that answer, and fails only when none does', async () => {
    const clock = new ManualClock(T0);
    const { store, members } = await setOf(2, clock, { backoffMs: 1 });
    for (let i = 0; i < 7; i++) await store.createTag({ tag: `t${i}`, step: 10 });
    const readAll = async () => {
      const tags = new Set<string>();
      let after: string | undefined;
      do {
        const page = await store.listTagPage(after, 3);
        for (const record of page.records) tags.add(record.tag);
        after = page.next;
      } while (after !== undefined);
      return [...tags].sort();
    };
    const all = Array.from({ length: 7 }, (_, i) => `t${i}`);
    assert.deepEqual(await readAll(), all);
    members[0]!.mode = 'fail';
    assert.deepEqual(await readAll(), all, 'database 0 down: its tags come from database 1');
    members[0]!.mode = 'pass';
    members[1]!.mode = 'fail';
    clock.advance(10);
    assert.deepEqual(await readAll(), all, 'database 1 down: from database 0');
    members[0]!.mode = 'fail';
    clock.advance(10);
    await rejectsWith(readAll(), 'STORE_UNAVAILABLE', /no database of the set answered/);
    await rejectsWith(
      store.listTagPage('[5, null, false]', 3),
      'INVALID_ARGUMENT',
      /tag page cursor/,
    );
    await store.close();
  });
});
