// Pure formatting and query helpers for the dashboard: no DOM, so Node's test runner checks them
// (test/dashboard-format.test.ts).

import type { TagQuery } from './status-types.ts';

const DASH = '—';

/** A count, compact past ten thousand: 1,234 / 12.3k / 4.56M / 7.8G. */
export function formatCount(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return DASH;
  const abs = Math.abs(value);
  if (abs < 10_000) return Math.round(value).toLocaleString('en-US');
  for (const [unit, size] of [
    ['G', 1e9],
    ['M', 1e6],
    ['k', 1e3],
  ] as const) {
    if (abs >= size) return `${trim((value / size).toPrecision(3))}${unit}`;
  }
  return String(value);
}

/** A rate per second: 0, 0.5, 12.3, 1.2k ... with the unit, or a dash when unknown. */
export function formatRate(value: number | null | undefined, unit = '/s'): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return DASH;
  if (value === 0) return `0${unit}`;
  if (Math.abs(value) < 10) return `${trim(value.toFixed(value < 1 ? 2 : 1))}${unit}`;
  return `${formatCount(value)}${unit}`;
}

/** A duration in ms: 0.26 ms, 12 ms, 1.2 s, 3 min. */
export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return DASH;
  const abs = Math.abs(ms);
  if (abs < 1) return `${trim(ms.toFixed(2))} ms`;
  if (abs < 100) return `${trim(ms.toFixed(1))} ms`;
  if (abs < 1000) return `${Math.round(ms)} ms`;
  if (abs < 60_000) return `${trim((ms / 1000).toFixed(1))} s`;
  return formatDuration(ms / 1000);
}

/** A longer span in seconds: 42 s, 5 min 03 s, 2 h 07 min, 3 d 4 h. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return DASH;
  const s = Math.max(0, Math.floor(seconds));
  const days = Math.floor(s / 86_400);
  const hours = Math.floor((s % 86_400) / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  const secs = s % 60;
  if (days > 0) return `${days} d ${hours} h`;
  if (hours > 0) return `${hours} h ${String(minutes).padStart(2, '0')} min`;
  if (minutes > 0) return `${minutes} min ${String(secs).padStart(2, '0')} s`;
  return `${secs} s`;
}

/** How far `position` is through `[start, end)`, 0 to 1 (decimal strings: IDs pass 2^53). */
export function rangeProgress(range: {
  readonly start: string;
  readonly end: string;
  readonly position: string;
}): number {
  const start = BigInt(range.start);
  const size = BigInt(range.end) - start;
  if (size <= 0n) return 1;
  // Per mille in bigint, then to a number: exact whatever the IDs' size.
  return Number(((BigInt(range.position) - start) * 1000n) / size) / 1000;
}

/** The query string for GET /v1/status, leaving out what is the server's default. */
export function statusQueryString(query: TagQuery): string {
  const params = new URLSearchParams();
  if (query.q !== '') params.set('q', query.q);
  if (query.sort !== 'tag') params.set('sort', query.sort);
  if (query.order !== 'asc') params.set('order', query.order);
  if (query.offset !== 0) params.set('offset', String(query.offset));
  if (query.limit !== 50) params.set('limit', String(query.limit));
  if (query.tags !== 'all') params.set('tags', query.tags);
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

/**
 * A sort column clicked: the same column flips its order, a new one starts with its natural order.
 */
export function nextSort(query: TagQuery, sort: TagQuery['sort']): TagQuery {
  if (query.sort === sort)
    return { ...query, order: query.order === 'asc' ? 'desc' : 'asc', offset: 0 };
  // Names read A to Z; figures are most interesting largest first.
  return { ...query, sort, order: sort === 'tag' ? 'asc' : 'desc', offset: 0 };
}

/** The points of an SVG polyline drawing `values` in a `width` x `height` box (0 at the bottom). */
export function sparklinePoints(values: readonly number[], width: number, height: number): string {
  if (values.length === 0) return '';
  const max = Math.max(...values, 0);
  const step = values.length === 1 ? 0 : width / (values.length - 1);
  return values
    .map((value, i) => {
      const y = max === 0 ? height : height - (value / max) * height;
      return `${round(i * step)},${round(y)}`;
    })
    .join(' ');
}

/** The message to show for a failed call: the server's own words, prefixed with its code. */
export function errorText(error: { readonly code: string; readonly message: string }): string {
  return `${error.code}: ${error.message}`;
}

function trim(text: string): string {
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}
