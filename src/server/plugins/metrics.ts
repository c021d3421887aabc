import type { IssuerStats } from '../../service/issuer-holding.ts';
import type { FastifyInstance, FastifyReply, onResponseHookHandler } from 'fastify';
import { Counter, Gauge, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import type { SegmentEvent, SegmentServiceStats } from '../../service/segment-service.ts';
import { ID_FAMILIES, type IdFamily } from '../../service/id-families.ts';
import type { SnowflakeWorkerState } from '../../service/snowflake-worker.ts';
import { OTHER_TAG, TagLabels, sumByLabel } from './tag-labels.ts';

/**
 * IDs handed out, counted on the hot path as plain numbers: a Map lookup and an addition per
 * request, where a labelled prom-client counter would hash its labels every time. The registry
 * reads the totals when scraped.
 */
export class IssuedCounts {
  /** Snowflake IDs, plain and opaque. */
  snowflake = 0;
  readonly #segment = new Map<string, number>();
  readonly #families = new Map<IdFamily, number>();

  addSegment(tag: string, count: number): void {
    this.#segment.set(tag, (this.#segment.get(tag) ?? 0) + count);
  }

  /** UUIDs, ULIDs and ObjectIds made at /v1/{family}. */
  addFamily(family: IdFamily, count: number): void {
    this.#families.set(family, (this.#families.get(family) ?? 0) + count);
  }

  segmentTotals(): ReadonlyMap<string, number> {
    return this.#segment;
  }

  /** Only the families that issued at least one ID. */
  familyTotals(): ReadonlyMap<IdFamily, number> {
    return this.#families;
  }
}

/** What the metrics read at scrape time; each part is absent when its mode is off. */
export interface MetricsSources {
  readonly snowflake?: { state(): SnowflakeWorkerState };
  readonly segments?: { activeStats(): SegmentServiceStats };
  /** The cluster-ordered tags' issuers as this node sees them (SegmentService.issuers). */
  readonly issuers?: { stats(): readonly IssuerStats[] };
}

/**
 * Request latency buckets (s): ID requests take tens of microseconds, so the low end is where the
 * information is.
 */
const REQUEST_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 2.5,
];
/** The `route` label of requests that matched no route. */
export const UNMATCHED_ROUTE = 'unmatched';
/**
 * Range load buckets (s): one database round trip, usually a few ms; the store times out at
 * seconds.
 */
const LOAD_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Default of `metrics.maxTagSeries`: tags with series of their own. */
export const DEFAULT_MAX_TAG_SERIES = 500;

/** Options of {@link ServerMetrics}. */
export interface ServerMetricsOptions {
  /** Metric name prefix. Default `idmint_`. */
  readonly prefix?: string;
  /**
   * Tags in use with a `tag` label of their own; the rest are summed under `_other`. Default 500.
   */
  readonly maxTagSeries?: number;
}

/**
 * The server's Prometheus metrics, in a registry of its own (never prom-client's global one), so
 * two servers in one process each report their own.
 */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly issued = new IssuedCounts();
  readonly #requests: LatencyHistogram;
  readonly #loads: LatencyHistogram;
  readonly #loadSeries = new Map<string, LatencySeries>();
  readonly #unmatched: RouteSeries;
  readonly #prefix: string;
  readonly #tags: TagLabels;

  #sources: MetricsSources = {};
  /** New histories of the segment store this node fenced, and all it found (fenced or not). */
  #storeFences = 0;
  #storeHistoryChanges = 0;

  constructor(options: ServerMetricsOptions = {}) {
    const prefix = options.prefix ?? 'idmint_';
    this.#prefix = prefix;
    const tags = new TagLabels(options.maxTagSeries ?? DEFAULT_MAX_TAG_SERIES);
    this.#tags = tags;
    collectDefaultMetrics({ register: this.registry, prefix });
    // prom-client's sums of the labelled active-handle/request/resource gauges end in `_total`,
    // a suffix reserved for counters (`promtool check metrics` refuses them); the labelled gauges
    // stay, and sum() over them gives the same figure.
    for (const name of [
      'nodejs_active_handles_total',
      'nodejs_active_requests_total',
      'nodejs_active_resources_total',
    ]) {
      this.registry.removeSingleMetric(`${prefix}${name}`);
    }
    const issued = this.issued;
    const hasSnowflake = () => this.#sources.snowflake !== undefined;
    const issuedHelp =
      'IDs handed out, by mode (segment, snowflake, or an ID family: ' +
      `${ID_FAMILIES.join(', ')}) and (segment mode) tag.`;
    this.registry.registerMetric(
      new ComputedMetric(`${prefix}ids_issued_total`, issuedHelp, 'counter', function* () {
        if (hasSnowflake()) yield [{ mode: 'snowflake', tag: '' }, issued.snowflake];
        for (const [tag, total] of sumByLabel(
          issued.segmentTotals(),
          tags,
          ([name]) => name,
          ([, n]) => n,
        ))
          yield [{ mode: 'segment', tag }, total];
        for (const [family, total] of issued.familyTotals())
          yield [{ mode: family, tag: '' }, total];
      }) as unknown as Metric,
    );
    this.#requests = new LatencyHistogram(
      `${prefix}http_request_duration_seconds`,
      'Time from request to response, by route, method and status code.',
      REQUEST_BUCKETS,
    );
    this.#unmatched = new RouteSeries(this.#requests, UNMATCHED_ROUTE);
    this.#loads = new LatencyHistogram(
      `${prefix}segment_range_load_seconds`,
      'Time to allocate a range from the store, by tag (successful loads).',
      LOAD_BUCKETS,
    );
    this.registry.registerMetric(this.#requests as unknown as Metric);
    this.registry.registerMetric(this.#loads as unknown as Metric);
  }

  /**
   * Records a segment service event (pass as its `onEvent`): range load latency by tag, and the
   * store's new histories.
   */
  segmentEvent(event: SegmentEvent): void {
    if (event.type === 'history') {
      this.#storeHistoryChanges++;
      if (event.action === 'fenced') this.#storeFences++;
      return;
    }
    if (event.type !== 'load' || event.range === undefined) return;
    const label = this.#tags.label(event.tag);
    let series = this.#loadSeries.get(label);
    if (series === undefined) {
      series = this.#loads.series({ tag: label });
      this.#loadSeries.set(label, series);
    }
    series.observe(event.ms / 1000);
  }

  /** Adds the gauges and counters that read the ID sources when scraped. Call once. */
  watch(sources: MetricsSources): void {
    this.#sources = sources;
    const prefix = this.#prefix;
    const registers = [this.registry];
    /** A counter whose value is read, whole, at each scrape. */
    const readCounter = (name: string, help: string, read: () => number) =>
      new Counter({
        name: `${prefix}${name}`,
        help,
        registers,
        collect() {
          this.reset();
          this.inc(read());
        },
      });
    const snowflake = sources.snowflake;
    if (snowflake !== undefined) {
      new Gauge({
        name: `${prefix}snowflake_lease_held`,
        help: '1 while this node holds its worker-ID lease and may issue snowflake IDs, else 0.',
        labelNames: ['worker_id'],
        registers,
        collect() {
          const state = snowflake.state();
          this.reset();
          this.set({ worker_id: String(state.workerId) }, state.ready ? 1 : 0);
        },
      });
      readCounter(
        'snowflake_clock_rollbacks_total',
        'Times the generator found the clock behind a time it had already used.',
        () => snowflake.state().clockRollbacks,
      );
      readCounter(
        'snowflake_lease_renew_failures_total',
        'Lease renewals that failed (the node is fenced if they go on past the lease).',
        () => snowflake.state().renewFailuresTotal,
      );
      readCounter(
        'snowflake_lease_losses_total',
        'Leases lost (expired or taken over); a new worker ID is acquired each time.',
        () => snowflake.state().leaseLosses,
      );
      readCounter(
        'snowflake_fenced_waits_total',
        'Requests that found the generator fenced and waited for a renewal to confirm the ' +
          'lease (after a stall of the process) instead of answering LEASE_LOST at once.',
        () => snowflake.state().fencedWaits,
      );
      new Gauge({
        name: `${prefix}snowflake_peer_clock_offset_seconds`,
        help:
          "This node's clock minus the mean of its live peers' clocks, measured at start-up; " +
          'no sample when there was nothing to compare.',
        registers,
        collect() {
          const peer = snowflake.state().peerClock;
          this.reset();
          if (peer !== null && peer.offsetMs !== null) this.set(peer.offsetMs / 1000);
        },
      });
    }
    const issuers = sources.issuers;
    if (issuers !== undefined) {
      // Few tags are cluster-ordered (each costs a lease): one series per tag, no cap needed.
      const ordered = (name: string, help: string, read: (s: IssuerStats) => number) =>
        new Gauge({
          name: `${prefix}${name}`,
          help,
          labelNames: ['tag'],
          registers,
          collect() {
            this.reset();
            for (const entry of issuers.stats()) this.set({ tag: entry.tag }, read(entry));
          },
        });
      ordered(
        'segment_issuer_self',
        '1 while this node issues the cluster-ordered tag (holds its issuer lease), else 0.',
        (s) => (s.issuer === 'self' ? 1 : 0),
      );
      ordered(
        'segment_issuer_epoch',
        "The latest epoch of the cluster-ordered tag's issuer lease this node has seen.",
        (s) => (s.epoch === null ? 0 : Number(s.epoch)),
      );
      ordered(
        'segment_issuer_handovers',
        'Times the issuer of the cluster-ordered tag changed, as seen from this node.',
        (s) => s.handovers,
      );
      ordered(
        'segment_issuer_forwarded',
        'Requests for the cluster-ordered tag this node forwarded to its issuer.',
        (s) => s.forwarded,
      );
    }
    const segments = sources.segments;
    if (segments === undefined) return;
    type TagStats = SegmentServiceStats['tags'][number];
    const tags = this.#tags;
    // The first per-tag metric collected in a scrape takes the snapshot the others read. Only
    // tags in use (a range loaded or tried): a tag never drawn from costs no series.
    let snapshot: SegmentServiceStats = segments.activeStats();
    let inUse: TagStats[] = [];
    const take = () => {
      snapshot = segments.activeStats();
      inUse = snapshot.tags.filter((tag) => tag.loads + tag.loadFailures > 0);
    };
    // A setting (a step) summed over tags means nothing: such gauges have no `_other` series.
    const perTag = (
      type: 'gauge' | 'counter',
      name: string,
      help: string,
      read: (tag: TagStats) => number,
      options: { fresh?: boolean; setting?: boolean } = {},
    ) =>
      this.registry.registerMetric(
        new ComputedMetric(`${prefix}${name}`, help, type, function* () {
          if (options.fresh === true) take();
          for (const [tag, value] of sumByLabel(inUse, tags, (t) => t.tag, read)) {
            if (options.setting !== true || tag !== OTHER_TAG) yield [{ tag }, value];
          }
        }) as unknown as Metric,
      );
    const gauge = (
      name: string,
      help: string,
      read: (tag: TagStats) => number,
      options: { fresh?: boolean; setting?: boolean } = {},
    ) => perTag('gauge', name, help, read, options);
    const counter = (name: string, help: string, read: (tag: TagStats) => number) =>
      perTag('counter', name, help, read);
    gauge('segment_step', 'Step of the latest range loaded (the dynamic step).', (t) => t.step, {
      fresh: true,
      setting: true,
    });
    gauge(
      'segment_tag_step',
      "The tag's configured step: the dynamic step's floor.",
      (t) => t.tagStep,
      { setting: true },
    );
    gauge(
      'segment_remaining_ids',
      'IDs buffered: the rest of the current range plus the next one.',
      (t) => t.remaining,
    );
    counter('segment_range_loads_total', 'Ranges loaded from the store.', (t) => t.loads);
    counter(
      'segment_range_load_failures_total',
      'Range loads that failed or were abandoned after the timeout.',
      (t) => t.loadFailures,
    );
    counter(
      'segment_heals_total',
      'Ranges refused for starting below IDs this node had already loaded (the store went ' +
        'back further than fenced); ' +
        'max_id was raised past them.',
      (t) => t.heals,
    );
    readCounter(
      'segment_store_fences_total',
      "New histories of the store's database (a promoted replica, a restarted Redis, a " +
        'first sight) ' +
        'this node fenced: ' +
        'every tag raised before any ID was issued from it.',
      () => this.#storeFences,
    );
    readCounter(
      'segment_store_history_changes_total',
      'New histories of the store this node found, fenced by itself or already by another node.',
      () => this.#storeHistoryChanges,
    );
    // Counters of the whole service, read from the scrape's snapshot.
    readCounter(
      'segment_tag_refresh_failures_total',
      'Times re-reading the tag list from the store failed.',
      () => snapshot.tagRefreshFailures,
    );
    readCounter(
      'segment_tag_rows_read_total',
      'Tag records the tag refreshes read from the store: the changed tags, and every tag ' +
        'on a full read.',
      () => snapshot.tagRowsRead,
    );
  }

  /**
   * The request histogram as it stands: its bucket bounds (s) and every series (route, status,
   * per-bucket counts). Live objects, to read and never change: the dashboard samples them.
   */
  requestHistogram(): RequestHistogramView {
    return this.#requests.view();
  }

  /**
   * Times a request that matched no route (a 404 from the not-found handler), under the route
   * label `unmatched`: routes are all paths, so it cannot clash with one. Call once the answer is
   * sent.
   */
  observeUnmatched(reply: FastifyReply): void {
    this.#unmatched.observe(reply.request.method, reply.statusCode, reply.elapsedTime / 1000);
  }

  /**
   * Times every route's requests. Each route registration gets its own hook with its path bound
   * once and its series cached by method and status, so a response costs two Map lookups and a
   * short bucket search. This is the one per-request cost metrics add (about 3% of a single-ID
   * route's throughput, measured): Fastify follows a response to its end only for routes with an
   * onResponse hook or a logger. Must run before the routes are registered.
   */
  instrument(app: FastifyInstance): void {
    const requests = this.#requests;
    app.addHook('onRoute', (route) => {
      // A path may be registered more than once (Leaf's routes: GET, then the other methods, then
      // OPTIONS, as three routes); the histogram gives each label set one series whichever asks.
      const series = new RouteSeries(requests, route.url);
      const hook: onResponseHookHandler = (request, reply, done) => {
        series.observe(request.method, reply.statusCode, reply.elapsedTime / 1000);
        done();
      };
      route.onResponse =
        route.onResponse === undefined ? [hook] : [...[route.onResponse].flat(), hook];
    });
  }
}

/**
 * One route's request series, by method and status, each taken from the histogram on first use
 * and kept, so a request builds no label object. The `method` label is what Node's HTTP parser
 * accepted (a fixed list of about 35), so the series of a route stay bounded.
 */
class RouteSeries {
  readonly #histogram: LatencyHistogram;
  readonly #route: string;
  readonly #byMethod = new Map<string, Map<number, LatencySeries>>();

  constructor(histogram: LatencyHistogram, route: string) {
    this.#histogram = histogram;
    this.#route = route;
  }

  observe(method: string, status: number, seconds: number): void {
    let byStatus = this.#byMethod.get(method);
    if (byStatus === undefined) {
      byStatus = new Map();
      this.#byMethod.set(method, byStatus);
    }
    let series = byStatus.get(status);
    if (series === undefined) {
      series = this.#histogram.series({ route: this.#route, method, status: String(status) });
      byStatus.set(status, series);
    }
    series.observe(seconds);
  }
}

/**
 * A read-only look at a latency histogram, for windows over it (see
 * ServerMetrics.requestHistogram).
 */
export interface RequestHistogramView {
  /** Upper bounds of the buckets, in s; counts have one slot more (above every bound). */
  readonly bounds: readonly number[];
  readonly series: readonly {
    readonly labels: Readonly<Record<string, string>>;
    readonly counts: Float64Array;
    readonly count: number;
  }[];
}

/** One label set's counts in a {@link LatencyHistogram}. */
class LatencySeries {
  readonly labels: Readonly<Record<string, string>>;
  readonly #bounds: readonly number[];
  /** Per-bucket (not cumulative) counts; the last slot is above every bound. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(labels: Readonly<Record<string, string>>, bounds: readonly number[]) {
    this.labels = labels;
    this.#bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(seconds: number): void {
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && seconds > (bounds[i] as number)) i++;
    this.counts[i] = (this.counts[i] ?? 0) + 1;
    this.sum += seconds;
    this.count++;
  }
}

/**
 * A gauge or counter whose samples are computed when read, as a prom-client Gauge or Counter with a
 * `collect()` that resets and sets them would hold, and formatted the same by the registry. Those
 * hash the label object on every set()/inc(): with metrics.maxTagSeries tags in use, each per-tag
 * metric is 501 samples a scrape, one step of scrape.ts that prom-client made several times longer.
 */
class ComputedMetric {
  readonly name: string;
  readonly help: string;
  readonly type: 'gauge' | 'counter';
  readonly aggregator = 'sum';
  readonly #samples: () => Iterable<readonly [Record<string, string>, number]>;

  constructor(
    name: string,
    help: string,
    type: 'gauge' | 'counter',
    samples: () => Iterable<readonly [Record<string, string>, number]>,
  ) {
    this.name = name;
    this.help = help;
    this.type = type;
    this.#samples = samples;
  }

  get() {
    const values: { value: number; labels: Record<string, string> }[] = [];
    for (const [labels, value] of this.#samples()) values.push({ value, labels });
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values,
      aggregator: this.aggregator,
    };
  }

  /**
   * Part of prom-client's metric interface (`registry.resetMetrics()`): nothing is kept between
   * reads.
   */
  reset(): void {}
}

/**
 * A Prometheus histogram for the per-request path. prom-client's Histogram hashes its label
 * object on every observation, which cost about a tenth of the single-ID routes' throughput;
 * here the series is looked up once per label set, and an observation is a few comparisons and
 * additions. The registry reads it through the same `get()` shape as its own metrics.
 */
class LatencyHistogram {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #bounds: readonly number[];
  readonly #series: LatencySeries[] = [];
  /** Every series by its label set ({@link labelSetKey}). */
  readonly #byLabels = new Map<string, LatencySeries>();

  constructor(name: string, help: string, bounds: readonly number[]) {
    this.name = name;
    this.help = help;
    this.#bounds = bounds;
  }

  /**
   * The series of this label set, made on the first call: callers keep it, as a lookup here costs
   * a key built from the labels. Two callers asking for one label set share one series, so the
   * scrape never holds a label set twice (Prometheus keeps one of such samples and drops the
   * other, and `promtool check metrics` does not notice).
   */
  series(labels: Readonly<Record<string, string>>): LatencySeries {
    const key = labelSetKey(labels);
    let series = this.#byLabels.get(key);
    if (series === undefined) {
      series = new LatencySeries(labels, this.#bounds);
      this.#byLabels.set(key, series);
      this.#series.push(series);
    }
    return series;
  }

  get() {
    return this.#data(this.#series);
  }

  /**
   * As {@link get}, a few series at a time, each piece built when taken (scrape.ts yields between
   * them): with metrics.maxTagSeries tags loading ranges, the load histogram is 8,000 samples.
   * Series created while a scrape runs are included; each series is read whole, in one piece.
   */
  *pieces(maxValues: number) {
    const perPiece = Math.max(1, Math.floor(maxValues / (this.#bounds.length + 3)));
    let from = 0;
    do {
      yield this.#data(this.#series.slice(from, from + perPiece));
      from += perPiece;
    } while (from < this.#series.length);
  }

  #data(seriesList: readonly LatencySeries[]) {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] =
      [];
    for (const series of seriesList) {
      let cumulative = 0;
      this.#bounds.forEach((bound, i) => {
        cumulative += series.counts[i] ?? 0;
        values.push({
          labels: { ...series.labels, le: bound },
          value: cumulative,
          metricName: `${this.name}_bucket`,
        });
      });
      values.push({
        labels: { ...series.labels, le: '+Inf' },
        value: series.count,
        metricName: `${this.name}_bucket`,
      });
      values.push({
        labels: { ...series.labels },
        value: series.sum,
        metricName: `${this.name}_sum`,
      });
      values.push({
        labels: { ...series.labels },
        value: series.count,
        metricName: `${this.name}_count`,
      });
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values,
      aggregator: this.aggregator,
    };
  }

  view(): RequestHistogramView {
    return { bounds: this.#bounds, series: this.#series };
  }

  /** Part of prom-client's metric interface (`registry.resetMetrics()`). */
  reset(): void {
    for (const series of this.#series) {
      series.counts.fill(0);
      series.sum = 0;
      series.count = 0;
    }
  }
}

/** A label set as one string, whatever the order of its keys. */
function labelSetKey(labels: Readonly<Record<string, string>>): string {
  return Object.keys(labels)
    .sort()
    .map((name) => `${name}\u0000${labels[name]}`)
    .join('\u0001');
}
