// SegmentService.nextRange: runs of IDs handed to callers that issue them themselves (the range
// route, TinyId's segment routes). Real SQLite databases; a set of two for strides.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, describe, it } from 'node:test';
import { FaultySegmentStore } from '../../test/support/faulty-segment-store.ts';
import { rejectsWith } from '../../test/support/segment-store-suite.ts';
import { ManualClock } from '../clocks/manual-clock.ts';
import type { SegmentRun } from '../core/segment-buffer.ts';
import type { SegmentStore } from '../ports/segment-store.ts';
import { MultiSegmentStore, type SetMemberStore } from '../stores/multi/multi-segment-store.ts';
import { SqliteSegmentStore } from '../stores/sqlite/sqlite-segment-store.ts';
import { SegmentService } from './segment-service.ts';

const directory = mkdtempSync(join(tmpdir(), 'idmint-segment-ranges-'));
let files = 0;
after(() => rmSync(directory, { recursive: true, force: true }));

async function serviceOn(store: SegmentStore) {
  const service = new SegmentService({
    store,
    clock: new ManualClock(Date.UTC(2026, 5, 1)),
    tagRefreshMs: 0,
  });
  await service.start();
  return service;
}

/** Every ID of a run, stepping by its stride. */
function idsOf(run: SegmentRun): bigint[] {
  const ids: bigint[] = [];
  for (let id = run.start; id < run.end; id += BigInt(run.stride)) ids.push(id);
  assert.equal(
    ids.length,
    run.count,
    `run ${run.start}..${run.end} by ${run.stride} must hold count IDs`,
  );
  return ids;
}

describe('SegmentService.nextRange', () => {
  it('hands out runs that never overlap IDs drawn singly or in batches', async () => {
    const store = new SqliteSegmentStore({ path: join(directory, `${++files}.db`) });
    await store.init();
    await store.createTag({ tag: 'orders', step: 100, startId: 1n });
    const service = await serviceOn(store);
    try {
      const seen = new Set<bigint>();
      const add = (id: bigint) => {
        assert.ok(!seen.has(id), `ID ${id} issued twice`);
        seen.add(id);
      };
      const first = await service.nextRange('orders', 30);
      assert.deepEqual(first, { start: 1n, end: 31n, stride: 1, count: 30 });
      idsOf(first).forEach(add);
      add(service.nextSync('orders') ?? (await service.next('orders')));
      // 69 left in the first range: a run of 80 is shortened to them, nothing skipped.
      const short = await service.nextRange('orders', 80);
      assert.deepEqual(short, { start: 32n, end: 101n, stride: 1, count: 69 });
      idsOf(short).forEach(add);
      // Crossing the threshold started the next load: the next run comes from the next range.
      const next = await service.nextRange('orders', 50);
      assert.equal(next.start, 101n);
      idsOf(next).forEach(add);
      for (const id of await service.nextBatch('orders', 120)) add(id);
      for (let i = 0; i < 20; i++) idsOf(await service.nextRange('orders', 7)).forEach(add);
      // Dense: every ID from 1 up to the highest was handed out once, none skipped.
      const highest = [...seen].reduce((a, b) => (a > b ? a : b));
      assert.equal(BigInt(seen.size), highest);
    } finally {
      await service.close();
      await store.close();
    }
  });

  it('says the stride of a range from a set of databases', async () => {
    const members = [0, 1].map(
      (offset) =>
        new SqliteSegmentStore({
          path: join(directory, `${++files}.db`),
          residue: { offset, increment: 2 },
        }),
    );
    const store = new MultiSegmentStore({
      databases: members.map((member, index) => ({
        store: member as SqliteSegmentStore & SetMemberStore,
        name: `db${index}`,
      })),
      now: () => Date.now(),
      backoffMs: 1000,
    });
    await store.init();
    await store.createTag({ tag: 'orders', step: 10, startId: 100n });
    const service = await serviceOn(store);
    try {
      const seen = new Set<bigint>();
      for (let i = 0; i < 12; i++) {
        const run = await service.nextRange('orders', 4);
        assert.equal(run.stride, 2);
        assert.ok(run.count >= 1 && run.count <= 4);
        for (const id of idsOf(run)) {
          assert.equal(id % 2n, run.start % 2n, 'a run stays in its residue class');
          assert.ok(!seen.has(id));
          seen.add(id);
        }
      }
    } finally {
      await service.close();
      await store.close();
    }
  });

  it("'step' asks for the tag's configured step, also for a new look-up", async () => {
    const store = new SqliteSegmentStore({ path: join(directory, `${++files}.db`) });
    await store.init();
    const service = await serviceOn(store);
    try {
      // Created after start: the service holds no buffer for it until the call looks it up.
      await store.createTag({ tag: 'late', step: 40, startId: 1n });
      assert.deepEqual(await service.nextRange('late', 'step'), {
        start: 1n,
        end: 41n,
        stride: 1,
        count: 40,
      });
    } finally {
      await service.close();
      await store.close();
    }
  });

  it('refuses a bad size and an unknown tag with stable codes', async () => {
    const store = new SqliteSegmentStore({ path: join(directory, `${++files}.db`) });
    await store.init();
    const service = await serviceOn(store);
    try {
      await rejectsWith(
        service.nextRange('orders', 0),
        'INVALID_ARGUMENT',
        /size must be an integer/,
      );
      await rejectsWith(service.nextRange('ghost', 5), 'TAG_NOT_FOUND', /ghost/);
    } finally {
      await service.close();
      await store.close();
    }
  });
});

describe('SegmentService.exactRange', () => {
  it('answers the size asked: from the buffer when it holds it, else one allocation', async () => {
    const store = new SqliteSegmentStore({ path: join(directory, `${++files}.db`) });
    await store.init();
    await store.createTag({ tag: 'orders', step: 100, startId: 1n });
    const service = await serviceOn(store);
    try {
      const seen = new Set<bigint>();
      const add = (id: bigint) => {
        assert.ok(!seen.has(id), `ID ${id} issued twice`);
        seen.add(id);
      };
      const first = await service.exactRange('orders', 30);
      assert.deepEqual(first, { start: 1n, end: 31n, stride: 1, count: 30 });
      idsOf(first).forEach(add);
      // 70 left in the buffered range: a range of 80 is allocated whole, after the prefetch
      // that crossing the threshold started ([101, 201)), and nothing buffered is skipped.
      const big = await service.exactRange('orders', 80);
      assert.deepEqual(big, { start: 201n, end: 281n, stride: 1, count: 80 });
      idsOf(big).forEach(add);
      assert.equal((await store.getTag('orders'))?.maxId, 281n, 'one allocation of 80');
      for (const id of await service.nextBatch('orders', 70)) add(id);
      assert.ok(seen.has(31n) && seen.has(100n), 'the buffered rest went to the next callers');
      // The next range [101, 201) holds 60: served from it once the current range is used up.
      const fromNext = await service.exactRange('orders', 60);
      assert.deepEqual(fromNext, { start: 101n, end: 161n, stride: 1, count: 60 });
      idsOf(fromNext).forEach(add);
      // Larger than any buffered range: a range of its own, as large as the largest allowed.
      const step = await service.exactRange('orders', 1000);
      assert.equal(step.count, 1000);
      idsOf(step).forEach(add);
      for (const id of await service.nextBatch('orders', 300)) add(id);
    } finally {
      await service.close();
      await store.close();
    }
  });

  it('keeps answers exact and disjoint under concurrent callers, batches included', async () => {
    const store = new SqliteSegmentStore({ path: join(directory, `${++files}.db`) });
    await store.init();
    await store.createTag({ tag: 'orders', step: 50, startId: 1n });
    const service = await serviceOn(store);
    try {
      const seen = new Set<bigint>();
      const sizes = [1, 7, 49, 50, 51, 120, 333, 3, 64, 200];
      const answers = await Promise.all(
        Array.from({ length: 60 }, async (_, i) => {
          const size = sizes[i % sizes.length] as number;
          if (i % 5 === 4) return { size, ids: await service.nextBatch('orders', size) };
          const run = await service.exactRange('orders', size);
          assert.equal(run.count, size, `a range of ${size} answered ${run.count}`);
          return { size, ids: idsOf(run) };
        }),
      );
      for (const { size, ids } of answers) {
        assert.equal(ids.length, size);
        for (const id of ids) {
          assert.ok(!seen.has(id), `ID ${id} issued twice`);
          seen.add(id);
        }
      }
    } finally {
      await service.close();
      await store.close();
    }
  });

  it('steps by the stride of a set of databases, every answer exact', async () => {
    const members = [0, 1].map(
      (offset) =>
        new SqliteSegmentStore({
          path: join(directory, `${++files}.db`),
          residue: { offset, increment: 2 },
        }),
    );
    const store = new MultiSegmentStore({
      databases: members.map((member, index) => ({
        store: member as SqliteSegmentStore & SetMemberStore,
        name: `db${index}`,
      })),
      now: () => Date.now(),
      backoffMs: 1000,
    });
    await store.init();
    await store.createTag({ tag: 'orders', step: 10, startId: 100n });
    const service = await serviceOn(store);
    try {
      const seen = new Set<bigint>();
      for (const size of [4, 9, 25, 3, 40, 1]) {
        const run = await service.exactRange('orders', size);
        assert.equal(run.stride, 2);
        assert.equal(run.count, size);
        for (const id of idsOf(run)) {
          assert.equal(id % 2n, run.start % 2n, 'a run stays in its residue class');
          assert.ok(!seen.has(id));
          seen.add(id);
        }
      }
    } finally {
      await service.close();
      await store.close();
    }
  });

  it('never issues a range of its own below IDs already loaded: the row is raised', async () => {
    const path = join(directory, `${++files}.db`);
    const store = new SqliteSegmentStore({ path });
    await store.init();
    await store.createTag({ tag: 'orders', step: 100, startId: 1n });
    const service = await serviceOn(store);
    try {
      const first = await service.exactRange('orders', 20); // [1, 21); prefetched [101, 201)
      assert.equal((await store.getTag('orders'))?.maxId, 201n);
      // max_id moved back under the node (a restore nobody fenced): the next allocation would
      // hand out [1, 151) again.
      const db = new DatabaseSync(path);
      db.prepare("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'orders'").run();
      db.close();
      const run = await service.exactRange('orders', 150);
      assert.deepEqual(run, { start: 201n, end: 351n, stride: 1, count: 150 });
      assert.ok(run.start >= first.end);
      assert.equal(service.tagStats('orders')?.heals, 1);
    } finally {
      await service.close();
      await store.close();
    }
  });

  it('allocates after the load in flight, one at a time; backs off after a failure', async () => {
    const real = new SqliteSegmentStore({ path: join(directory, `${++files}.db`) });
    await real.init();
    await real.createTag({ tag: 'orders', step: 100, startId: 1n });
    const store = new FaultySegmentStore(real);
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const service = new SegmentService({ store, clock, tagRefreshMs: 0, retryAfterMs: 1000 });
    await service.start();
    try {
      await service.next('orders'); // [1, 101)
      const release = store.hold(['allocate']);
      await service.nextBatch('orders', 20); // past the threshold: the prefetch is held
      assert.equal(store.calls.allocate, 2);
      const own = service.exactRange('orders', 150);
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(store.calls.allocate, 2, 'the range waits for the load in flight');
      release();
      assert.deepEqual(await own, { start: 201n, end: 351n, stride: 1, count: 150 });
      assert.deepEqual(store.requestedSteps, [undefined, undefined, 150]);
      // A failed allocation starts the back-off: the next one fails at once, asking nothing.
      store.mode = 'fail';
      await rejectsWith(service.exactRange('orders', 150), 'STORE_UNAVAILABLE');
      const calls = store.calls.allocate;
      await rejectsWith(service.exactRange('orders', 150), 'STORE_UNAVAILABLE');
      assert.equal(store.calls.allocate, calls);
      store.mode = 'pass';
      clock.advance(1000);
      assert.equal((await service.exactRange('orders', 150)).start, 351n);
    } finally {
      await service.close();
      await real.close();
    }
  });

  it('refuses a size above the largest range the tag may take (the fence unit)', async () => {
    const store = new SqliteSegmentStore({ path: join(directory, `${++files}.db`) });
    await store.init();
    await store.createTag({ tag: 'orders', step: 20, startId: 1n });
    await store.createTag({ tag: 'wide', step: 80, startId: 1n });
    const service = new SegmentService({
      store,
      clock: new ManualClock(Date.UTC(2026, 5, 1)),
      tagRefreshMs: 0,
      step: { maxStep: 50 },
    });
    await service.start();
    try {
      await rejectsWith(
        service.exactRange('orders', 51),
        'INVALID_ARGUMENT',
        /size 51 is above the largest range tag "orders" may take, 50/,
      );
      assert.equal((await service.exactRange('orders', 50)).count, 50);
      // A stored step above maxStep is the largest range of its tag.
      assert.equal((await service.exactRange('wide', 80)).count, 80);
      await rejectsWith(service.exactRange('wide', 81), 'INVALID_ARGUMENT', /, 80 /);
      await rejectsWith(service.exactRange('orders', 0), 'INVALID_ARGUMENT', /size must be/);
      await rejectsWith(service.exactRange('ghost', 5), 'TAG_NOT_FOUND', /ghost/);
    } finally {
      await service.close();
      await store.close();
    }
  });
});
