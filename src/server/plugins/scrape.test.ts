import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { scrapeText } from './scrape.ts';

describe('scrapeText', () => {
  it('writes what registry.metrics() writes, and lets the event loop run between metrics', async () => {
    const registry = new Registry();
    new Counter({ name: 'a_total', help: 'A.', labelNames: ['tag'], registers: [registry] }).inc({ tag: 'x' }, 3);
    new Gauge({ name: 'b', help: 'B.', registers: [registry] }).set(7);
    const histogram = new Histogram({ name: 'c_seconds', help: 'C.', labelNames: ['tag'], buckets: [0.1, 1], registers: [registry] });
    // More samples than one step formats (200), with label values that need escaping.
    for (let i = 0; i < 120; i++) histogram.observe({ tag: `t"${i}\\\n` }, i / 100);
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
