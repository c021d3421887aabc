import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, describe, it } from 'node:test';
import { turnsDuring } from '../../test/support/event-loop.ts';
import { FaultySegmentStore } from '../../test/support/faulty-segment-store.ts';
import { rejectsWith } from '../../test/support/segment-store-suite.ts';
import { ManualClock } from '../clocks/manual-clock.ts';
import type { NewTag } from '../ports/segment-store.ts';
import { SqliteSegmentStore } from '../stores/sqlite/sqlite-segment-store.ts';
import { MAX_SEGMENT_ID, TAG_PAGE_SIZE } from '../core/segment-limits.ts';
import {
  SegmentService,
  type SegmentEvent,
  type SegmentServiceOptions,
} from './segment-service.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const MINUTE = 60_000;

// Every test gets its own real SQLite database (a file, so the test can also reach it the way an
// operator would, e.g. to DELETE a tag); the directory goes when the file's tests are done.
const databases = mkdtempSync(join(tmpdir(), 'idmint-segment-service-'));
let databaseCount = 0;
after(() => rmSync(databases, { recursive: true, force: true }));

/**
 * A real SQLite store whose deleteTag is an operator's DELETE, synchronous, straight in the file.
 */
async function sqliteStore() {
  const path = join(databases, `${++databaseCount}.db`);
  const store = Object.assign(new SqliteSegmentStore({ path }), {
    /** Removes a tag's row directly, as an operator's DELETE would. */
    deleteTag(tag: string): void {
      const db = new DatabaseSync(path);
      db.prepare('DELETE FROM leaf_alloc WHERE biz_tag = ?').run(tag);
      db.close();
    },
    /** Dates every row's last write a year back, as rows nobody has written for long. */
    age(): void {
      const db = new DatabaseSync(path);
      db.exec("UPDATE leaf_alloc SET update_time = datetime('now', '-1 year')");
      db.close();
    },
    /**
     * Inserts `count` tags `bulk-0`, `bulk-1`, ... in one transaction, as an operator's script
     * would.
     */
    bulkInsert(count: number): void {
      const db = new DatabaseSync(path);
      db.exec('BEGIN');
      const insert = db.prepare('INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, 10)');
      for (let i = 0; i < count; i++) insert.run(`bulk-${i}`);
      db.exec('COMMIT');
      db.close();
    },
  });
  await store.init();
  return store;
}

/**
 * A service on a real SQLite store behind a fault injector, with a manual clock and no refresh
 * timer.
 */
async function setup(
  options: Partial<SegmentServiceOptions> = {},
  tags: NewTag[] = [{ tag: 'orders', step: 100 }],
) {
  const memory = await sqliteStore();
  for (const tag of tags) await memory.createTag(tag);
  const store = new FaultySegmentStore(memory);
  const clock = new ManualClock(T0);
  const events: SegmentEvent[] = [];
  const service = new SegmentService({
    store,
    clock,
    tagRefreshMs: 0,
    onEvent: (event) => events.push(event),
    ...options,
  });
  await service.start();
  return { memory, store, clock, service, events };
}

/** One ID the way a server route takes it: from memory when buffered, else awaited. */
async function draw(service: SegmentService, tag = 'orders'): Promise<bigint> {
  return service.nextSync(tag) ?? (await service.next(tag));
}

async function drawMany(service: SegmentService, count: number, tag = 'orders'): Promise<bigint[]> {
  const ids: bigint[] = [];
  for (let i = 0; i < count; i++) ids.push(await draw(service, tag));
  return ids;
}

/** Lets loads that have been answered land (their continuations run). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => BigInt(from + i));

describe('SegmentService: ranges and the double buffer', () => {
  it("serves 1, 2, 3, ... from the first range, of the tag's stored step", async () => {
    const { service, store } = await setup();
    assert.equal(
      service.nextSync('orders'),
      undefined,
      'nothing is buffered before the first load',
    );
    assert.equal(store.calls.allocate, 1, 'the first nextSync starts the load');
    assert.equal(await service.next('orders'), 1n);
    assert.equal(service.nextSync('orders'), 2n);
    assert.equal(typeof service.nextSync('orders'), 'bigint');
    assert.deepEqual(store.requestedSteps, [undefined]);
    assert.equal(store.calls.allocate, 1);
  });

  it('loads the next range in the background past 10% of the current one', async () => {
    const { service, store } = await setup();
    assert.deepEqual(await drawMany(service, 10), range(1, 10));
    assert.equal(store.calls.allocate, 1, 'no prefetch at exactly 10%');
    assert.equal(service.nextSync('orders'), 11n);
    assert.equal(store.calls.allocate, 2, 'prefetch once past 10%');
    await settle();
    // Both ranges buffered: the rest of the first and all of the second come without waiting.
    const ids: (bigint | undefined)[] = [];
    for (let i = 0; i < 189; i++) ids.push(service.nextSync('orders'));
    assert.deepEqual(ids, range(12, 200));
    // As in Leaf, the first prefetch takes the stored step too; the dynamic step starts with the
    // third range (the second lasted 0 ms on the manual clock: doubled).
    assert.deepEqual(
      store.requestedSteps,
      [undefined, undefined, 200],
      'the second range prefetched the third once 10% of it was issued',
    );
  });

  it('with prefetchThreshold 1 loads only when a range is used up (single buffer)', async () => {
    const { service, store } = await setup({ prefetchThreshold: 1 });
    await drawMany(service, 100);
    assert.equal(store.calls.allocate, 1);
    assert.equal(service.nextSync('orders'), undefined);
    assert.equal(store.calls.allocate, 2);
  });

  it('shares one load in flight among all callers', async () => {
    const { service, store } = await setup();
    const open = store.hold();
    const pending = Array.from({ length: 50 }, () => service.next('orders'));
    assert.equal(store.calls.allocate, 1);
    open();
    const ids = await Promise.all(pending);
    assert.deepEqual(
      [...ids].sort((a, b) => (a < b ? -1 : 1)),
      range(1, 50),
    );
    assert.equal(store.calls.allocate, 2, 'one initial load, one prefetch: not one per caller');
  });

  it('callers await a slow load instead of failing', async () => {
    const { service, store } = await setup({ step: { maxStep: 10 }, waitTimeoutMs: 30_000 }, [
      { tag: 'orders', step: 10 },
    ]);
    assert.equal(await draw(service), 1n);
    const open = store.hold();
    assert.deepEqual(await drawMany(service, 9), range(2, 10)); // the prefetch started and is held
    assert.equal(service.nextSync('orders'), undefined);
    let settled = false;
    const waiting = service.next('orders').finally(() => {
      settled = true;
    });
    await sleep(50);
    assert.equal(settled, false, 'still waiting for the load, not failed');
    open();
    assert.equal(await waiting, 11n);
  });

  it('a slow load is SEGMENTS_NOT_READY; it lands later and serves', async () => {
    const { service, store } = await setup({ waitTimeoutMs: 30 });
    const open = store.hold();
    await rejectsWith(
      service.next('orders'),
      'SEGMENTS_NOT_READY',
      /did not load within 30 ms; retry/,
    );
    open();
    await settle();
    assert.equal(await service.next('orders'), 1n);
    assert.equal(store.calls.allocate, 1, 'the slow load was not abandoned or repeated');
  });

  it('serves many concurrent callers with a small step', async () => {
    const { service, store } = await setup({ step: { maxStep: 5 } }, [{ tag: 'orders', step: 5 }]);
    store.delayMs = 1;
    const ids = await Promise.all(Array.from({ length: 500 }, () => service.next('orders')));
    assert.equal(new Set(ids).size, 500);
    assert.deepEqual(
      [...ids].sort((a, b) => (a < b ? -1 : 1)),
      range(1, 500),
    );
  });

  it('grows, keeps and shrinks the step with how long each range lasted', async () => {
    const { service, store, clock, memory } = await setup({ step: { maxStep: 800 } });
    await draw(service);
    // Advance the clock, then draw until the next load starts: it sees the range lasted `ms`.
    const loadAfter = async (ms: number) => {
      clock.advance(ms);
      const before = store.calls.allocate;
      while (store.calls.allocate === before) await draw(service);
      await settle();
    };
    for (const ms of [
      MINUTE,
      MINUTE,
      MINUTE,
      MINUTE,
      20 * MINUTE,
      40 * MINUTE,
      40 * MINUTE,
      40 * MINUTE,
      40 * MINUTE,
    ])
      await loadAfter(ms);
    // Leaf's rule: the first two loads take the stored step (100); then x2 while a range lasts
    // under 15 min, up to 800 (1,600 would pass maxStep: it stays); kept from 15 to 30 min;
    // halved from 30 min on, but 50 would be below the stored 100: it stays.
    assert.deepEqual(store.requestedSteps, [
      undefined,
      undefined,
      200,
      400,
      800,
      800,
      400,
      200,
      100,
      100,
    ]);

    // An operator raises the tag's step. As in Leaf, the running buffer does not jump to it: it
    // becomes the floor of shrinking from the next allocation on, and a restart starts from it.
    await memory.updateTag('orders', { step: 1000 });
    await service.refreshTags();
    await loadAfter(40 * MINUTE);
    assert.equal(store.requestedSteps.at(-1), 100);
    await loadAfter(MINUTE);
    assert.equal(store.requestedSteps.at(-1), 200);
    const stats = service.stats().tags[0];
    assert.equal(stats?.step, 200);
    assert.equal(stats?.tagStep, 1000);
    await service.close();
    const restarted = new SegmentService({ store, clock, tagRefreshMs: 0, step: { maxStep: 800 } });
    await restarted.start();
    const before = store.requestedSteps.length;
    await drawMany(restarted, 101);
    await settle();
    assert.deepEqual(store.requestedSteps.slice(before), [undefined, undefined]);
    assert.equal(restarted.stats().tags[0]?.step, 1000, 'a restart starts from the stored step');
  });

  it('nextSync never throws or waits: bad and unknown tags are undefined', async () => {
    const { service, store } = await setup();
    assert.equal(service.nextSync('nope'), undefined);
    assert.equal(service.nextSync('bad tag!'), undefined);
    assert.equal(store.calls.getTag, 0);
  });
});

describe('SegmentService: batches', () => {
  it('serves a batch larger than a range, spanning several ranges', async () => {
    const { service, store } = await setup({ step: { maxStep: 10 } }, [
      { tag: 'orders', step: 10 },
    ]);
    assert.deepEqual(await service.nextBatch('orders', 95), range(1, 95));
    assert.ok(store.calls.allocate >= 10);
    for (const bad of [0, 1.5, -1, 10_000_001, Number.NaN])
      await rejectsWith(
        service.nextBatch('orders', bad),
        'INVALID_ARGUMENT',
        /count must be an integer from 1 to 10000000/,
      );
  });

  it('nextBatchSync takes a batch only when all of it is buffered', async () => {
    const { service } = await setup();
    assert.equal(service.nextBatchSync('orders', 1), undefined);
    await service.next('orders');
    await settle();
    assert.deepEqual(service.nextBatchSync('orders', 3), [2n, 3n, 4n]);
    const buffered = service.stats().tags[0]?.remaining ?? 0;
    assert.equal(service.nextBatchSync('orders', buffered + 1), undefined);
    assert.equal(service.nextSync('orders'), 5n, 'a refused batch takes nothing');
    assert.equal(service.nextBatchSync('orders', 2.5), undefined);
  });

  it('a batch that fails part-way loses the IDs it took: they are never issued again', async () => {
    const { service, store, clock } = await setup({ step: { maxStep: 10 } }, [
      { tag: 'orders', step: 10 },
    ]);
    assert.equal(await service.next('orders'), 1n);
    await settle();
    store.mode = 'fail';
    await rejectsWith(service.nextBatch('orders', 50), 'STORE_UNAVAILABLE');
    const loadedBefore = store.committed.reduce((end, r) => (r.end > end ? r.end : end), 0n);
    store.mode = 'pass';
    clock.advance(1000);
    assert.equal(
      await service.next('orders'),
      loadedBefore,
      'the next ID comes from a fresh range',
    );
  });
});

describe('SegmentService: outages', () => {
  it('serves through an outage, then fails fast, then recovers by itself', async () => {
    const { service, store, clock } = await setup({ step: { maxStep: 100 }, retryAfterMs: 1000 });
    assert.equal(await draw(service), 1n);
    await drawMany(service, 10);
    await settle(); // [101, 201) is buffered as the next range
    store.mode = 'fail';
    const served: (bigint | undefined)[] = [];
    for (let i = 0; i < 189; i++) served.push(service.nextSync('orders'));
    assert.deepEqual(served, range(12, 200), 'every buffered ID is served while the store is down');
    await settle();
    assert.equal(store.calls.allocate, 3, 'one failed prefetch, then no retry before retryAfterMs');

    await rejectsWith(service.next('orders'), 'STORE_UNAVAILABLE', /injected failure/);
    const burst = await Promise.allSettled(
      Array.from({ length: 100 }, () => service.next('orders')),
    );
    assert.ok(
      burst.every(
        (result) =>
          result.status === 'rejected' &&
          (result.reason as { code?: string }).code === 'STORE_UNAVAILABLE',
      ),
    );
    assert.equal(store.calls.allocate, 3, 'failing fast: no store call per request');

    store.mode = 'pass';
    await rejectsWith(service.next('orders'), 'STORE_UNAVAILABLE', undefined);
    clock.advance(1000);
    assert.equal(await service.next('orders'), 201n, 'recovered with no operator action');
    assert.equal(service.stats().tags[0]?.lastError, null);
  });

  it('retries a failed prefetch while IDs are still buffered', async () => {
    const { service, store, clock } = await setup({ step: { maxStep: 100 }, retryAfterMs: 500 });
    await draw(service);
    store.mode = 'fail';
    await drawMany(service, 10); // ID 11 starts the prefetch, which fails
    await settle();
    assert.match(service.stats().tags[0]?.lastError ?? '', /injected failure/);
    store.mode = 'pass';
    clock.advance(500);
    assert.equal(service.nextSync('orders'), 12n);
    assert.equal(store.calls.allocate, 3, 'the next call after the retry delay retried the load');
    await settle();
    const ids: (bigint | undefined)[] = [];
    for (let i = 0; i < 188; i++) ids.push(service.nextSync('orders'));
    assert.deepEqual(ids, range(13, 200));
  });

  it('skips a range whose allocation outcome is unknown', async () => {
    const { service, store, clock } = await setup({
      step: { maxStep: 100 },
      prefetchThreshold: 1,
      loadTimeoutMs: 40,
      retryAfterMs: 100,
    });
    await drawMany(service, 100);
    store.mode = 'lose-reply';
    await rejectsWith(
      service.next('orders'),
      'STORE_UNAVAILABLE',
      /outcome is unknown, so that range is skipped/,
    );
    assert.deepEqual(
      store.committed.map((r) => [r.start, r.end]).at(-1),
      [101n, 201n],
      'the store did commit the lost range',
    );
    store.mode = 'pass';
    clock.advance(100);
    assert.equal(await service.next('orders'), 201n);
    assert.equal(service.stats().tags[0]?.abandonedLoads, 1);
  });

  it('a hung store costs one store call however many requests wait, each bounded', async () => {
    const { service, store } = await setup({ loadTimeoutMs: 40 });
    store.mode = 'hang';
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, () => service.next('orders')),
    );
    assert.ok(
      results.every(
        (result) =>
          result.status === 'rejected' &&
          (result.reason as { code?: string }).code === 'STORE_UNAVAILABLE',
      ),
    );
    assert.equal(store.calls.allocate, 1);
  });

  it('heals a store gone back below IDs loaded; repeats none', async () => {
    const { service, memory, store, events } = await setup({
      step: { maxStep: 100 },
      prefetchThreshold: 1,
    });
    const before = await drawMany(service, 100);
    // as if a backup were restored unfenced
    assert.equal(await memory.release('orders', 1n, 101n), true);
    // The very next request is served (no retryAfterMs wait), from above every ID loaded before.
    const after = await drawMany(service, 150);
    assert.equal(after[0], 101n);
    assert.equal(new Set([...before, ...after]).size, 250, 'an ID was issued twice');
    assert.deepEqual(store.raises, [101n]);
    const heals = events.filter((event) => event.type === 'heal');
    assert.deepEqual(
      heals.map((event) => [event.range.start, event.range.end, event.highest]),
      [[1n, 101n, 101n]],
    );
    assert.equal(service.stats().tags[0]?.heals, 1);
    assert.equal(service.stats().tags[0]?.loadFailures, 0);
  });

  it('refuses a store that stays below IDs loaded after being raised', async () => {
    const { service, memory, store } = await setup({
      step: { maxStep: 100 },
      prefetchThreshold: 1,
    });
    await drawMany(service, 100);
    // A store whose raises do not stick (it goes back again each time: not settling).
    store.raise = async () => {
      await memory.release('orders', 1n, (await memory.getTag('orders'))?.maxId ?? 0n);
      return true;
    };
    assert.equal(await memory.release('orders', 1n, 101n), true);
    const allocations = store.calls.allocate;
    await rejectsWith(
      service.next('orders'),
      'STORE_UNAVAILABLE',
      /starts below IDs already loaded \(101\); was max_id moved back\?/,
    );
    assert.equal(
      store.calls.allocate - allocations,
      4,
      'one allocation and three more after raising',
    );
    assert.equal(service.stats().tags[0]?.heals, 3);
  });

  it('passes ID_SPACE_EXHAUSTED and TAG_NOT_FOUND from the store through', async () => {
    const { service, memory } = await setup({ step: { maxStep: 5 } }, [
      { tag: 'top', step: 5, startId: MAX_SEGMENT_ID - 10n },
      { tag: 'gone', step: 5 },
    ]);
    assert.deepEqual(
      await drawMany(service, 10, 'top'),
      range(0, 9).map((i) => MAX_SEGMENT_ID - 10n + i),
    );
    await rejectsWith(service.next('top'), 'ID_SPACE_EXHAUSTED');
    memory.deleteTag('gone');
    await rejectsWith(service.next('gone'), 'TAG_NOT_FOUND');
  });
});

describe('SegmentService: tags', () => {
  it('loads the tag list at start-up, follows it on full reads', async () => {
    const { service, memory } = await setup({ tagFullRefreshMs: 0 }, [
      { tag: 'a', step: 10 },
      { tag: 'b', step: 10 },
    ]);
    const cached = () => service.stats().tags.map((t) => t.tag);
    assert.deepEqual(cached(), ['a', 'b']);
    await memory.createTag({ tag: 'c', step: 10 });
    await service.refreshTags();
    assert.deepEqual(cached(), ['a', 'b', 'c']);
    await draw(service, 'b');
    memory.deleteTag('b');
    await service.refreshTags();
    assert.deepEqual(cached(), ['a', 'c']);
    assert.equal(service.nextSync('b'), undefined, 'a deleted tag is no longer served from memory');
    memory.deleteTag('a');
    memory.deleteTag('c');
    await service.refreshTags();
    assert.deepEqual(cached(), []);
    assert.equal(service.stats().tagRefreshes, 4);
    assert.equal(service.stats().fullTagRefreshes, 4);
  });

  it('between full reads reads only changed tags; deletions wait', async () => {
    const tags = Array.from({ length: 300 }, (_, i) => ({ tag: `t${i}`, step: 10 }));
    const { service, memory, store, clock, events } = await setup(
      { tagFullRefreshMs: 600_000 },
      tags,
    );
    assert.equal(store.tagRowsRead, 300, 'start-up reads every tag');
    memory.age(); // nothing written for a year: an incremental read finds no row
    await service.refreshTags();
    assert.equal(store.tagRowsRead, 300, 'no row changed, none read');
    await memory.createTag({ tag: 'new', step: 10 });
    await memory.updateTag('t5', { step: 99 });
    await memory.updateTag('t6', { opaque: true });
    memory.deleteTag('t7');
    const pages = store.calls.listTagPage;
    await service.refreshTags();
    assert.equal(store.tagRowsRead - 300, 3, 'only the three rows written since');
    assert.equal(store.calls.listTagPage, pages, 'no full read');
    const listed = new Map(service.stats().tags.map((t) => [t.tag, t]));
    assert.equal(listed.get('new')?.tagStep, 10);
    assert.equal(listed.get('t5')?.tagStep, 99);
    assert.equal(service.isOpaque('t6'), true);
    assert.ok(listed.has('t7'), 'a deleted tag stays listed until a full read');
    assert.deepEqual(
      events.filter((e) => e.type === 'refresh').map((e) => [e.full, e.rows]),
      [
        [true, 300],
        [false, 0],
        [false, 3],
      ],
    );

    clock.advance(600_000);
    await service.refreshTags();
    assert.equal(
      store.calls.listTagPage,
      pages + 1,
      'a full read once tagFullRefreshMs has passed',
    );
    assert.equal(
      service.stats().tags.some((t) => t.tag === 't7'),
      false,
      'the full read drops the deleted tag',
    );
    assert.equal(service.stats().tags.length, 300);
    assert.deepEqual(
      [service.stats().tagRefreshes, service.stats().fullTagRefreshes, service.stats().tagRowsRead],
      [4, 2, 603],
    );
  });

  it('reads every tag a page at a time, yielding between pages', async () => {
    const memory = await sqliteStore();
    const tags = TAG_PAGE_SIZE * 2 + TAG_PAGE_SIZE / 4; // two whole pages and part of a third
    memory.bulkInsert(tags);
    const store = new FaultySegmentStore(memory);
    const service = new SegmentService({
      store,
      clock: new ManualClock(T0),
      tagRefreshMs: 0,
      tagFullRefreshMs: 0,
    });
    const { turns: atStart } = await turnsDuring(() => service.start());
    assert.equal(store.calls.listTagPage, 3, `${tags} tags in pages of ${TAG_PAGE_SIZE}`);
    assert.equal(service.stats().tags.length, tags);
    assert.ok(
      atStart >= 2,
      `other work ran between the pages (${atStart} turns of the event loop)`,
    );
    memory.deleteTag('bulk-7');
    const { turns: later } = await turnsDuring(() => service.refreshTags());
    // Two between the three pages, two more while the idle tags are swept a page's worth at a time.
    assert.ok(later >= 4, `other work ran between the pages and during the sweep (${later} turns)`);
    assert.equal(service.stats().tags.length, tags - 1);
    assert.equal(service.tagStats('bulk-7'), undefined, 'the deleted tag is gone');
    assert.equal(service.tagStats('bulk-8')?.tagStep, 10, 'the others keep their step');
  });

  it('creates no buffer for a listed tag until its first draw', async () => {
    const { service, store } = await setup({}, [
      { tag: 'a', step: 10 },
      { tag: 'b', step: 20 },
    ]);
    assert.deepEqual(service.activeStats().tags, [], 'no buffer at start-up');
    assert.deepEqual(
      service.stats().tags.map((t) => [t.tag, t.tagStep, t.loads]),
      [
        ['a', 10, 0],
        ['b', 20, 0],
      ],
    );
    const lookups = store.calls.getTag;
    assert.equal(await draw(service, 'b'), 1n);
    assert.equal(
      store.calls.getTag,
      lookups,
      'a listed tag is not looked up again on its first draw',
    );
    assert.deepEqual(
      service.activeStats().tags.map((t) => t.tag),
      ['b'],
    );
    assert.deepEqual(
      service.stats().tags.map((t) => t.tag),
      ['a', 'b'],
    );
  });

  it('keeps tagNames sorted as stats lists them, counts to match', async () => {
    const { service, memory, clock } = await setup({ tagFullRefreshMs: 60_000 }, [
      { tag: 'm', step: 10 },
      { tag: 'b', step: 10 },
    ]);
    assert.deepEqual(service.tagNames(), ['b', 'm']);
    await memory.createTag({ tag: 'a', step: 10 });
    assert.equal(
      await draw(service, 'a'),
      1n,
      'created after the last list read: found by a look-up',
    );
    assert.deepEqual(service.tagNames(), ['a', 'b', 'm']);
    assert.deepEqual(service.tagCounts(), { known: 3, inUse: 1 });
    assert.equal(service.inUse('a'), true);
    assert.equal(service.tagStats('a')?.loads, 1);
    assert.equal(service.tagStats('m')?.loads, 0);
    assert.equal(service.tagStats('zz'), undefined);
    await memory.createTag({ tag: 'z', step: 10 });
    memory.deleteTag('m');
    await draw(service, 'b');
    await service.refreshTags(); // incremental: z appears, m stays until a full read
    assert.deepEqual(service.tagNames(), ['a', 'b', 'm', 'z']);
    assert.deepEqual(
      service.tagNames(),
      service.stats().tags.map((t) => t.tag),
    );
    clock.advance(60_000);
    await service.refreshTags(); // full: m goes
    assert.deepEqual(service.tagNames(), ['a', 'b', 'z']);
    assert.deepEqual(
      service.tagNames(),
      service.stats().tags.map((t) => t.tag),
    );
    await service.close();
    assert.deepEqual(service.tagNames(), ['z'], 'the tags in use go with their buffers at close');
    assert.deepEqual(
      service.tagNames(),
      service.stats().tags.map((t) => t.tag),
    );
  });

  it('names a tag once when drawn during a full read that lists it', async () => {
    const memory = await sqliteStore();
    memory.bulkInsert(4500); // several pages
    const store = new FaultySegmentStore(memory);
    const service = new SegmentService({
      store,
      clock: new ManualClock(T0),
      tagRefreshMs: 0,
      tagFullRefreshMs: 0,
    });
    await service.start();
    // New to the service, and in the full read's first page ('a-' sorts before 'bulk-').
    const fresh = Array.from({ length: 40 }, (_, i) => `a-${i}`);
    for (const tag of fresh) await memory.createTag({ tag, step: 10 });
    const refreshing = service.refreshTags();
    const draws: Promise<bigint>[] = [];
    // One first draw a turn of the event loop, so some land between the read's pages, each after
    // a status request has read the names (which folds what the read has noted so far).
    for (const tag of fresh) {
      await new Promise((resolve) => setImmediate(resolve));
      service.tagNames();
      draws.push(draw(service, tag));
    }
    await refreshing;
    await Promise.all(draws);
    const names = service.tagNames();
    assert.equal(new Set(names).size, names.length, 'no name twice');
    assert.deepEqual(
      names,
      service.stats().tags.map((t) => t.tag),
    );
    assert.equal(names.length, 4540);
    await service.close();
  });

  it('refreshes the tag list on its timer', async () => {
    const { service, memory } = await setup({ tagRefreshMs: 10 });
    await memory.createTag({ tag: 'later', step: 10 });
    for (let i = 0; i < 500 && !service.stats().tags.some((t) => t.tag === 'later'); i++)
      await sleep(10);
    assert.ok(service.stats().tags.some((t) => t.tag === 'later'));
    await service.close();
  });

  it('serves a tag created after start-up at once, looking it up in the store', async () => {
    const { service, memory, store } = await setup();
    await memory.createTag({ tag: 'fresh', step: 10 });
    assert.equal(await service.next('fresh'), 1n);
    assert.equal(store.calls.getTag, 1);
  });

  it('answers unknown tags from a short negative cache, one look-up', async () => {
    const { service, memory, store, clock } = await setup({ negativeCacheMs: 2000 });
    await Promise.all(
      Array.from({ length: 20 }, () =>
        rejectsWith(service.next('ghost'), 'TAG_NOT_FOUND', /"ghost" does not exist/),
      ),
    );
    assert.equal(store.calls.getTag, 1);
    await memory.createTag({ tag: 'ghost', step: 10 });
    await rejectsWith(service.next('ghost'), 'TAG_NOT_FOUND');
    assert.equal(store.calls.getTag, 1, 'answered from the negative cache');
    assert.equal(service.stats().negativeCacheSize, 1);
    clock.advance(2000);
    assert.equal(await service.next('ghost'), 1n);
    assert.equal(store.calls.getTag, 2);
    assert.equal(service.stats().negativeCacheSize, 0);
    await rejectsWith(service.next('bad\u0000tag'), 'INVALID_ARGUMENT', /tag must be/);
    assert.equal(store.calls.getTag, 2);
  });

  it('a refresh that read the tags before a create keeps its buffer', async () => {
    const { service, store, memory } = await setup(
      { step: { maxStep: 10 }, prefetchThreshold: 1, waitTimeoutMs: 30_000, tagFullRefreshMs: 0 },
      [],
    );
    const issued: bigint[] = [];
    const record = (ids: bigint[]) => issued.push(...ids);

    // A refresh (the timer's, or one the tag API started) has read the list, and not yet landed.
    const refresh = store.holdReplies('listTagPage');
    const refreshing = service.refreshTags();
    await refresh.answered;

    // Meanwhile the tag is created (on another node, or through the API) and served here.
    await memory.createTag({ tag: 'late', step: 10 });
    record(await drawMany(service, 10, 'late')); // its first range, [1, 11), used up

    // A batch waits for the tag's next range (allocation held back).
    const firstLoad = store.hold(['allocate']);
    const batch = service.nextBatch('late', 3).then(record);
    await settle();

    // The stale refresh lands. Then another request for the tag comes in; any range it makes
    // the store allocate is held separately, and let through first.
    refresh.release();
    await refreshing;
    const secondLoad = store.hold(['allocate']);
    const single = service.next('late').then((id) => record([id]));
    await settle();
    secondLoad();
    await settle();
    firstLoad();
    await Promise.all([batch, single]);
    record(await drawMany(service, 2, 'late'));

    assert.equal(
      new Set(issued).size,
      issued.length,
      `an ID was issued twice: ${issued.join(', ')}`,
    );
    for (let i = 1; i < issued.length; i++) {
      assert.ok(
        (issued[i] as bigint) > (issued[i - 1] as bigint),
        `ID ${issued[i]} issued after ${issued[i - 1]}: lower (${issued.join(', ')})`,
      );
    }
    assert.deepEqual(issued, range(1, 16), 'one buffer, no range lost');
    assert.equal(store.calls.allocate, 2, 'one range load per range: the buffer was not recreated');
    assert.deepEqual(
      service.stats().tags.map((t) => [t.tag, t.loads]),
      [['late', 2]],
    );

    // A refresh that starts after the tag exists (or after it is deleted) still applies.
    await service.refreshTags();
    assert.deepEqual(
      service.stats().tags.map((t) => t.tag),
      ['late'],
    );
    memory.deleteTag('late');
    await service.refreshTags();
    assert.deepEqual(service.stats().tags, []);
  });

  it('start() rejects when the store is down; the service recovers', async () => {
    const memory = await sqliteStore();
    await memory.createTag({ tag: 'orders', step: 10 });
    const store = new FaultySegmentStore(memory);
    store.mode = 'fail';
    const service = new SegmentService({ store, clock: new ManualClock(T0), tagRefreshMs: 0 });
    await rejectsWith(service.start(), 'STORE_UNAVAILABLE');
    store.mode = 'pass';
    assert.equal(await service.next('orders'), 1n);
    assert.equal(service.stats().tagRefreshFailures, 1);
  });
});

describe('SegmentService: shutdown', () => {
  it('gives the unissued tail back; a restart continues after it', async () => {
    const { service, store, memory, clock } = await setup();
    assert.deepEqual(await drawMany(service, 5), range(1, 5));
    assert.deepEqual(await service.close(), { releasedIds: 95, wastedIds: 0, failedReleases: [] });
    assert.equal((await memory.getTag('orders'))?.maxId, 6n);
    assert.equal(service.nextSync('orders'), undefined);
    await rejectsWith(service.next('orders'), 'SEGMENTS_NOT_READY', /closed/);
    assert.deepEqual(
      await service.close(),
      { releasedIds: 95, wastedIds: 0, failedReleases: [] },
      'idempotent',
    );

    const restarted = new SegmentService({ store, clock, tagRefreshMs: 0 });
    await restarted.start();
    assert.equal(await draw(restarted), 6n);
  });

  it('gives back the current remainder and the adjacent next range together', async () => {
    const { service, memory } = await setup();
    await drawMany(service, 11);
    await settle(); // next range [101, 201) is buffered
    assert.deepEqual(await service.close(), { releasedIds: 189, wastedIds: 0, failedReleases: [] });
    assert.equal((await memory.getTag('orders'))?.maxId, 12n);
  });

  it('gives nothing back when another node allocated after us', async () => {
    const { service, memory } = await setup();
    await draw(service);
    await memory.allocate('orders');
    assert.deepEqual(await service.close(), { releasedIds: 0, wastedIds: 99, failedReleases: [] });
    assert.equal((await memory.getTag('orders'))?.maxId, 201n);
  });

  it('reports a refused give-back naming the tag, its IDs wasted', async () => {
    const { service, store, memory } = await setup();
    await drawMany(service, 5);
    store.mode = 'fail';
    const report = await service.close();
    assert.equal(report.releasedIds, 0);
    assert.equal(report.wastedIds, 95);
    assert.deepEqual(
      report.failedReleases.map((f) => [f.tag, f.ids, f.error.code]),
      [['orders', 95, 'STORE_UNAVAILABLE']],
    );
    assert.equal((await memory.getTag('orders'))?.maxId, 101n, 'nothing was given back');
  });

  it('lets a load in flight land, then gives its range back too', async () => {
    const { service, store, memory } = await setup();
    await drawMany(service, 10);
    const open = store.hold();
    assert.equal(service.nextSync('orders'), 11n); // starts the held prefetch
    const closing = service.close();
    assert.equal(service.nextSync('orders'), undefined, 'no ID is issued once closing');
    open();
    assert.deepEqual(await closing, { releasedIds: 189, wastedIds: 0, failedReleases: [] });
    assert.equal((await memory.getTag('orders'))?.maxId, 12n);
  });
});

describe('SegmentService: stats, events and options', () => {
  it('reports per tag its step, buffered IDs, loads, latency and failures', async () => {
    const { service, store, events } = await setup();
    await drawMany(service, 11);
    await settle();
    const stats = service.stats().tags[0];
    assert.deepEqual(
      { ...stats, loadMsTotal: undefined, loadMsMax: undefined },
      {
        tag: 'orders',
        step: 100,
        tagStep: 100,
        remaining: 189,
        nextReady: true,
        loading: false,
        loads: 2,
        loadFailures: 0,
        abandonedLoads: 0,
        heals: 0,
        loadMsTotal: undefined,
        loadMsMax: undefined,
        lastError: null,
        lastErrorCode: null,
        issued: 11,
        range: { start: 1n, end: 101n, position: 12n },
        next: { start: 101n, end: 201n },
      },
    );
    assert.ok(
      (stats?.loadMsMax ?? -1) >= 0 && (stats?.loadMsTotal ?? -1) >= (stats?.loadMsMax ?? 0),
    );
    store.mode = 'fail';
    await service.nextBatch('orders', 189);
    await rejectsWith(service.next('orders'), 'STORE_UNAVAILABLE');
    assert.equal(service.stats().tags[0]?.loadFailures, 1);
    assert.equal(service.stats().tags[0]?.lastErrorCode, 'STORE_UNAVAILABLE');
    const loads = events.filter((e) => e.type === 'load');
    assert.deepEqual(
      loads.map((e) => (e.range === undefined ? e.error?.code : `${e.range.start}-${e.range.end}`)),
      ['1-101', '101-201', 'STORE_UNAVAILABLE'],
    );
    assert.ok(events.some((e) => e.type === 'refresh' && e.tags === 1));
  });

  it('refuses bad options, naming them', async () => {
    const store = await sqliteStore();
    const clock = new ManualClock(T0);
    assert.throws(
      () => new SegmentService({ store, clock, prefetchThreshold: 1.5 }),
      /prefetchThreshold must be a number from 0 to 1, got 1.5/,
    );
    assert.throws(
      () => new SegmentService({ store, clock, waitTimeoutMs: 0 }),
      /waitTimeoutMs must be an integer from 1 to 2147483647 ms, got 0/,
    );
    assert.throws(() => new SegmentService({ store, clock, step: { factor: 1 } }), /step.factor/);
    assert.throws(
      () => new SegmentService({ store } as unknown as SegmentServiceOptions),
      /needs options with a store and a clock/,
    );
  });

  it('refuses durations Node timers would clamp, takes the longest', async () => {
    const store = await sqliteStore();
    const clock = new ManualClock(T0);
    const thirtyDays = 30 * 86_400_000;
    for (const name of [
      'waitTimeoutMs',
      'loadTimeoutMs',
      'retryAfterMs',
      'tagRefreshMs',
      'tagFullRefreshMs',
      'negativeCacheMs',
    ] as const) {
      assert.throws(
        () => new SegmentService({ store, clock, [name]: thirtyDays }),
        new RegExp(`${name} must be an integer from \\d to 2147483647 ms, got ${thirtyDays}`),
      );
      assert.throws(
        () => new SegmentService({ store, clock, [name]: 2 ** 31 }),
        new RegExp(`${name} must be an integer`),
      );
    }
    // At the bound the timer is honoured: the refresh runs once at start-up and not again.
    const events: SegmentEvent[] = [];
    const service = new SegmentService({
      store,
      clock,
      tagRefreshMs: 2 ** 31 - 1,
      onEvent: (event) => events.push(event),
    });
    await service.start();
    await sleep(300);
    await service.close();
    assert.equal(events.filter((e) => e.type === 'refresh').length, 1);
  });

  it('two services on one store (two nodes) never share an ID', async () => {
    const memory = await sqliteStore();
    await memory.createTag({ tag: 'orders', step: 7 });
    const clock = new ManualClock(T0);
    const nodes = [0, 1].map(
      () => new SegmentService({ store: memory, clock, tagRefreshMs: 0, step: { maxStep: 7 } }),
    );
    const ids = await Promise.all(nodes.map((node) => drawMany(node, 500)));
    assert.equal(new Set(ids.flat()).size, 1000);
    for (const list of ids)
      assert.deepEqual(
        list,
        [...list].sort((a, b) => (a < b ? -1 : 1)),
        'each node increasing',
      );
  });
});
