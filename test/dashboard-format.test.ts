import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  formatCount,
  formatDuration,
  formatMs,
  formatRate,
  nextSort,
  rangeProgress,
  sparklinePoints,
  statusQueryString,
} from '../src/dashboard/format.ts';
import type { TagQuery } from '../src/dashboard/status-types.ts';

// The dashboard's pure helpers (the page itself is tested in Chromium: dashboard-browser.test.ts).

const QUERY: TagQuery = { q: '', sort: 'tag', order: 'asc', offset: 0, limit: 50, tags: 'all' };

describe('dashboard formatting', () => {
  it('counts, rates and durations read at a glance; unknown is a dash, never 0', () => {
    assert.deepEqual([0, 999, 9999, 12_345, 4_560_000, 7.8e9].map(formatCount), [
      '0',
      '999',
      '9,999',
      '12.3k',
      '4.56M',
      '7.8G',
    ]);
    assert.deepEqual(
      [0, 0.5, 2.25, 12.3, 1242, 45_600].map((v) => formatRate(v)),
      ['0/s', '0.5/s', '2.3/s', '12/s', '1,242/s', '45.6k/s'],
    );
    assert.equal(formatRate(null), '—');
    assert.equal(formatCount(undefined), '—');
    assert.deepEqual([0.26, 12.34, 250, 1500, 90_000].map(formatMs), [
      '0.26 ms',
      '12.3 ms',
      '250 ms',
      '1.5 s',
      '1 min 30 s',
    ]);
    assert.equal(formatMs(null), '—');
    assert.deepEqual([42, 303, 7620, 3 * 86_400 + 4 * 3600].map(formatDuration), [
      '42 s',
      '5 min 03 s',
      '2 h 07 min',
      '3 d 4 h',
    ]);
  });

  it('places a position in its range exactly, for IDs past 2^53', () => {
    assert.equal(rangeProgress({ start: '11', end: '21', position: '16' }), 0.5);
    assert.equal(
      rangeProgress({
        start: '9007199254740993',
        end: '9007199254741993',
        position: '9007199254741243',
      }),
      0.25,
    );
    assert.equal(rangeProgress({ start: '5', end: '5', position: '5' }), 1);
  });

  it('asks the server only for what differs from its defaults, and flips or starts a sort', () => {
    assert.equal(statusQueryString(QUERY), '');
    assert.equal(
      statusQueryString({
        q: 'pay ment',
        sort: 'rate',
        order: 'desc',
        offset: 100,
        limit: 50,
        tags: 'all',
      }),
      '?q=pay+ment&sort=rate&order=desc&offset=100',
    );
    assert.equal(statusQueryString({ ...QUERY, tags: 'in-use' }), '?tags=in-use');
    assert.deepEqual(nextSort({ ...QUERY, offset: 50 }, 'rate'), {
      ...QUERY,
      sort: 'rate',
      order: 'desc',
      offset: 0,
    });
    assert.deepEqual(nextSort({ ...QUERY, sort: 'rate', order: 'desc' }, 'rate'), {
      ...QUERY,
      sort: 'rate',
      order: 'asc',
    });
    assert.deepEqual(nextSort({ ...QUERY, sort: 'rate' }, 'tag'), {
      ...QUERY,
      sort: 'tag',
      order: 'asc',
    });
  });

  it('draws a sparkline from 0 at the bottom to the largest value at the top', () => {
    assert.equal(sparklinePoints([0, 5, 10], 100, 20), '0,20 50,10 100,0');
    assert.equal(sparklinePoints([0, 0], 10, 4), '0,4 10,4');
    assert.equal(sparklinePoints([], 10, 4), '');
  });
});
