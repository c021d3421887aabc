import assert from 'node:assert/strict';
import { it, type TestContext } from 'node:test';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import type { SegmentRange, SegmentStore } from '../src/ports/segment-store.ts';
import { SegmentService } from '../src/service/segment-service.ts';
import { FaultySegmentStore } from './support/faulty-segment-store.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { describeWithServices } from './support/services.ts';

// Shutdown give-back lowers max_id (compare-and-set from the end of the node's last range to its
// first unissued ID). These tests put two or three nodes (services) on one real store and build
// the interleavings where that looks dangerous: a node whose next range is loaded closes while
// another node holds a range between its two; another node's range was loaded and given back
// first (max_id returns to our `to`: ABA); another node allocated after us; an allocation we
// abandoned commits after our give-back. After each step, max_id must stay above every ID issued
// and every range a live node holds, and no ID may ever be issued twice.

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const TAG = 'giveback';

/** A node: a service on the shared store, with the IDs it issued and the ranges it loaded. */
class Node {
  readonly name: string;
  readonly service: SegmentService;
  readonly issued: bigint[] = [];
  readonly ranges: SegmentRange[] = [];
  closed = false;

  constructor(name: string, store: SegmentStore, options: { loadTimeoutMs?: number } = {}) {
    this.name = name;
    // Step 10 throughout: Leaf's rule would double it, but 20 passes maxStep 10, so it stays.
    this.service = new SegmentService({
      store,
      clock: new ManualClock(T0),
      tagRefreshMs: 0,
      step: { maxStep: 10 },
      retryAfterMs: 0,
      ...options,
      onEvent: (event) => {
        if (event.type === 'load' && event.range !== undefined) this.ranges.push(event.range);
      },
    });
  }

  async draw(count = 1): Promise<bigint[]> {
    const ids: bigint[] = [];
    for (let i = 0; i < count; i++)
      ids.push(this.service.nextSync(TAG) ?? (await this.service.next(TAG)));
    this.issued.push(...ids);
    return ids;
  }

  /** Waits until the next range is buffered (the prefetch has landed). */
  async nextLoaded(): Promise<void> {
    for (let i = 0; i < 2000 && this.service.stats().tags[0]?.nextReady !== true; i++)
      await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(
      this.service.stats().tags[0]?.nextReady,
      true,
      `${this.name}: the next range never loaded`,
    );
  }

  async close() {
    this.closed = true;
    return this.service.close();
  }
}

async function setup(
  t: TestContext,
  backend: (typeof SEGMENT_BACKENDS)[keyof typeof SEGMENT_BACKENDS],
) {
  const fixture = await backend.open();
  t.after(() => fixture.dispose());
  await fixture.store.createTag({ tag: TAG, step: 10 });
  const nodes: Node[] = [];
  const node = (
    name: string,
    store: SegmentStore = fixture.store,
    options?: { loadTimeoutMs?: number },
  ) => {
    const created = new Node(name, store, options);
    nodes.push(created);
    t.after(() => created.service.close());
    return created;
  };
  const maxId = async () => (await fixture.store.getTag(TAG))?.maxId ?? -1n;
  /** max_id is above every ID issued and every range a live node still holds; no ID twice. */
  const check = async (when: string) => {
    // What the nodes issued and hold is read before max_id: a prefetch may land while max_id is
    // read, and its range, allocated after that read, may rightly lie above the value read.
    const issued = nodes.flatMap((n) => n.issued);
    const held = nodes
      .filter((n) => !n.closed)
      .flatMap((n) => n.ranges.map((range) => ({ node: n.name, range })));
    const max = await maxId();
    assert.equal(new Set(issued).size, issued.length, `${when}: an ID was issued twice`);
    for (const id of issued) assert.ok(id < max, `${when}: ID ${id} issued, but max_id is ${max}`);
    for (const { node, range } of held)
      assert.ok(
        range.end <= max,
        `${when}: ${node} holds [${range.start}, ${range.end}) above max_id ${max}`,
      );
    for (const n of nodes)
      assert.deepEqual(
        n.issued,
        [...n.issued].sort((a, b) => (a < b ? -1 : 1)),
        `${when}: ${n.name} not increasing`,
      );
    return max;
  };
  return { fixture, node, maxId, check };
}

for (const backend of Object.values(SEGMENT_BACKENDS)) {
  await describeWithServices(
    `shutdown give-back with several nodes on one store (${backend.name})`,
    backend.services,
    () => {
      it("gives back only what is above the other node's range; it serves that", async (t) => {
        const { node, check } = await setup(t, backend);
        const a = node('A');
        const b = node('B');
        assert.deepEqual(await a.draw(), [1n]); // A: [1, 11)
        assert.deepEqual(await b.draw(), [11n]); // B: [11, 21)
        assert.deepEqual(await a.draw(), [2n]); // A prefetches [21, 31): not adjacent to [1, 11)
        await a.nextLoaded();
        assert.equal(await check('before A closes'), 31n);
        // A's tail is its next range only: [3, 11) sits below B's range and is wasted.
        assert.deepEqual(await a.close(), { releasedIds: 10, wastedIds: 8, failedReleases: [] });
        assert.equal(await check('after A gave back'), 21n);
        // B carries on: the rest of its range, then the range A gave back (which A never issued).
        assert.deepEqual(await b.draw(12), [
          12n,
          13n,
          14n,
          15n,
          16n,
          17n,
          18n,
          19n,
          20n,
          21n,
          22n,
          23n,
        ]);
        await check('B serves the given-back range');
        const c = node('C'); // a restart
        await c.draw(5);
        await check('a restarted node');
      });

      it("ABA: another node's range given back whole, then ours: none reissued", async (t) => {
        const { node, check } = await setup(t, backend);
        const a = node('A');
        const b = node('B');
        await b.draw(); // B: [1, 11)
        await a.draw(); // A: [11, 21)
        await a.draw(); // A: next [21, 31), adjacent
        await a.nextLoaded();
        await b.draw(); // B: next [31, 41), which B has seen but not issued from
        await b.nextLoaded();
        assert.equal(await check('all four ranges loaded'), 41n);
        // B goes first and gives its whole next range back: max_id is A's `to` again.
        assert.deepEqual(await b.close(), { releasedIds: 10, wastedIds: 8, failedReleases: [] });
        assert.equal(await check('B gave back [31, 41)'), 31n);
        // A's compare-and-set succeeds: max_id drops below the range B saw. Safe: B issued none of
        // it.
        assert.deepEqual(await a.close(), { releasedIds: 18, wastedIds: 0, failedReleases: [] });
        assert.equal(await check('A gave back [13, 31)'), 13n);
        const c = node('C');
        assert.deepEqual(await c.draw(3), [13n, 14n, 15n]);
        await check('a restarted node');
      });

      it('gives nothing back when another node allocated after us', async (t) => {
        const { node, check } = await setup(t, backend);
        const a = node('A');
        const b = node('B');
        await a.draw(2); // A: [1, 11) and next [11, 21)
        await a.nextLoaded();
        await b.draw(); // B: [21, 31)
        assert.deepEqual(await a.close(), { releasedIds: 0, wastedIds: 18, failedReleases: [] });
        assert.equal(await check('A could not give back'), 31n);
        await b.draw(15);
        await check('B carries on past its range');
      });

      it('an allocation abandoned before the give-back hands out nothing twice', async (t) => {
        const { fixture, node, check } = await setup(t, backend);
        const faulty = new FaultySegmentStore(fixture.store);
        // Long enough for the real store's first calls on a loaded machine; the held prefetch is
        // abandoned after it whatever the machine does.
        const a = node('A', faulty, { loadTimeoutMs: 1000 });
        await a.draw(); // A: [1, 11)
        const late = faulty.hold(['allocate']);
        await a.draw(); // starts the prefetch, held before it reaches the store
        for (let i = 0; i < 1000 && a.service.stats().tags[0]?.abandonedLoads !== 1; i++)
          await new Promise((resolve) => setTimeout(resolve, 5));
        assert.equal(
          a.service.stats().tags[0]?.abandonedLoads,
          1,
          'the held prefetch was abandoned after loadTimeoutMs',
        );
        assert.deepEqual(await a.close(), { releasedIds: 8, wastedIds: 0, failedReleases: [] });
        assert.equal(await check('A gave back [3, 11)'), 3n);
        late(); // the abandoned allocation reaches the store now: [3, 13), for nobody
        for (let i = 0; i < 400 && faulty.committed.length < 2; i++)
          await new Promise((resolve) => setTimeout(resolve, 5));
        assert.deepEqual(
          faulty.committed.map((r) => [r.start, r.end]),
          [
            [1n, 11n],
            [3n, 13n],
          ],
        );
        const c = node('C');
        assert.deepEqual(await c.draw(2), [13n, 14n]);
        await check('a restarted node');
      });
    },
  );
}
