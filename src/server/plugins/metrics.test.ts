import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Counter, Gauge, Registry } from 'prom-client';
import type { SegmentTagStats } from '../../core/segment-buffer.ts';
import { idleStats, type SegmentServiceStats } from '../../service/segment-service.ts';
import { ServerMetrics } from './metrics.ts';

/** The lines of one metric (its HELP, TYPE and samples) in a scrape's text. */
function section(text: string, name: string): string[] {
  return text
    .split('\n')
    .filter(
      (line) =>
        line.startsWith(`${name}{`) ||
        line.startsWith(`${name} `) ||
        line.startsWith(`# HELP ${name} `) ||
        line.startsWith(`# TYPE ${name} `),
    );
}

describe('ServerMetrics', () => {
  it('prints computed gauges and counters exactly as prom-client would', async () => {
    // Label values that need escaping, more tags than have series of their own (the rest under
    // _other).
    const tags: SegmentTagStats[] = [];
    for (let i = 0; i < 8; i++)
      tags.push({ ...idleStats(`t"${i}\\\n`, 10), step: 20 + i, remaining: i * 1.5, loads: i + 1 });
    const stats: SegmentServiceStats = {
      tags,
      tagRefreshes: 1,
      fullTagRefreshes: 1,
      tagRefreshFailures: 0,
      tagRowsRead: 8,
      lastTagRefreshAt: 0,
      negativeCacheSize: 0,
      at: 0,
    };
    const metrics = new ServerMetrics({ maxTagSeries: 5 });
    metrics.watch({ segments: { activeStats: () => stats } });
    for (const tag of tags) metrics.issued.addSegment(tag.tag, tag.loads * 7);
    metrics.registry.setDefaultLabels({ process: '2' });
    const text = await metrics.registry.metrics();

    const reference = new Registry();
    reference.setDefaultLabels({ process: '2' });
    const label = (i: number) => (i < 5 ? (tags[i] as SegmentTagStats).tag : '_other');
    const remaining = new Gauge({
      name: 'idmint_segment_remaining_ids',
      help: 'IDs buffered: the rest of the current range plus the next one.',
      labelNames: ['tag'],
      registers: [reference],
    });
    const loads = new Counter({
      name: 'idmint_segment_range_loads_total',
      help: 'Ranges loaded from the store.',
      labelNames: ['tag'],
      registers: [reference],
    });
    const issued = new Counter({
      name: 'idmint_ids_issued_total',
      help:
        'IDs handed out, by mode (segment, snowflake, or an ID family: uuid7, uuid4, ulid, ' +
        'objectid) and (segment mode) tag.',
      labelNames: ['mode', 'tag'],
      registers: [reference],
    });
    tags.forEach((tag, i) => {
      remaining.inc({ tag: label(i) }, tag.remaining);
      loads.inc({ tag: label(i) }, tag.loads);
      issued.inc({ mode: 'segment', tag: label(i) }, tag.loads * 7);
    });
    const expected = await reference.metrics();
    for (const name of [
      'idmint_segment_remaining_ids',
      'idmint_segment_range_loads_total',
      'idmint_ids_issued_total',
    ]) {
      assert.equal(section(text, name).length, 2 + 6, name);
      assert.deepEqual(section(text, name), section(expected, name), name);
    }
  });
});
