import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { MetricObjectWithValues, MetricValue, Registry } from 'prom-client';

/**
 * Samples formatted between two yields. prom-client formats a sample in microseconds (labels
 * escaped one by one), more while the code is cold or the machine busy: 200 histogram samples took
 * 1.5 to 2 ms in a probe on the shared machine, too close to the few ms a step may take.
 */
export const LINES_PER_STEP = 100;

type MetricData = MetricObjectWithValues<MetricValue<string>>;

/**
 * prom-client's formatter of one metric, which its typings leave out; reused so the text is exactly
 * its own.
 */
type Formatter = { getMetricsAsString(metric: { get(): MetricData }): Promise<string> };

/**
 * A metric that hands its samples over a few series at a time, each piece computed only when
 * taken (ServerMetrics' latency histograms): read whole, one histogram with hundreds of tag
 * series was one blocking step of several milliseconds before formatting even began.
 */
export interface PiecewiseMetric {
  /**
   * The metric as `get()` would return it, split into pieces of at most `maxValues` samples
   * (whole series, never a series cut in two, so each series' buckets, sum and count agree);
   * at least one piece, which carries the name, help and type even with no samples.
   */
  pieces(maxValues: number): Iterable<MetricData>;
}

type AnyMetric =
  | { get(): MetricData | Promise<MetricData> }
  | (PiecewiseMetric & { get(): MetricData });

/**
 * The registry's text, as `registry.metrics()` writes it, as UTF-8 bytes a step at a time, with
 * the event loop free between steps: prom-client reads and formats every metric in one go, so a
 * scrape blocked ID requests for as long as the whole text took (2.35 s with 100,000 tags, before
 * the tag label was bounded; still 10 to 20 ms with 100 tags in use, most of it the per-tag load
 * histogram). Now a scrape blocks for one step at a time: reading one metric (prom-client's have a
 * few samples; ServerMetrics' per-tag ones at most metrics.maxTagSeries plus `_other`) or one
 * piece of a histogram, then formatting and encoding at most {@link LINES_PER_STEP} samples.
 *
 * The route sends the chunks as they come (a stream): the text is never one string, which V8
 * would flatten from thousands of parts in one go (about 6 ms for the 800 KB of 500 tags in use,
 * measured alone), nor one 800 KB write.
 */
export async function* scrapeChunks(registry: Registry): AsyncGenerator<Buffer> {
  const format = registry as unknown as Formatter;
  let firstMetric = true;
  // Every registered metric has get() (prom-client's own and ServerMetrics' histograms); the
  // typings list the registry's entries as plain metric objects.
  for (const metric of registry.getMetricsAsArray() as unknown as AnyMetric[]) {
    if (!firstMetric) yield METRIC_SEPARATOR;
    firstMetric = false;
    let first = true;
    for await (const piece of piecesOf(metric)) {
      const part = await format.getMetricsAsString({ get: () => piece });
      // Every piece comes with the metric's HELP and TYPE lines; only the first keeps them.
      yield Buffer.from(first ? part : part.slice(nthIndex(part, '\n', 2)));
      first = false;
      await yieldToLoop();
    }
  }
  yield FINAL_NEWLINE;
}

/** {@link scrapeChunks} joined: the whole text's bytes. */
export async function scrape(registry: Registry): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of scrapeChunks(registry)) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** What `registry.metrics()` puts between two metrics and at the end. */
const METRIC_SEPARATOR = Buffer.from('\n\n');
const FINAL_NEWLINE = Buffer.from('\n');

/**
 * A metric's samples, at most {@link LINES_PER_STEP} at a time; pieces after the first are never
 * empty.
 */
async function* piecesOf(metric: AnyMetric): AsyncGenerator<MetricData> {
  if ('pieces' in metric) {
    yield* metric.pieces(LINES_PER_STEP);
    return;
  }
  const data = await metric.get();
  const values = data.values;
  if (values.length <= LINES_PER_STEP) {
    yield data;
    return;
  }
  for (let from = 0; from < values.length; from += LINES_PER_STEP) {
    yield { ...data, values: values.slice(from, from + LINES_PER_STEP) };
  }
}

/** Index of the n-th occurrence of `char` in `text` (n >= 1). */
function nthIndex(text: string, char: string, n: number): number {
  let at = -1;
  for (let i = 0; i < n; i++) at = text.indexOf(char, at + 1);
  return at;
}
