import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../clocks/manual-clock.ts';
import { SqliteSegmentStore } from '../stores/sqlite/sqlite-segment-store.ts';
import { RateWindow, SegmentActivity, StepHistory } from './activity.ts';
import { SegmentService } from './segment-service.ts';

/** Feeds `window` totals that grow by `perSample[i]` at sample i, `intervalMs` apart. */
function feed(
  window: RateWindow,
  key: string,
  perSample: readonly number[],
  intervalMs = 1000,
  from = 0,
): number {
  let total = 0;
  let now = from;
  for (const growth of perSample) {
    total += growth;
    window.record(now, [[key, total]]);
    now += intervalMs;
  }
  return now;
}

describe('RateWindow', () => {
  it('turns growing totals into per-second rates and their window mean', () => {
    const window = new RateWindow({ samples: 5 });
    feed(window, 'a', [7, 100, 100, 300, 100]);
    // The first sample is the base: four intervals of one second follow.
    assert.deepEqual(window.series('a'), { perSecond: 150, rates: [100, 100, 300, 100] });
  });

  it('divides by the time that really passed between samples', () => {
    const window = new RateWindow({ samples: 5 });
    window.record(0, [['a', 0]]);
    window.record(500, [['a', 100]]); // 100 in half a second
    window.record(2500, [['a', 300]]); // 200 in two seconds
    assert.deepEqual(window.series('a'), { perSecond: 120, rates: [200, 100] });
    window.record(2500, [['a', 900]]); // not later than the previous sample: ignored
    assert.deepEqual(window.series('a')?.rates, [200, 100]);
  });

  it('keeps only the last `samples` rates', () => {
    const window = new RateWindow({ samples: 3 });
    feed(window, 'a', [0, 1, 2, 3, 4, 5, 6]);
    assert.deepEqual(window.series('a'), { perSecond: 5, rates: [4, 5, 6] });
  });

  it('gives a key a series once it moves; drops it after an idle window', () => {
    const window = new RateWindow({ samples: 3 });
    window.record(0, [
      ['idle', 5],
      ['busy', 0],
    ]);
    window.record(1000, [
      ['idle', 5],
      ['busy', 10],
    ]);
    assert.equal(window.activeKeys, 1);
    assert.deepEqual(
      window.series('idle'),
      { perSecond: 0, rates: [0] },
      'an idle key reads as zeros, not as unknown',
    );
    for (let i = 2; i <= 4; i++)
      window.record(i * 1000, [
        ['idle', 5],
        ['busy', 10],
      ]);
    assert.equal(window.activeKeys, 0, 'three samples without growth: the series is gone');
    assert.deepEqual(window.series('busy'), { perSecond: 0, rates: [0, 0, 0] });
  });

  it('counts a key that appears after the first sample from 0', () => {
    const window = new RateWindow({ samples: 4 });
    window.record(0, [['a', 50]]);
    window.record(1000, [
      ['a', 50],
      ['b', 30],
    ]);
    assert.deepEqual(window.series('a')?.rates, [0]);
    assert.deepEqual(window.series('b')?.rates, [30]);
  });

  it('forgets missing keys; never reports a negative rate', () => {
    const window = new RateWindow({ samples: 4 });
    window.record(0, [
      ['a', 10],
      ['b', 10],
    ]);
    window.record(1000, [
      ['a', 20],
      ['b', 20],
    ]);
    window.record(2000, [['a', 5]]);
    assert.equal(window.series('b'), null);
    assert.deepEqual(window.series('a')?.rates, [10, 0]);
    window.record(3000, [['a', 8]]);
    assert.deepEqual(window.series('a')?.rates, [10, 0, 3]);
  });

  it('caps the keys with a series; a key past the cap reads null until there is room', () => {
    const window = new RateWindow({ samples: 4, maxKeys: 2 });
    window.record(0, [
      ['a', 0],
      ['b', 0],
      ['c', 0],
    ]);
    window.record(1000, [
      ['a', 1],
      ['b', 1],
      ['c', 1],
    ]);
    assert.equal(window.activeKeys, 2);
    assert.equal(window.series('c'), null);
    window.record(2000, [
      ['b', 2],
      ['c', 3],
    ]); // a is gone: room for c
    assert.deepEqual(window.series('c')?.rates, [0, 2]);
    assert.equal(window.series('a'), null);
  });
});

describe('StepHistory', () => {
  it('keeps the last loads per tag, evicts the least recent past the cap', () => {
    const history = new StepHistory({ length: 3, maxKeys: 2 });
    for (let i = 1; i <= 4; i++) history.record('a', { at: i, step: 100 * i, ms: i });
    assert.deepEqual(
      history.loads('a').map((l) => l.step),
      [200, 300, 400],
    );
    history.record('b', { at: 5, step: 10, ms: 1 });
    history.record('a', { at: 6, step: 500, ms: 1 }); // a is now the most recent
    history.record('c', { at: 7, step: 10, ms: 1 }); // evicts b
    assert.deepEqual(history.loads('b'), []);
    assert.equal(history.loads('a').length, 3);
    history.retain((tag) => tag !== 'a');
    assert.deepEqual(history.loads('a'), []);
    assert.equal(history.size, 1);
  });
});

describe('SegmentActivity over a real SegmentService (SQLite)', () => {
  it('reads IDs issued per tag, range positions and loads from the service', async () => {
    const store = new SqliteSegmentStore({ path: ':memory:' });
    await store.init();
    await store.createTag({ tag: 'orders', step: 100 });
    await store.createTag({ tag: 'idle', step: 100 });
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    let activity: SegmentActivity | undefined;
    const service = new SegmentService({
      store,
      clock,
      tagRefreshMs: 0,
      onEvent: (event) => activity?.onEvent(event),
    });
    activity = new SegmentActivity(service, { wallClock: () => 42 });
    try {
      await service.start();
      activity.sample(0);
      for (let i = 0; i < 25; i++) service.nextSync('orders') ?? (await service.next('orders'));
      const stats = service.stats().tags.find((t) => t.tag === 'orders');
      assert.equal(stats?.issued, 25);
      assert.deepEqual(stats?.range, { start: 1n, end: 101n, position: 26n });
      // Past the 10% threshold the next range is loading or loaded.
      for (
        let i = 0;
        i < 500 && service.stats().tags.find((t) => t.tag === 'orders')?.next === null;
        i++
      )
        await new Promise((resolve) => setTimeout(resolve, 10));
      const after = service.stats().tags.find((t) => t.tag === 'orders');
      assert.deepEqual(after?.next, { start: 101n, end: 201n });
      assert.equal(after?.issued, 25, 'a prefetched range is buffered, not issued');
      activity.sample(1000);
      assert.deepEqual(activity.rates.series('orders'), { perSecond: 25, rates: [25] });
      const idle = activity.rates.series('idle');
      assert.ok(
        idle === null || (idle.perSecond === 0 && idle.rates.every((r) => r === 0)),
        'a tag nobody draws from has no rate',
      );
      assert.deepEqual(
        activity.steps.loads('orders').map((l) => [l.at, l.step]),
        [
          [42, 100],
          [42, 100],
        ],
      );
      assert.equal(service.issuedByTag().get('orders'), 25);
    } finally {
      await service.close();
      await store.close();
    }
  });
});
