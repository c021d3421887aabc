// SegmentService.nextRange: runs of IDs handed to callers that issue them themselves (the range
// route, TinyId's segment routes). Real SQLite databases; a set of two for strides.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
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
