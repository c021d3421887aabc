import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { rejectsWith } from '../../test/support/segment-store-suite.ts';
import { ManualClock } from '../clocks/manual-clock.ts';
import { SqliteSegmentStore } from '../stores/sqlite/sqlite-segment-store.ts';
import { PeriodicSegments } from './periodic-segments.ts';
import { SegmentService } from './segment-service.ts';

// The periodic layer over a real (in-memory SQLite) store and a manual clock: rows on demand,
// the old period's row retired at the boundary, a node whose clock lags refused.

const BOUNDARY = Date.UTC(2026, 10, 28);
const SKEW = 500;

async function node(store: SqliteSegmentStore, clock: ManualClock) {
  const service = new SegmentService({ store, clock, tagRefreshMs: 0 });
  const periodic = new PeriodicSegments({
    service,
    store,
    clock,
    skewMs: SKEW,
    waitTimeoutMs: 0,
    loadTimeoutMs: 5000,
  });
  return { service, periodic };
}

describe('PeriodicSegments', () => {
  const store = new SqliteSegmentStore({ path: ':memory:' });
  after(() => store.close());

  it('creates each period row on demand, and gives the old one back at the boundary', async () => {
    await store.init();
    await store.createTag({
      tag: 'daily',
      step: 10,
      periodic: { period: 'day', timeZone: 'UTC', template: '{yyMMdd}{seq:4}', start: 100 },
    });
    const clock = new ManualClock(BOUNDARY - 1000);
    const { service, periodic } = await node(store, clock);
    assert.equal(periodic.known('daily'), undefined);
    assert.deepEqual(await periodic.nextBatch('daily', 2), {
      period: '20261127',
      ids: ['2611270100', '2611270101'],
    });
    assert.equal(periodic.nextSync('daily'), '2611270102');
    // One range of the step, and maybe the next one prefetched.
    assert.ok(((await store.getTag('daily@20261127'))?.maxId ?? 0n) >= 110n);
    clock.set(BOUNDARY + SKEW);
    assert.equal(await periodic.next('daily'), '2611280100');
    await periodic.settled();
    await service.close();
    // The old period's unissued tail went back at the boundary: its row ends after 102.
    assert.equal((await store.getTag('daily@20261127'))?.maxId, 103n);
  });

  it('refuses PERIOD_SWITCHING during the pause, never waiting past waitTimeoutMs', async () => {
    const clock = new ManualClock(BOUNDARY + 1);
    const { service, periodic } = await node(store, clock);
    await rejectsWith(periodic.next('daily'), 'PERIOD_SWITCHING', /issued in 499 ms/);
    assert.equal(periodic.nextSync('daily'), undefined);
    await service.close();
  });

  it('refuses a node whose clock is a period behind the others', async () => {
    await store.createTag({ tag: 'daily@20261130', step: 10 });
    const clock = new ManualClock(Date.UTC(2026, 10, 29, 12));
    const { service, periodic } = await node(store, clock);
    await rejectsWith(periodic.next('daily'), 'CLOCK_SKEW', /period 20261130 has begun/);
    assert.equal(await store.getTag('daily@20261129'), undefined);
    await service.close();
  });

  it('answers TAG_NOT_FOUND for a plain tag, which it does not serve', async () => {
    await store.createTag({ tag: 'plain', step: 10 });
    const clock = new ManualClock(BOUNDARY);
    const { service, periodic } = await node(store, clock);
    assert.equal(await periodic.lookup('plain'), undefined);
    await rejectsWith(periodic.next('plain'), 'TAG_NOT_FOUND', /not a periodic tag/);
    await service.close();
  });
});
