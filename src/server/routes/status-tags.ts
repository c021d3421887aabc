import type { Selection, Sort } from '../../contract/status.ts';
import type { SegmentTagStats } from '../../core/segment-buffer.ts';
import { idleStats } from '../../service/segment-service.ts';
import { lowerBound, upperBound } from '../../service/sorted-tag-names.ts';

/**
 * One page of `GET /v1/status`'s tag list, at a cost that follows the page asked for rather than
 * the tags that exist. Every known tag is in a name-sorted index kept by the service; a tag nobody
 * has drawn from has nothing loaded, so all such tags share one sort key and keep name order among
 * themselves. Hence:
 *
 * - by name, unfiltered: a binary search (a cursor) or an index (an offset), then `limit` tags;
 * - by a figure: the tags in use sorted by it (proportional to the tags in use), with the idle
 *   tags, in name order, in the place their shared figure puts them;
 * - a search (`q`) or a token limited to some tags: one pass over the names with a string test,
 *   no object per tag (counting the matches needs it);
 * - `tags=in-use`: the tags in use only.
 *
 * Objects are built for the page's tags only.
 */

export interface TagPageQuery {
  /** Lower-case text the name must contain; '' for any. */
  readonly q: string;
  readonly sort: Sort;
  readonly desc: boolean;
  readonly offset: number;
  /**
   * Name-order cursor: the page starts after this tag (before it with `desc`); undefined for none.
   */
  readonly after: string | undefined;
  readonly limit: number;
  readonly tags: Selection;
}

/** What a page reads from the segment service. */
export interface TagSource {
  tagNames(): readonly string[];
  tagStats(tag: string): SegmentTagStats | undefined;
  activeStats(): { readonly tags: readonly SegmentTagStats[] };
  inUse(tag: string): boolean;
  tagCounts(): { readonly known: number; readonly inUse: number };
}

export interface TagPageContext {
  /** The caller's token's tags; undefined when it may see every tag. */
  readonly allows: ((tag: string) => boolean) | undefined;
  /** IDs/s over the last minute, or undefined when not tracked. */
  readonly rate: (tag: string) => number | undefined;
  /** The last load's latency in ms, or undefined before the first. */
  readonly latency: (tag: string) => number | undefined;
}

export interface TagPage {
  /** Tags the caller may see. */
  readonly total: number;
  /** Of those, tags in use. */
  readonly inUse: number;
  /** Tags in the list being paged: visible, in the selection, matching `q`. */
  readonly matched: number;
  readonly tags: readonly SegmentTagStats[];
  /**
   * In name order, the cursor of the next page (this page's last tag) when more tags follow; else
   * null.
   */
  readonly nextAfter: string | null;
}

export function tagPage(source: TagSource, query: TagPageQuery, context: TagPageContext): TagPage {
  const { allows } = context;
  const search = query.q;
  const contains = containsIgnoringCase(search);
  const matches =
    search === ''
      ? allows
      : (tag: string) => (allows === undefined || allows(tag)) && contains(tag);
  const active =
    allows === undefined
      ? source.activeStats().tags
      : source.activeStats().tags.filter((tag) => allows(tag.tag));
  const counts = source.tagCounts();
  const names = source.tagNames();
  const total = allows === undefined ? counts.known : count(names, allows);
  const key = sortKey(query.sort, context);
  if (query.tags === 'in-use') {
    const listed = matches === undefined ? [...active] : active.filter((tag) => matches(tag.tag));
    listed.sort(query.sort === 'tag' ? byName : byKey(key, query.desc));
    if (query.sort !== 'tag')
      return {
        total,
        inUse: active.length,
        matched: listed.length,
        tags: listed.slice(query.offset, query.offset + query.limit),
        nextAfter: null,
      };
    const page = namePage(
      listed.map((tag) => tag.tag),
      undefined,
      query,
    );
    const statsOf = new Map(listed.map((tag) => [tag.tag, tag]));
    return {
      total,
      inUse: active.length,
      matched: page.matched,
      tags: page.tags.map((tag) => statsOf.get(tag) as SegmentTagStats),
      nextAfter: page.nextAfter,
    };
  }
  const statsOf = (tag: string) => source.tagStats(tag) as SegmentTagStats;
  if (query.sort === 'tag') {
    const page = namePage(names, matches, query);
    return {
      total,
      inUse: active.length,
      matched: page.matched,
      tags: page.tags.map(statsOf),
      nextAfter: page.nextAfter,
    };
  }
  return {
    total,
    inUse: active.length,
    ...byFigure(source, names, active, matches, key, query, total),
    nextAfter: null,
  };
}

/**
 * A test that a tag name contains `search` (lower case) in any case. An ASCII search is a regular
 * expression with the `i` flag: no lower-cased copy of every name (100,000 names: about 1.2 ms
 * instead of 3.6, and no 6 MB of garbage per search). It differs from lower-casing only for the
 * two characters outside ASCII whose lower case is ASCII (U+0130 and the Kelvin sign U+212A).
 */
function containsIgnoringCase(search: string): (tag: string) => boolean {
  if (/^[\x20-\x7e]*$/.test(search)) {
    const pattern = new RegExp(search.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
    return (tag) => pattern.test(tag);
  }
  return (tag) => tag.toLowerCase().includes(search);
}

/** Names in `names` (sorted) accepted by `accept`, counted in one pass. */
function count(names: readonly string[], accept: (tag: string) => boolean): number {
  let n = 0;
  for (const tag of names) if (accept(tag)) n++;
  return n;
}

/** A page of `names` (sorted ascending) in name order, ascending or descending. */
function namePage(
  names: readonly string[],
  accept: ((tag: string) => boolean) | undefined,
  query: TagPageQuery,
): { matched: number; tags: string[]; nextAfter: string | null } {
  const n = names.length;
  const at = (position: number) => names[query.desc ? n - 1 - position : position] as string;
  const tags: string[] = [];
  let more = false;
  let matched: number;
  if (accept === undefined) {
    matched = n;
    // Positions in the view (ascending or descending) where the page starts.
    let start = query.offset;
    if (query.after !== undefined)
      start = query.desc ? n - lowerBound(names, query.after) : upperBound(names, query.after);
    for (let position = start; position < n && tags.length < query.limit; position++)
      tags.push(at(position));
    more = start + tags.length < n;
  } else {
    // Counting the matches needs every name; only the page's are kept.
    matched = 0;
    let skipped = 0;
    const after = query.after;
    for (let position = 0; position < n; position++) {
      const tag = at(position);
      if (!accept(tag)) continue;
      matched++;
      if (after !== undefined && (query.desc ? tag >= after : tag <= after)) continue;
      if (skipped < query.offset) skipped++;
      else if (tags.length < query.limit) tags.push(tag);
      else more = true;
    }
  }
  return { matched, tags, nextAfter: more ? (tags.at(-1) ?? null) : null };
}

/**
 * A page sorted by a figure. Every idle tag has the same figure (nothing loaded), so the order is:
 * tags in use whose figure sorts before it, then the idle tags and the tags in use with the same
 * figure, by name (the tie-break), then the tags in use whose figure sorts after it. Only the tags
 * in use are sorted; the middle run is read from the name index, from its start to the page's end.
 */
function byFigure(
  source: TagSource,
  names: readonly string[],
  active: readonly SegmentTagStats[],
  matches: ((tag: string) => boolean) | undefined,
  key: (tag: SegmentTagStats) => number,
  query: TagPageQuery,
  total: number,
): { matched: number; tags: SegmentTagStats[] } {
  const sign = query.desc ? -1 : 1;
  const idleKey = key(idleStats('', 0));
  const listed = matches === undefined ? active : active.filter((tag) => matches(tag.tag));
  const before: SegmentTagStats[] = [];
  const after: SegmentTagStats[] = [];
  const tied = new Set<string>();
  for (const tag of listed) {
    const side = sign * (key(tag) - idleKey);
    if (side < 0) before.push(tag);
    else if (side > 0) after.push(tag);
    else tied.add(tag.tag);
  }
  before.sort(byKey(key, query.desc));
  after.sort(byKey(key, query.desc));
  // Every listed tag is in one of the three runs: the middle run is what the others leave.
  const matchedAll = matches === undefined ? total : count(names, matches);
  const middle = matchedAll - before.length - after.length;
  const end = Math.min(query.offset + query.limit, matchedAll);
  const tags: SegmentTagStats[] = [];
  for (let position = query.offset; position < Math.min(end, before.length); position++)
    tags.push(before[position] as SegmentTagStats);
  if (end > before.length && query.offset < before.length + middle) {
    let position = before.length;
    for (const tag of names) {
      if (position >= end) break;
      if ((source.inUse(tag) && !tied.has(tag)) || (matches !== undefined && !matches(tag)))
        continue;
      if (position >= query.offset) tags.push(source.tagStats(tag) as SegmentTagStats);
      position++;
    }
  }
  for (let position = Math.max(query.offset, before.length + middle); position < end; position++)
    tags.push(after[position - before.length - middle] as SegmentTagStats);
  return { matched: matchedAll, tags };
}

function byName(a: SegmentTagStats, b: SegmentTagStats): number {
  return a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0;
}

/** By figure, ties by name ascending in either order. */
function byKey(
  key: (tag: SegmentTagStats) => number,
  desc: boolean,
): (a: SegmentTagStats, b: SegmentTagStats) => number {
  const sign = desc ? -1 : 1;
  return (a, b) => sign * (key(a) - key(b)) || byName(a, b);
}

/** A number to sort tags by; rate and latency are -1 where there is none (idle tags). */
function sortKey(sort: Sort, context: TagPageContext): (tag: SegmentTagStats) => number {
  switch (sort) {
    case 'fill':
      return (tag) => fill(tag);
    case 'remaining':
      return (tag) => tag.remaining;
    case 'rate':
      return (tag) => context.rate(tag.tag) ?? -1;
    case 'step':
      return (tag) => tag.step;
    case 'latency':
      return (tag) => context.latency(tag.tag) ?? -1;
    case 'failures':
      return (tag) => tag.loadFailures;
    case 'tag':
      return () => 0;
  }
}

/**
 * Buffered IDs over what both buffers hold when full (the current range's size and the next's, or
 * the step when none is loaded).
 */
export function fill(tag: SegmentTagStats): number {
  if (tag.range === null) return 0;
  const current = Number(tag.range.end - tag.range.start);
  const next = tag.next === null ? tag.step : Number(tag.next.end - tag.next.start);
  return current + next === 0 ? 0 : Math.min(1, tag.remaining / (current + next));
}
