import type { Clock } from '../ports/clock.ts';
import type {
  SegmentStore,
  StoreHistoryEvent,
  TagListing,
  TagRecord,
} from '../ports/segment-store.ts';
import { IdMintError, isIdMintError } from '../core/errors.ts';
import {
  SegmentBuffer,
  closedError,
  type SegmentBufferSettings,
  type SegmentHealEvent,
  type SegmentLoadEvent,
  type SegmentRun,
  type SegmentTagStats,
} from '../core/segment-buffer.ts';
import {
  SEGMENT_SERVICE_BOUNDS,
  TAG_PAGE_SIZE,
  checkTag,
  tagNotFound,
} from '../core/segment-limits.ts';
import { SortedTagNames } from './sorted-tag-names.ts';
import { resolveStepPolicy, type StepPolicyOptions } from '../core/step-policy.ts';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { withTimeout } from '../shared/timeout.ts';
import type { IssuerDirectory } from './issuer-directory.ts';
import type { IssuerLocation } from './issuer-holding.ts';
import { OrderedTags, type IssuerOptions } from './ordered-tags.ts';

export { isIssuedElsewhere, issuedElsewhere, type IssuerOptions } from './ordered-tags.ts';

/** Options for {@link SegmentService}; every duration is in ms. */
export interface SegmentServiceOptions {
  /** Where ranges come from. The service never closes it: whoever opened it does. */
  readonly store: SegmentStore;
  /**
   * Time for the dynamic step, retry delays and the negative cache. Required: core never reads the
   * system time.
   */
  readonly clock: Clock;
  /** Dynamic step constants (Leaf's by default). */
  readonly step?: StepPolicyOptions;
  /**
   * Fraction of a range issued before the next range is loaded, 0 to 1. Default 0.1 (Leaf); 1 loads
   * only when empty.
   */
  readonly prefetchThreshold?: number;
  /** How long a request waits for a range being loaded before SEGMENTS_NOT_READY. Default 2000. */
  readonly waitTimeoutMs?: number;
  /** How long one store call may take before it is abandoned (its range skipped). Default 5000. */
  readonly loadTimeoutMs?: number;
  /**
   * After a failed load, how long requests that find nothing buffered fail fast before the store is
   * tried again. Default 1000.
   */
  readonly retryAfterMs?: number;
  /**
   * How often the tag list is re-read from the store (the tags changed since the last read); 0
   * disables the timer. Default 60000.
   */
  readonly tagRefreshMs?: number;
  /**
   * How often a refresh reads every tag instead of the changes, which is how deleted tags are
   * found; 0: every refresh does (as Leaf). Default 3600000.
   */
  readonly tagFullRefreshMs?: number;
  /**
   * How long a tag the store does not have is answered TAG_NOT_FOUND without asking again. Default
   * 2000.
   */
  readonly negativeCacheMs?: number;
  /** Called after every range load, heal and tag refresh, for logs and metrics. Must not throw. */
  readonly onEvent?: (event: SegmentEvent) => void;
  /**
   * The terms of cluster-ordered tags' issuer leases (docs/segments.md, Cluster order), used when
   * the store keeps them (SegmentStore.issuers).
   */
  readonly issuers?: IssuerOptions;
}

/** A tag-list refresh, successful or not. */
export interface SegmentRefreshEvent {
  readonly type: 'refresh';
  /** A full read (every tag), or an incremental one (the tags changed since the last read). */
  readonly full: boolean;
  /** Tag records read from the store; absent when the refresh failed. */
  readonly rows?: number;
  /** Tags known after it (listed or in use); absent when the refresh failed. */
  readonly tags?: number;
  readonly error?: IdMintError;
}

/**
 * A range load, a tag refresh, a heal (a range below IDs already loaded, refused and the row
 * raised past them), or, passed on by whoever opened the store, a store's new history.
 */
export type SegmentEvent =
  | SegmentLoadEvent
  | SegmentRefreshEvent
  | SegmentHealEvent
  | StoreHistoryEvent;

/** A snapshot of the service, for metrics and the admin API. */
export interface SegmentServiceStats {
  /** One entry per cached tag, sorted by tag. */
  readonly tags: SegmentTagStats[];
  /** Successful tag refreshes, full and incremental. */
  readonly tagRefreshes: number;
  /** Of those, full reads of every tag (at start-up and every `tagFullRefreshMs`). */
  readonly fullTagRefreshes: number;
  readonly tagRefreshFailures: number;
  /**
   * Tag records the refreshes read from the store: every tag for a full read, the changed ones
   * otherwise.
   */
  readonly tagRowsRead: number;
  /** Clock time of the last successful tag refresh; null before the first. */
  readonly lastTagRefreshAt: number | null;
  /** Unknown tag names currently answered from the negative cache. */
  readonly negativeCacheSize: number;
  /** The service's clock when the snapshot was taken (lastTagRefreshAt is on the same clock). */
  readonly at: number;
}

/** What {@link SegmentService.close} gave back to the store and what it had to waste. */
export interface SegmentShutdownReport {
  /**
   * Unissued IDs handed back to the store: the next allocation starts right after the last ID
   * issued.
   */
  readonly releasedIds: number;
  /**
   * Unissued IDs lost: another node allocated after ours, the store was down, or a gap between
   * ranges.
   */
  readonly wastedIds: number;
  /**
   * Tags whose give-back failed (the store was down or too slow): their IDs are counted in
   * wastedIds.
   */
  readonly failedReleases: readonly SegmentReleaseFailure[];
}

/** A give-back that failed at shutdown: the tag, the IDs it could not return, and why. */
export interface SegmentReleaseFailure {
  readonly tag: string;
  readonly ids: number;
  readonly error: IdMintError;
}

/**
 * Unknown names cached at most; beyond this the oldest entry goes, so random names cannot grow
 * memory.
 */
const NEGATIVE_CACHE_MAX = 10_000;
/** Largest batch: 10 million bigints are ~0.5 GB; larger requests are a client bug. */
export const MAX_SEGMENT_BATCH = 10_000_000;

/**
 * Segment mode: per business tag, dense increasing 64-bit IDs handed out from ranges the store
 * allocates, double-buffered so the store is off the request path (Meituan Leaf's segment mode,
 * with its known gaps closed: tags loaded at start-up, batches, bounded waits, fail-fast outages,
 * a shutdown that gives unissued IDs back).
 *
 * Use {@link nextSync} on hot paths (no Promise when the ID is buffered, which is almost always)
 * and fall back to {@link next}: `service.nextSync(tag) ?? await service.next(tag)`.
 */
export class SegmentService {
  readonly #store: SegmentStore;
  readonly #clock: Clock;
  readonly #settings: SegmentBufferSettings;
  readonly #waitTimeoutMs: number;
  readonly #loadTimeoutMs: number;
  readonly #tagRefreshMs: number;
  readonly #tagFullRefreshMs: number;
  readonly #negativeCacheMs: number;
  readonly #onEvent: ((event: SegmentEvent) => void) | undefined;

  /** Tags in use: a buffer is created on a tag's first draw, never for every tag at start-up. */
  readonly #buffers = new Map<string, SegmentBuffer>();
  /**
   * Tags the refreshes found and nobody has drawn from yet: name -> configured step and the mark
   * of the full read that last saw it ({@link idleEntry}). A number per tag instead of a buffer
   * (about a tenth of the memory); a first draw finds its tag here without asking the store.
   * Only a cache: a tag missing here is looked up. Kept in place across full reads: building a
   * new map of a million tags stalls the event loop each time it grows (V8 rehashes it whole).
   */
  readonly #idle = new Map<string, number>();
  /** The mark, 0 or 1, of the latest full read: it flips at the start of each. */
  #readMark = 0;
  /** Every tag in #buffers or #idle, sorted by name: the status route's pages read it. */
  readonly #names = new SortedTagNames();
  /**
   * Tags known to be opaque. Only ever added to while a tag exists: a store never turns an opaque
   * tag back, so a record that says otherwise is an older read, never a change to follow.
   */
  readonly #opaque = new Set<string>();
  /** When each buffer was created, as a count of buffers created so far (see #refresh). */
  readonly #createdAt = new WeakMap<SegmentBuffer, number>();
  #created = 0;
  /** Unknown tag -> clock time until which it is answered TAG_NOT_FOUND from memory. */
  readonly #negative = new Map<string, number>();
  /** Store look-ups in flight, shared by every request for the same unknown tag. */
  readonly #lookups = new Map<string, Promise<SegmentBuffer>>();
  #refreshing: Promise<void> | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  #closing: Promise<SegmentShutdownReport> | undefined;
  #tagRefreshes = 0;
  #fullTagRefreshes = 0;
  #tagRefreshFailures = 0;
  #tagRowsRead = 0;
  /**
   * Where the next incremental refresh reads from (the store's clock); undefined before the first
   * full read.
   */
  #changeCursor: string | undefined;
  /** Clock time after which the next refresh is a full read. */
  #nextFullReadAt = 0;
  #lastTagRefreshAt: number | null = null;
  /** The cluster-ordered tags: their issuer leases and fenced buffers (ordered-tags.ts). */
  readonly #ordered: OrderedTags;

  constructor(options: SegmentServiceOptions) {
    if (
      options === null ||
      typeof options !== 'object' ||
      options.store === undefined ||
      options.clock === undefined
    ) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        'SegmentService needs options with a store and a clock',
      );
    }
    const bounds = SEGMENT_SERVICE_BOUNDS;
    const prefetchThreshold = options.prefetchThreshold ?? bounds.prefetchThreshold.fallback;
    if (
      typeof prefetchThreshold !== 'number' ||
      !(
        prefetchThreshold >= bounds.prefetchThreshold.min &&
        prefetchThreshold <= bounds.prefetchThreshold.max
      )
    ) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `prefetchThreshold must be a number from ${bounds.prefetchThreshold.min} to ` +
          `${bounds.prefetchThreshold.max}, got ${String(prefetchThreshold)}`,
      );
    }
    this.#waitTimeoutMs = checkMs('waitTimeoutMs', options.waitTimeoutMs);
    this.#loadTimeoutMs = checkMs('loadTimeoutMs', options.loadTimeoutMs);
    this.#tagRefreshMs = checkMs('tagRefreshMs', options.tagRefreshMs);
    this.#tagFullRefreshMs = checkMs('tagFullRefreshMs', options.tagFullRefreshMs);
    this.#negativeCacheMs = checkMs('negativeCacheMs', options.negativeCacheMs);
    this.#store = options.store;
    this.#clock = options.clock;
    this.#onEvent = options.onEvent;
    const loadTimeoutMs = this.#loadTimeoutMs;
    this.#settings = {
      allocate: (tag, step) =>
        withTimeout(
          this.#store.allocate(tag, step),
          loadTimeoutMs,
          () =>
            new IdMintError(
              'STORE_UNAVAILABLE',
              `tag "${tag}": allocating a range took longer than ${loadTimeoutMs} ms; its ` +
                `outcome is unknown, so that range is skipped`,
              {
                details: { tag, timeoutMs: loadTimeoutMs, abandoned: true },
              },
            ),
        ),
      raise: (tag, atLeast) =>
        withTimeout(
          this.#store.raise(tag, atLeast),
          loadTimeoutMs,
          () =>
            new IdMintError(
              'STORE_UNAVAILABLE',
              `tag "${tag}": raising max_id took longer than ${loadTimeoutMs} ms`,
              {
                details: { tag, timeoutMs: loadTimeoutMs },
              },
            ),
        ),
      clock: this.#clock,
      stepPolicy: resolveStepPolicy(options.step),
      prefetchThreshold,
      retryAfterMs: checkMs('retryAfterMs', options.retryAfterMs),
      onEvent: options.onEvent,
    };
    this.#ordered = new OrderedTags({
      leases: options.store.issuers,
      clock: this.#clock,
      issuers: options.issuers ?? {},
      callTimeoutMs: this.#loadTimeoutMs,
      settings: this.#settings,
      buffers: {
        get: (tag) => this.#buffers.get(tag),
        install: (tag, buffer) => {
          this.#buffers.set(tag, buffer);
          this.#createdAt.set(buffer, ++this.#created);
        },
        closing: () => this.#closing !== undefined,
      },
    });
  }

  /** The issuer leases of cluster-ordered tags; undefined when the store keeps none. */
  get issuers(): IssuerDirectory | undefined {
    return this.#ordered.directory;
  }

  /** True when `tag` is cluster-ordered as far as this service has read. */
  isOrdered(tag: string): boolean {
    return this.#ordered.has(tag);
  }

  /**
   * For a cluster-ordered tag another node is known to issue (and this node does not), that
   * node's address, to forward to; undefined otherwise (serve here, which claims as needed).
   */
  issuerOf(tag: string): string | undefined {
    return this.#ordered.issuerOf(tag);
  }

  /**
   * Where a cluster-ordered tag is served now: here (claiming its lease if nobody holds it), or
   * at the holder's address. A plain tag is always served here.
   */
  async locate(tag: string): Promise<IssuerLocation> {
    return this.#ordered.locate(this.#buffers.get(tag) ?? (await this.#lookup(tag)));
  }

  /**
   * Loads the tag list and starts its periodic refresh, so every tag is served from the first
   * request (Leaf loads lazily and fails its first minute). Ranges themselves load on first use.
   * Rejects (STORE_UNAVAILABLE) if the store cannot be read; the refresh timer runs anyway and
   * tags are still looked up on demand, so a caller may log the error and carry on.
   */
  async start(): Promise<void> {
    if (this.#closing !== undefined) throw closedError();
    if (this.#timer === undefined && this.#tagRefreshMs > 0) {
      this.#timer = setInterval(() => {
        this.refreshTags().catch(() => undefined); // reported through onEvent and stats
      }, this.#tagRefreshMs);
      // A forgotten close() must not keep the process alive.
      this.#timer.unref?.();
    }
    await this.refreshTags();
  }

  /**
   * The next ID for `tag` if one is buffered, else undefined (then call {@link next}, which
   * waits). Never throws and never waits: a counter increment on the hot path. Starts loading
   * the next range in the background when the threshold is crossed.
   */
  nextSync(tag: string): bigint | undefined {
    const buffer = this.#buffers.get(tag) ?? this.#wake(tag);
    return buffer === undefined ? undefined : buffer.nextSync();
  }

  /** The buffer of a listed tag on its first draw (starting its first load), or undefined. */
  #wake(tag: string): SegmentBuffer | undefined {
    const entry = this.#idle.get(tag);
    if (entry === undefined || this.#closing !== undefined) return undefined;
    return this.#adopt({
      tag,
      step: entryStep(entry),
      opaque: this.#opaque.has(tag),
      ...(this.#ordered.has(tag) ? { ordering: 'cluster' as const } : {}),
    });
  }

  /**
   * The next ID for `tag`. Waits (up to `waitTimeoutMs`) for a range being loaded rather than
   * failing. Throws IdMintError: INVALID_ARGUMENT, TAG_NOT_FOUND, SEGMENTS_NOT_READY (the load did
   * not finish in time; retryable), STORE_UNAVAILABLE (the store failed and nothing is buffered;
   * retryable, fails fast for `retryAfterMs`), ID_SPACE_EXHAUSTED, TAG_MISCONFIGURED (the tag's
   * row allows no allocation; not retryable).
   */
  async next(tag: string): Promise<bigint> {
    const id = this.nextSync(tag);
    if (id !== undefined) return id;
    const [first] = await this.#draw(tag, 1);
    return first as bigint;
  }

  /**
   * True when `tag` is opaque as far as this service has read (its records from start-up,
   * refreshes, look-ups and {@link tagChanged}). The IDs it hands out are dense either way;
   * the edge encodes an opaque tag's (service/opaque-ids.ts) and must never answer them bare.
   */
  isOpaque(tag: string): boolean {
    return this.#opaque.has(tag);
  }

  /**
   * Takes a tag record just written (created or changed on this node) at once: its step and its
   * opaque mark, without waiting for a refresh, whose read may have started before the write.
   */
  tagChanged(record: TagRecord): void {
    if (this.#closing === undefined) this.#adopt(record);
  }

  /**
   * `count` IDs (1 to 10,000,000) for `tag`, increasing, if all are buffered now; else undefined
   * (nothing is taken; call {@link nextBatch}).
   */
  nextBatchSync(tag: string, count: number): bigint[] | undefined {
    const buffer = this.#buffers.get(tag) ?? this.#wake(tag);
    if (
      buffer === undefined ||
      !Number.isSafeInteger(count) ||
      count < 1 ||
      count > MAX_SEGMENT_BATCH ||
      count > buffer.available()
    )
      return undefined;
    const ids: bigint[] = [];
    buffer.take(ids, count);
    return ids;
  }

  /**
   * `count` IDs (1 to 10,000,000) for `tag`, increasing. A batch may be larger than a range: it
   * takes what is buffered and waits for further ranges, each wait bounded by `waitTimeoutMs`,
   * so it always ends. Throws as {@link next}; on a failure part-way, the IDs already taken are
   * lost (never reissued).
   */
  async nextBatch(tag: string, count: number): Promise<bigint[]> {
    if (!Number.isSafeInteger(count) || count < 1 || count > MAX_SEGMENT_BATCH) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `count must be an integer from 1 to ${MAX_SEGMENT_BATCH}, got ${String(count)}`,
      );
    }
    return this.nextBatchSync(tag, count) ?? this.#draw(tag, count);
  }

  /**
   * Up to `size` (1 to 10,000,000; `'step'`: the tag's configured step) of `tag`'s next IDs as
   * one run, for a caller that issues them itself (the range route, TinyId's segment routes):
   * `start`, `start + stride`, ... below `end`. The run comes out of the buffer like any batch, so
   * nothing else ever gets its IDs. It never spans two ranges: when the current range has fewer
   * than `size` left, the run is that rest (`count` says how many), so nothing is skipped. Waits
   * for a range as {@link next}; throws as it.
   */
  async nextRange(tag: string, size: number | 'step'): Promise<SegmentRun> {
    if (size !== 'step' && (!Number.isSafeInteger(size) || size < 1 || size > MAX_SEGMENT_BATCH)) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `size must be an integer from 1 to ${MAX_SEGMENT_BATCH}, got ${String(size)}`,
      );
    }
    if (this.#closing !== undefined) throw closedError();
    let buffer = await this.#served(tag);
    for (;;) {
      buffer = this.#ordered.current(tag, buffer);
      const run = buffer.takeRun(
        size === 'step' ? Math.min(MAX_SEGMENT_BATCH, Math.max(1, buffer.stats().tagStep)) : size,
      );
      if (run !== undefined) return run;
      await this.#whenReady(tag, buffer);
    }
  }

  /**
   * Exactly `size` of `tag`'s next IDs as one run, for a caller that issues them itself (the
   * range route): from the buffered range when it holds them, else a range of that size of its
   * own, allocated from the store in one atomic step (so across processes too no ID is in two
   * runs). `size` is 1 to the largest range the tag may be allocated, `max(step.maxStep, its
   * stored step)`: the failover fence is sized in those (docs/segments.md, The margin). The
   * buffered IDs a run does not fit in stay for other callers. Waits for the allocation up to
   * `waitTimeoutMs` (SEGMENTS_NOT_READY; a range that lands later is never issued); throws as
   * {@link next}.
   */
  async exactRange(tag: string, size: number): Promise<SegmentRun> {
    if (!Number.isSafeInteger(size) || size < 1 || size > MAX_SEGMENT_BATCH) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `size must be an integer from 1 to ${MAX_SEGMENT_BATCH}, got ${String(size)}`,
      );
    }
    if (this.#closing !== undefined) throw closedError();
    const buffer = await this.#served(tag);
    const largest = Math.max(this.#settings.stepPolicy.maxStep, buffer.stats().tagStep);
    if (size > largest) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `size ${size} is above the largest range tag "${tag}" may take, ${largest} ` +
          '(max(segment.maxStep, its step))',
        { details: { tag, size, largest } },
      );
    }
    let run = buffer.takeExactRun(size);
    // Nothing buffered (the tag's first use, or both ranges used up): load as a single ID does
    // when the load should hold the run (a load is not below the stored step unless that just
    // changed), so small ranges keep coming from the buffer instead of each costing the store an
    // allocation. A load that does not hold it leaves the run to a range of its own.
    if (run === undefined && buffer.available() === 0 && size <= buffer.stats().tagStep) {
      await this.#whenReady(tag, buffer);
      run = buffer.takeExactRun(size);
    }
    if (run !== undefined) return run;
    const dedicated = withTimeout(buffer.allocateRun(size), this.#waitTimeoutMs, () => {
      return new IdMintError(
        'SEGMENTS_NOT_READY',
        `tag "${tag}": a range of ${size} was not allocated within ` +
          `${this.#waitTimeoutMs} ms; retry`,
        { details: { tag, waitTimeoutMs: this.#waitTimeoutMs } },
      );
    });
    // A cluster-ordered tag drops its buffered ranges, which are below the run, before it is
    // answered (OrderedTags.exactRunAllocated).
    return this.#ordered.exactRunAllocated(tag, buffer, dedicated);
  }

  /**
   * The tag's buffer, ready to draw from: for a cluster-ordered tag, only while this node holds
   * its issuer lease (claimed here if nobody holds it); ISSUER_UNAVAILABLE with the holder's
   * address in `details.issuer` when another node does (see {@link isIssuedElsewhere}).
   */
  async #served(tag: string): Promise<SegmentBuffer> {
    return this.#ordered.served(tag, this.#buffers.get(tag) ?? (await this.#lookup(tag)));
  }

  /**
   * Re-reads the tag list: the tags changed since the last read (new tags appear, steps and
   * opaque marks change), or, at start-up and every `tagFullRefreshMs`, every tag (deleted ones
   * go; an empty table empties the cache). Runs every `tagRefreshMs`; call it to apply a change
   * at once. Concurrent calls share one read.
   */
  refreshTags(): Promise<void> {
    this.#refreshing ??= this.#refresh().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  /**
   * A snapshot for the admin API: per tag its step, buffered IDs, loads, latency and failures,
   * every tag the store listed included (those not drawn from yet show nothing loaded), sorted by
   * name. Costs an object per tag: the status route pages with {@link tagNames} and
   * {@link tagStats}, metrics read {@link activeStats}.
   */
  stats(): SegmentServiceStats {
    return this.#snapshot(this.tagNames().map((tag) => this.tagStats(tag) as SegmentTagStats));
  }

  /**
   * Every tag known (in use or listed by the store), sorted by name as {@link stats} sorts them,
   * without an object per tag. The live array: read it before the next await, never change it.
   */
  tagNames(): readonly string[] {
    return this.#names.names();
  }

  /**
   * One known tag's stats (nothing loaded for a tag not in use), or undefined for an unknown tag.
   */
  tagStats(tag: string): SegmentTagStats | undefined {
    const buffer = this.#buffers.get(tag);
    if (buffer !== undefined) return buffer.stats();
    const entry = this.#idle.get(tag);
    return entry === undefined ? undefined : idleStats(tag, entryStep(entry));
  }

  /**
   * True when `tag` has a buffer (drawn from since start-up or its last change): what {@link
   * activeStats} lists.
   */
  inUse(tag: string): boolean {
    return this.#buffers.has(tag);
  }

  /** Tags known and tags in use, without touching any of them. */
  tagCounts(): { readonly known: number; readonly inUse: number } {
    return { known: this.#buffers.size + this.#idle.size, inUse: this.#buffers.size };
  }

  /**
   * As {@link stats} for the tags in use only (drawn from since start-up or their last change),
   * unsorted: proportional to the work done, not to the tags that exist, so cheap to scrape.
   */
  activeStats(): SegmentServiceStats {
    return this.#snapshot([...this.#buffers.values()].map((buffer) => buffer.stats()));
  }

  #snapshot(tags: SegmentTagStats[]): SegmentServiceStats {
    return {
      tags,
      tagRefreshes: this.#tagRefreshes,
      fullTagRefreshes: this.#fullTagRefreshes,
      tagRefreshFailures: this.#tagRefreshFailures,
      tagRowsRead: this.#tagRowsRead,
      lastTagRefreshAt: this.#lastTagRefreshAt,
      negativeCacheSize: this.#negative.size,
      at: this.#clock.now(),
    };
  }

  /**
   * IDs handed out so far per tag with a buffer, cheap enough to read every second (no sort, no
   * per-tag object): the dashboard's draw rates are the growth of these totals.
   */
  issuedByTag(): Map<string, number> {
    const totals = new Map<string, number>();
    for (const [tag, buffer] of this.#buffers) totals.set(tag, buffer.issued());
    return totals;
  }

  /**
   * Stops serving one tag on this node and gives its unissued tail back, as {@link close} does for
   * every tag: a periodic tag's period row once its period is over here (no ID of it is issued
   * afterwards). A later draw of the tag starts a new buffer with a new range. Never throws: a
   * tail that cannot be given back is only wasted.
   */
  async retire(tag: string): Promise<void> {
    const buffer = this.#buffers.get(tag);
    if (buffer === undefined || this.#closing !== undefined) return;
    this.#buffers.delete(tag);
    this.#names.remove(tag);
    const { tails } = await buffer.close();
    for (const tail of tails)
      await this.#bounded(this.#store.release(tag, tail.from, tail.to), 'releasing a range').catch(
        () => false,
      );
  }

  /**
   * The start of a graceful shutdown, before requests in flight are drained: stops issuing every
   * cluster-ordered tag, gives its buffered IDs back, and releases its issuer lease, so another
   * node takes it over at once instead of after the drain. Requests for such a tag that still
   * reach this node are forwarded to the new issuer. Never throws.
   */
  async handOverIssuers(): Promise<void> {
    if (this.#closing !== undefined) return;
    await this.#ordered.handOver(this.#buffers.values(), (tag) => this.retire(tag));
  }

  /**
   * Graceful shutdown: stops issuing at once (later calls get SEGMENTS_NOT_READY), lets loads in
   * flight settle, then gives each tag's unissued tail back to the store where nobody allocated
   * after us, so a restart continues right after the last ID issued instead of wasting the
   * buffered ranges. Idempotent. Does not close the store.
   */
  close(): Promise<SegmentShutdownReport> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<SegmentShutdownReport> {
    clearInterval(this.#timer);
    const buffers = [...this.#buffers.values()];
    this.#buffers.clear();
    for (const buffer of buffers) this.#names.remove(buffer.tag);
    let releasedIds = 0;
    let wastedIds = 0;
    const failedReleases: SegmentReleaseFailure[] = [];
    await Promise.all(
      buffers.map(async (buffer) => {
        const { tails, wasted } = await buffer.close();
        wastedIds += wasted;
        // One tail per residue class: with a set of databases, each goes back to its own database.
        for (const tail of tails) {
          const size = tail.ids;
          // A release whose outcome is unknown is harmless: we issue nothing from the tail either
          // way.
          const released = await this.#bounded(
            this.#store.release(buffer.tag, tail.from, tail.to),
            'releasing a range',
          ).catch((error: unknown) => {
            failedReleases.push({
              tag: buffer.tag,
              ids: size,
              error: isIdMintError(error)
                ? error
                : new IdMintError(
                    'STORE_UNAVAILABLE',
                    `tag "${buffer.tag}": releasing a range failed: ${String(error)}`,
                    { cause: error },
                  ),
            });
            return false;
          });
          if (released) releasedIds += size;
          else wastedIds += size;
        }
      }),
    );
    // Only now, with nothing issued any more, may another node take the tags' issuer leases.
    await this.#ordered.close();
    return { releasedIds, wastedIds, failedReleases };
  }

  async #draw(tag: string, count: number): Promise<bigint[]> {
    if (this.#closing !== undefined) throw closedError();
    let buffer = await this.#served(tag);
    const ids: bigint[] = [];
    for (;;) {
      // A cluster-ordered tag's buffer is replaced by a new holding or an exact range: the draw
      // goes on from the current one, whose IDs are above the ones taken so far.
      buffer = this.#ordered.current(tag, buffer);
      buffer.take(ids, count - ids.length);
      if (ids.length === count) return ids;
      // Each wait is bounded and each wake-up follows a load (or a failure, which throws), so a
      // batch larger than a range makes progress every round and always ends.
      await this.#whenReady(tag, buffer);
    }
  }

  /** Waits for `buffer` to hold IDs, bounded by waitTimeoutMs (SEGMENTS_NOT_READY). */
  #whenReady(tag: string, buffer: SegmentBuffer): Promise<void> {
    return withTimeout(buffer.whenReady(), this.#waitTimeoutMs, () => {
      return new IdMintError(
        'SEGMENTS_NOT_READY',
        `tag "${tag}": no buffered IDs left and the next range did not load within ` +
          `${this.#waitTimeoutMs} ms; retry`,
        {
          details: { tag, waitTimeoutMs: this.#waitTimeoutMs },
        },
      );
    });
  }

  /**
   * A tag missing from the cache: ask the store (once, however many requests ask) before
   * TAG_NOT_FOUND.
   */
  #lookup(tag: string): Promise<SegmentBuffer> {
    checkTag(tag);
    const listed = this.#wake(tag);
    if (listed !== undefined) return Promise.resolve(listed);
    const until = this.#negative.get(tag);
    if (until !== undefined) {
      if (this.#clock.now() < until) return Promise.reject(tagNotFound(tag));
      this.#negative.delete(tag);
    }
    let pending = this.#lookups.get(tag);
    if (pending === undefined) {
      pending = this.#bounded(this.#store.getTag(tag), `looking up tag "${tag}"`)
        .then((record) => {
          // Exactly this name: a case-insensitive (or PAD SPACE) MySQL collation returns the row
          // of "orders" for "ORDERS" or "orders ". Leaf's cache is keyed by the exact biz_tag, so
          // Leaf refuses those names; serving them would also ask the store on every request.
          if (record !== undefined && record.tag === tag) return this.#adopt(record);
          if (this.#negative.size >= NEGATIVE_CACHE_MAX)
            this.#negative.delete(this.#negative.keys().next().value as string);
          this.#negative.set(tag, this.#clock.now() + this.#negativeCacheMs);
          throw tagNotFound(tag);
        })
        .finally(() => this.#lookups.delete(tag));
      this.#lookups.set(tag, pending);
    }
    return pending;
  }

  /** The buffer for a tag the store has, created on first sight. */
  #adopt(record: TagListing): SegmentBuffer {
    if (this.#closing !== undefined) throw closedError();
    let buffer = this.#buffers.get(record.tag);
    // A plain buffer of a tag now cluster-ordered (deleted and created again) goes at once.
    if (this.#ordered.supersedes(record, buffer)) {
      buffer?.close().catch(() => undefined);
      this.#buffers.delete(record.tag);
      this.#names.remove(record.tag);
      buffer = undefined;
    }
    if (buffer === undefined) {
      buffer = this.#ordered.has(record.tag)
        ? this.#ordered.fencedBuffer(record.tag, record.step)
        : new SegmentBuffer(record.tag, record.step, this.#settings);
      this.#buffers.set(record.tag, buffer);
      // An idle tag is in the name index already, and idle no more.
      if (!this.#idle.delete(record.tag)) this.#names.add(record.tag);
      this.#createdAt.set(buffer, ++this.#created);
    } else {
      buffer.setTagStep(record.step);
    }
    if (record.opaque === true) this.#opaque.add(record.tag);
    this.#negative.delete(record.tag);
    return buffer;
  }

  async #refresh(): Promise<void> {
    const full = this.#changeCursor === undefined || this.#clock.now() >= this.#nextFullReadAt;
    let rows: number;
    try {
      rows = full
        ? await this.#readAllTags()
        : await this.#readTagChanges(this.#changeCursor as string);
    } catch (error) {
      this.#tagRefreshFailures++;
      const failure = isIdMintError(error)
        ? error
        : new IdMintError('STORE_UNAVAILABLE', `reading the tag list failed: ${String(error)}`, {
            cause: error,
          });
      this.#onEvent?.({ type: 'refresh', full, error: failure });
      throw failure;
    }
    if (this.#closing !== undefined) return;
    this.#tagRefreshes++;
    this.#tagRowsRead += rows;
    this.#lastTagRefreshAt = this.#clock.now();
    this.#onEvent?.({ type: 'refresh', full, rows, tags: this.tagCounts().known });
  }

  /**
   * The incremental refresh: only the tags written since the last read (new tags, changed steps,
   * opaque marks), through the store's index on update_time, so its cost is the rows changed.
   * A deleted tag is not seen here; the next full read drops it.
   */
  async #readTagChanges(cursor: string): Promise<number> {
    const changes = await this.#bounded(this.#store.listTagChanges(cursor), 'reading tag changes');
    if (this.#closing !== undefined) return 0;
    for (const record of changes.records) this.#note(record);
    this.#changeCursor = changes.cursor;
    return changes.records.length;
  }

  /**
   * The full read: every tag, a page at a time with a turn of the event loop between pages (one
   * read of a million rows would hold it for seconds). Deleted tags go. The change cursor is
   * taken before the first page, so the incremental reads that follow miss nothing written
   * during this one.
   */
  async #readAllTags(): Promise<number> {
    // Buffers created after this point may be for tags the list read below predates (a tag
    // created and looked up while the read is on its way): the list cannot say they are gone.
    const createdBeforeRead = this.#created;
    const { cursor } = await this.#bounded(
      this.#store.listTagChanges(undefined),
      'reading the store clock',
    );
    // Idle tags the read finds take this read's mark; tags in use it finds are noted here. The
    // idle tags left with the other mark afterwards are the ones it did not find.
    const mark = (this.#readMark ^= 1);
    const inUse = new Set<string>();
    let rows = 0;
    let after: string | undefined;
    do {
      if (after !== undefined) await yieldToEventLoop();
      const page = await this.#bounded(
        this.#store.listTagPage(after, TAG_PAGE_SIZE),
        'listing tags',
      );
      if (this.#closing !== undefined) return 0;
      for (const record of page.records) if (this.#note(record)) inUse.add(record.tag);
      rows += page.records.length;
      after = page.next;
    } while (after !== undefined);
    // Deleted tags go; an empty table clears everything (Leaf kept serving deleted tags forever
    // when the table became empty). The idle ones a few thousand at a time, the loop free in
    // between (a draw meanwhile only takes a tag out of the map).
    let swept = 0;
    for (const [tag, entry] of this.#idle) {
      if (entryMark(entry) !== mark) {
        this.#idle.delete(tag);
        this.#names.remove(tag);
      }
      if (++swept % TAG_PAGE_SIZE === 0) await yieldToEventLoop();
    }
    if (this.#closing !== undefined) return 0;
    const present = (tag: string) => inUse.has(tag) || this.#idle.has(tag);
    // Of the buffers, only those older than the read: dropping a newer one would lose its ranges,
    // and a request still drawing from it would then issue IDs below the fresh buffer's (no
    // longer increasing).
    for (const [tag, buffer] of this.#buffers) {
      if (!present(tag) && (this.#createdAt.get(buffer) ?? 0) <= createdBeforeRead) {
        this.#buffers.delete(tag);
        this.#opaque.delete(tag);
        this.#names.remove(tag);
      }
    }
    // The first read adds every tag: sort them now, before the node is ready, not in a request.
    this.#names.fold();
    for (const tag of this.#opaque)
      if (!present(tag) && !this.#buffers.has(tag)) this.#opaque.delete(tag);
    this.#changeCursor = cursor;
    this.#nextFullReadAt = this.#clock.now() + this.#tagFullRefreshMs;
    this.#fullTagRefreshes++;
    return rows;
  }

  /**
   * A record a refresh read: a tag in use takes its step (true); another is noted idle with the
   * latest full read's mark (false), and joins the name index if it is new.
   */
  #note(record: TagListing): boolean {
    if (record.opaque === true) this.#opaque.add(record.tag);
    const plain = this.#buffers.get(record.tag);
    // A plain buffer of a tag now cluster-ordered: dropped, the next draw adopts it fenced.
    if (this.#ordered.supersedes(record, plain)) {
      plain?.close().catch(() => undefined);
      this.#buffers.delete(record.tag);
    }
    this.#negative.delete(record.tag);
    const buffer = this.#buffers.get(record.tag);
    if (buffer === undefined) {
      if (!this.#idle.has(record.tag)) this.#names.add(record.tag);
      this.#idle.set(record.tag, idleEntry(record.step, this.#readMark));
      return false;
    }
    buffer.setTagStep(record.step);
    return true;
  }

  /** A store call off the hot path (a refresh, a look-up, a release), bounded by loadTimeoutMs. */
  #bounded<T>(call: Promise<T>, what: string): Promise<T> {
    return withTimeout(call, this.#loadTimeoutMs, () => storeTimeout(what, this.#loadTimeoutMs));
  }
}

/** An idle tag's entry: its step (1 to 2^31-1) and a full read's mark (0 or 1), in one number. */
function idleEntry(step: number, mark: number): number {
  return step * 2 + mark;
}

function entryStep(entry: number): number {
  return Math.floor(entry / 2);
}

function entryMark(entry: number): number {
  return entry % 2;
}

/** What {@link SegmentService.stats} shows for a tag nobody has drawn from: nothing loaded yet. */
export function idleStats(tag: string, step: number): SegmentTagStats {
  return {
    tag,
    step: 0,
    tagStep: step,
    remaining: 0,
    nextReady: false,
    loading: false,
    loads: 0,
    loadFailures: 0,
    abandonedLoads: 0,
    heals: 0,
    loadMsTotal: 0,
    loadMsMax: 0,
    lastError: null,
    lastErrorCode: null,
    issued: 0,
    range: null,
    next: null,
  };
}

function storeTimeout(what: string, ms: number): IdMintError {
  return new IdMintError('STORE_UNAVAILABLE', `${what} took longer than ${ms} ms`, {
    details: { timeoutMs: ms },
  });
}

/** A duration option, or its default; INVALID_ARGUMENT naming it when outside its bounds. */
function checkMs(name: keyof typeof SEGMENT_SERVICE_BOUNDS, given: number | undefined): number {
  const { min, max, fallback } = SEGMENT_SERVICE_BOUNDS[name];
  const value: unknown = given ?? fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${name} must be an integer from ${min} to ${max} ms, got ${String(value)}`,
    );
  }
  return value;
}
