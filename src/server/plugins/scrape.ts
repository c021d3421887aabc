import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { MetricObjectWithValues, MetricValue, Registry } from 'prom-client';

/** Samples formatted between two yields: a few hundred lines, well under a millisecond. */
const LINES_PER_STEP = 200;

/** prom-client's formatter of one metric, which its typings leave out; reused so the text is exactly its own. */
type Formatter = { getMetricsAsString(metric: { get(): MetricObjectWithValues<MetricValue<string>> }): Promise<string> };

/**
 * The registry's text, as `registry.metrics()` writes it, built a few hundred samples at a time
 * with the event loop free in between: prom-client formats every metric in one go, so a scrape
 * blocked ID requests for as long as the whole text took (2.35 s with 100,000 tags, before the
 * tag label was bounded; still 10 to 20 ms with 100 tags in use, most of it the per-tag load
 * histogram). Now a scrape blocks for one step at a time.
 */
export async function scrapeText(registry: Registry): Promise<string> {
  const format = registry as unknown as Formatter;
  const parts: string[] = [];
  // Every registered metric has get() (prom-client's own and ServerMetrics' histograms); the
  // typings list the registry's entries as plain metric objects.
  for (const metric of registry.getMetricsAsArray() as unknown as { get(): MetricObjectWithValues<MetricValue<string>> | Promise<MetricObjectWithValues<MetricValue<string>>> }[]) {
    const data = await metric.get();
    const values = data.values;
    let text = '';
    for (let from = 0; from === 0 || from < values.length; from += LINES_PER_STEP) {
      const chunk = values.slice(from, from + LINES_PER_STEP);
      const part = await format.getMetricsAsString({ get: () => ({ ...data, values: chunk }) });
      // Every chunk comes with the metric's HELP and TYPE lines; only the first keeps them.
      text += from === 0 ? part : part.slice(nthIndex(part, '\n', 2));
      await yieldToLoop();
    }
    parts.push(text);
  }
  return `${parts.join('\n\n')}\n`;
}

/** Index of the n-th occurrence of `char` in `text` (n >= 1). */
function nthIndex(text: string, char: string, n: number): number {
  let at = -1;
  for (let i = 0; i < n; i++) at = text.indexOf(char, at + 1);
  return at;
}
