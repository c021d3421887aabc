import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { SegmentEvent } from '../../service/segment-service.ts';
import { ServerMetrics } from './metrics.ts';
import { LINES_PER_STEP, scrape, type PiecewiseMetric } from './scrape.ts';
import { turnsDuring } from '../../../test/support/event-loop.ts';

/** The scrape's bytes as text. */
async function scrapeText(registry: Registry): Promise<string> {
  return (await scrape(registry)).toString('utf8');
}

describe('scrape', () => {
  it('writes what registry.metrics() writes, yielding between metrics', async () => {
    const registry = new Registry();
    new Counter({ name: 'a_total', help: 'A.', labelNames: ['tag'], registers: [registry] }).inc(
      { tag: 'x' },
      3,
    );
    new Gauge({ name: 'b', help: 'B.', registers: [registry] }).set(7);
    const histogram = new Histogram({
      name: 'c_seconds',
      help: 'C.',
      labelNames: ['tag'],
      buckets: [0.1, 1],
      registers: [registry],
    });
    // More samples than one step formats (100), with label values that need escaping.
    for (let i = 0; i < 120; i++) histogram.observe({ tag: `t"${i}\\\n` }, i / 100);
    // Bytes, not code units: a label outside ASCII encodes as UTF-8 as the string would.
    histogram.observe({ tag: 'zäh-🙂' }, 0.5);
    // A callback queued before the scrape runs before it ends: the scrape is not one blocking
    // step (registry.metrics() resolves in microtasks only, so it would run after).
    let scraped = false;
    let ranDuringScrape = false;
    setImmediate(() => {
      ranDuringScrape = !scraped;
    });
    const text = await scrapeText(registry);
    scraped = true;
    assert.equal(ranDuringScrape, true);
    assert.equal(text, await registry.metrics());
    assert.match(text, /^a_total\{tag="x"\} 3$/m);
  });
});

describe('scrape with ServerMetrics', () => {
  it('reads the load histogram in bounded pieces, yielding, text unchanged', async () => {
    const metrics = new ServerMetrics({ maxTagSeries: 500 });
    for (let i = 0; i < 500; i++)
      metrics.segmentEvent({
        type: 'load',
        tag: `tag-${i}`,
        ms: i % 40,
        range: { start: 1n, end: 2n },
      } as SegmentEvent);
    const expected = await metrics.registry.metrics();
    const histogram = metrics.registry.getSingleMetric(
      'idmint_segment_range_load_seconds',
    ) as unknown as PiecewiseMetric & { get(): unknown };
    let wholeReads = 0;
    const sizes: number[] = [];
    const get = histogram.get.bind(histogram);
    const pieces = histogram.pieces.bind(histogram);
    histogram.get = () => {
      wholeReads++;
      return get();
    };
    histogram.pieces = function* (maxValues) {
      for (const piece of pieces(maxValues)) {
        sizes.push(piece.values.length);
        yield piece;
      }
    };
    const { value: text, turns } = await turnsDuring(() => scrapeText(metrics.registry));
    // The process metrics move between two reads; the histogram's lines do not.
    const histogramLines = (all: string) =>
      all.split('\n').filter((line) => line.includes('segment_range_load_seconds'));
    assert.equal(histogramLines(text).length, 2 + 500 * 16);
    assert.deepEqual(histogramLines(text), histogramLines(expected));
    const helpLines = (all: string) => all.split('\n').filter((line) => line.startsWith('# HELP'));
    assert.deepEqual(helpLines(text), helpLines(expected), 'every metric, in the same order');
    assert.equal(wholeReads, 0, 'the histogram is never read whole');
    // 500 series of 16 samples (13 bounds, +Inf, sum, count): 6 series a piece.
    assert.equal(sizes.length, Math.ceil(500 / 6));
    assert.ok(
      sizes.every((size) => size > 0 && size <= LINES_PER_STEP),
      `piece sizes ${sizes.join(',')}`,
    );
    assert.ok(
      turns >= sizes.length,
      `the event loop turned ${turns} times for ${sizes.length} pieces`,
    );
  });
});
