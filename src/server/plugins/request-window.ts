import type { RequestHistogramView } from './metrics.ts';

/** One route's requests over the window. */
export interface RouteActivity {
  /** The route's path pattern, as in the metrics' `route` label (`unmatched` for 404s). */
  readonly route: string;
  /** Requests answered since the server started. */
  readonly requests: number;
  /** Mean rate over the window. */
  readonly requestsPerSecond: number;
  /** 99th percentile of the time to answer over the window, in ms; null without requests in it. */
  readonly p99Ms: number | null;
}

/** Requests over the last minute: per route, and in all per sample (for a chart). */
export interface RequestActivity {
  readonly routes: RouteActivity[];
  readonly requestsPerSecond: number;
  /** Per-sample rates of all routes together, oldest first. */
  readonly rates: number[];
}

interface Snapshot {
  readonly at: number;
  /** Per route: per-bucket counts (all statuses added), the last slot the total. */
  readonly routes: Map<string, Float64Array>;
  readonly total: number;
}

/**
 * Requests per second and p99 latency by route over a sliding window, from the metrics'
 * cumulative request histogram: snapshots a second apart, and the difference between the newest
 * and the oldest (as Prometheus's `rate` and `histogram_quantile` over a range would). Memory:
 * `samples + 1` snapshots of a few numbers per route; routes are the server's, a bounded set.
 */
export class RequestWindow {
  readonly #source: () => RequestHistogramView;
  readonly #samples: number;
  readonly #snapshots: Snapshot[] = [];

  constructor(source: () => RequestHistogramView, samples = 60) {
    this.#source = source;
    this.#samples = samples;
  }

  /** Takes a snapshot at `nowMs` (monotonic ms); one no later than the previous is ignored. */
  sample(nowMs: number): void {
    const last = this.#snapshots.at(-1);
    if (last !== undefined && !(nowMs > last.at)) return;
    const view = this.#source();
    const routes = new Map<string, Float64Array>();
    let total = 0;
    for (const series of view.series) {
      const route = series.labels['route'] ?? '';
      let sums = routes.get(route);
      if (sums === undefined) {
        sums = new Float64Array(view.bounds.length + 2);
        routes.set(route, sums);
      }
      for (let i = 0; i < series.counts.length; i++)
        sums[i] = (sums[i] as number) + (series.counts[i] as number);
      sums[sums.length - 1] = (sums[sums.length - 1] as number) + series.count;
      total += series.count;
    }
    this.#snapshots.push({ at: nowMs, routes, total });
    if (this.#snapshots.length > this.#samples + 1) this.#snapshots.shift();
  }

  /** The window as it stands: empty rates until two samples were taken. */
  activity(): RequestActivity {
    const snapshots = this.#snapshots;
    const newest = snapshots.at(-1);
    const oldest = snapshots[0];
    if (newest === undefined || oldest === undefined)
      return { routes: [], requestsPerSecond: 0, rates: [] };
    const span = (newest.at - oldest.at) / 1000;
    const bounds = this.#source().bounds;
    const routes: RouteActivity[] = [];
    for (const [route, now] of newest.routes) {
      const before = oldest.routes.get(route);
      const requests = now[now.length - 1] as number;
      const inWindow = Math.max(
        0,
        requests - (before === undefined ? 0 : (before[before.length - 1] as number)),
      );
      const buckets = Array.from({ length: bounds.length + 1 }, (_, i) =>
        Math.max(0, (now[i] as number) - (before === undefined ? 0 : (before[i] as number))),
      );
      routes.push({
        route,
        requests,
        requestsPerSecond: span > 0 ? inWindow / span : 0,
        p99Ms: quantileMs(0.99, bounds, buckets),
      });
    }
    routes.sort(
      (a, b) => b.requestsPerSecond - a.requestsPerSecond || (a.route < b.route ? -1 : 1),
    );
    const rates: number[] = [];
    for (let i = 1; i < snapshots.length; i++) {
      const a = snapshots[i - 1] as Snapshot;
      const b = snapshots[i] as Snapshot;
      rates.push(Math.max(0, b.total - a.total) / ((b.at - a.at) / 1000));
    }
    return {
      routes,
      requestsPerSecond: span > 0 ? Math.max(0, newest.total - oldest.total) / span : 0,
      rates,
    };
  }
}

/**
 * The `q` quantile of per-bucket counts, in ms, interpolated linearly within its bucket as
 * Prometheus's histogram_quantile does (the lowest bucket from 0; a quantile in the bucket above
 * every bound is that highest bound). Null without observations.
 */
export function quantileMs(
  q: number,
  bounds: readonly number[],
  buckets: readonly number[],
): number | null {
  const total = buckets.reduce((sum, count) => sum + count, 0);
  if (total === 0) return null;
  const rank = q * total;
  let cumulative = 0;
  for (let i = 0; i < buckets.length; i++) {
    const count = buckets[i] as number;
    if (cumulative + count >= rank && count > 0) {
      if (i >= bounds.length) return (bounds.at(-1) as number) * 1000;
      const lower = i === 0 ? 0 : (bounds[i - 1] as number);
      const upper = bounds[i] as number;
      return (lower + ((upper - lower) * (rank - cumulative)) / count) * 1000;
    }
    cumulative += count;
  }
  return (bounds.at(-1) as number) * 1000;
}
