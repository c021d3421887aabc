import type { Clock } from '../ports/clock.ts';
import type { SegmentStore, TagRecord } from '../ports/segment-store.ts';
import { IdMintError, isIdMintError } from './errors.ts';
import { SegmentBuffer, closedError, type SegmentBufferSettings, type SegmentLoadEvent, type SegmentTagStats } from './segment-buffer.ts';
import { checkTag, tagNotFound } from './segment-limits.ts';
import { resolveStepPolicy, type StepPolicyOptions } from './step-policy.ts';
import { withTimeout } from './timeout.ts';

/** Options for {@link SegmentService}; every duration is in ms. */
export interface SegmentServiceOptions {
  /** Where ranges come from. The service never closes it: whoever opened it does. */
  readonly store: SegmentStore;
  /** Time for the dynamic step, retry delays and the negative cache. Required: core never reads the system time. */
  readonly clock: Clock;
  /** Dynamic step constants (Leaf's by default). */
  readonly step?: StepPolicyOptions;
  /** Fraction of a range issued before the next range is loaded, 0 to 1. Default 0.1 (Leaf); 1 loads only when empty. */
  readonly prefetchThreshold?: number;
  /** How long a request waits for a range being loaded before SEGMENTS_NOT_READY. Default 2000. */
  readonly waitTimeoutMs?: number;
  /** How long one store call may take before it is abandoned (its range skipped). Default 5000. */
  readonly loadTimeoutMs?: number;
  /** After a failed load, how long requests that find nothing buffered fail fast before the store is tried again. Default 1000. */
  readonly retryAfterMs?: number;
  /** How often the tag list is re-read from the store; 0 disables the timer. Default 60000. */
  readonly tagRefreshMs?: number;
  /** How long a tag the store does not have is answered TAG_NOT_FOUND without asking again. Default 2000. */
  readonly negativeCacheMs?: number;
  /** Called after every range load and tag refresh, for logs and metrics. Must not throw. */
  readonly onEvent?: (event: SegmentEvent) => void;
}

/** A tag-list refresh, successful or not. */
export interface SegmentRefreshEvent {
  readonly type: 'refresh';
  /** Tags in the store; absent when the refresh failed. */
  readonly tags?: number;
  readonly error?: IdMintError;
}

export type SegmentEvent = SegmentLoadEvent | SegmentRefreshEvent;

/** A snapshot of the service, for metrics and the admin API. */
export interface SegmentServiceStats {
  /** One entry per cached tag, sorted by tag. */
  readonly tags: SegmentTagStats[];
  readonly tagRefreshes: number;
  readonly tagRefreshFailures: number;
  /** Clock time of the last successful tag refresh; null before the first. */
  readonly lastTagRefreshAt: number | null;
  /** Unknown tag names currently answered from the negative cache. */
  readonly negativeCacheSize: number;
}

/** What {@link SegmentService.close} gave back to the store and what it had to waste. */
export interface SegmentShutdownReport {
  /** Unissued IDs handed back to the store: the next allocation starts right after the last ID issued. */
  readonly releasedIds: number;
  /** Unissued IDs lost: another node allocated after ours, the store was down, or a gap between ranges. */
  readonly wastedIds: number;
}

/** Unknown names cached at most; beyond this the oldest entry goes, so random names cannot grow memory. */
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
  readonly #negativeCacheMs: number;
  readonly #onEvent: ((event: SegmentEvent) => void) | undefined;

  readonly #buffers = new Map<string, SegmentBuffer>();
  /** Unknown tag -> clock time until which it is answered TAG_NOT_FOUND from memory. */
  readonly #negative = new Map<string, number>();
  /** Store look-ups in flight, shared by every request for the same unknown tag. */
  readonly #lookups = new Map<string, Promise<SegmentBuffer>>();
  #refreshing: Promise<void> | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  #closing: Promise<SegmentShutdownReport> | undefined;
  #tagRefreshes = 0;
  #tagRefreshFailures = 0;
  #lastTagRefreshAt: number | null = null;

  constructor(options: SegmentServiceOptions) {
    if (options === null || typeof options !== 'object' || options.store === undefined || options.clock === undefined) {
      throw new IdMintError('INVALID_ARGUMENT', 'SegmentService needs options with a store and a clock');
    }
    const prefetchThreshold = options.prefetchThreshold ?? 0.1;
    if (typeof prefetchThreshold !== 'number' || !(prefetchThreshold >= 0 && prefetchThreshold <= 1)) {
      throw new IdMintError('INVALID_ARGUMENT', `prefetchThreshold must be a number from 0 to 1, got ${String(prefetchThreshold)}`);
    }
    this.#waitTimeoutMs = checkMs('waitTimeoutMs', options.waitTimeoutMs ?? 2000, 1);
    this.#loadTimeoutMs = checkMs('loadTimeoutMs', options.loadTimeoutMs ?? 5000, 1);
    this.#tagRefreshMs = checkMs('tagRefreshMs', options.tagRefreshMs ?? 60_000, 0);
    this.#negativeCacheMs = checkMs('negativeCacheMs', options.negativeCacheMs ?? 2000, 0);
    this.#store = options.store;
    this.#clock = options.clock;
    this.#onEvent = options.onEvent;
    this.#settings = {
      store: this.#store,
      clock: this.#clock,
      stepPolicy: resolveStepPolicy(options.step),
      prefetchThreshold,
      loadTimeoutMs: this.#loadTimeoutMs,
      retryAfterMs: checkMs('retryAfterMs', options.retryAfterMs ?? 1000, 0),
      onEvent: options.onEvent,
    };
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
    const buffer = this.#buffers.get(tag);
    return buffer === undefined ? undefined : buffer.nextSync();
  }

  /**
   * The next ID for `tag`. Waits (up to `waitTimeoutMs`) for a range being loaded rather than
   * failing. Throws IdMintError: INVALID_ARGUMENT, TAG_NOT_FOUND, SEGMENTS_NOT_READY (the load did
   * not finish in time; retryable), STORE_UNAVAILABLE (the store failed and nothing is buffered;
   * retryable, fails fast for `retryAfterMs`), ID_SPACE_EXHAUSTED.
   */
  async next(tag: string): Promise<bigint> {
    const id = this.nextSync(tag);
    if (id !== undefined) return id;
    const [first] = await this.#draw(tag, 1);
    return first as bigint;
  }

  /**
   * `count` IDs (1 to 10,000,000) for `tag`, increasing, if all are buffered now; else undefined
   * (nothing is taken; call {@link nextBatch}).
   */
  nextBatchSync(tag: string, count: number): bigint[] | undefined {
    const buffer = this.#buffers.get(tag);
    if (buffer === undefined || !Number.isSafeInteger(count) || count < 1 || count > MAX_SEGMENT_BATCH || count > buffer.available()) return undefined;
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
      throw new IdMintError('INVALID_ARGUMENT', `count must be an integer from 1 to ${MAX_SEGMENT_BATCH}, got ${String(count)}`);
    }
    return this.nextBatchSync(tag, count) ?? this.#draw(tag, count);
  }

  /**
   * Re-reads the tag list: new tags appear, deleted ones go (an empty table empties the cache).
   * Runs every `tagRefreshMs`; call it to apply a change at once. Concurrent calls share one read.
   */
  refreshTags(): Promise<void> {
    this.#refreshing ??= this.#refresh().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  /** A snapshot for metrics: per tag its step, buffered IDs, loads, latency and failures. */
  stats(): SegmentServiceStats {
    return {
      tags: [...this.#buffers.values()].map((buffer) => buffer.stats()).sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0)),
      tagRefreshes: this.#tagRefreshes,
      tagRefreshFailures: this.#tagRefreshFailures,
      lastTagRefreshAt: this.#lastTagRefreshAt,
      negativeCacheSize: this.#negative.size,
    };
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
    let releasedIds = 0;
    let wastedIds = 0;
    await Promise.all(
      buffers.map(async (buffer) => {
        const { tail, wasted } = await buffer.close();
        wastedIds += wasted;
        if (tail === undefined) return;
        const size = Number(tail.to - tail.from);
        // A release whose outcome is unknown is harmless: we issue nothing from the tail either way.
        const released = await withTimeout(this.#store.release(buffer.tag, tail.from, tail.to), this.#loadTimeoutMs, () => storeTimeout('releasing a range', this.#loadTimeoutMs)).catch(() => false);
        if (released) releasedIds += size;
        else wastedIds += size;
      }),
    );
    return { releasedIds, wastedIds };
  }

  async #draw(tag: string, count: number): Promise<bigint[]> {
    if (this.#closing !== undefined) throw closedError();
    const buffer = this.#buffers.get(tag) ?? (await this.#lookup(tag));
    const ids: bigint[] = [];
    for (;;) {
      buffer.take(ids, count - ids.length);
      if (ids.length === count) return ids;
      // Each wait is bounded and each wake-up follows a load (or a failure, which throws), so a
      // batch larger than a range makes progress every round and always ends.
      await withTimeout(buffer.whenReady(), this.#waitTimeoutMs, () => {
        return new IdMintError('SEGMENTS_NOT_READY', `tag "${tag}": no buffered IDs left and the next range did not load within ${this.#waitTimeoutMs} ms; retry`, {
          details: { tag, waitTimeoutMs: this.#waitTimeoutMs },
        });
      });
    }
  }

  /** A tag missing from the cache: ask the store (once, however many requests ask) before TAG_NOT_FOUND. */
  #lookup(tag: string): Promise<SegmentBuffer> {
    checkTag(tag);
    const until = this.#negative.get(tag);
    if (until !== undefined) {
      if (this.#clock.now() < until) return Promise.reject(tagNotFound(tag));
      this.#negative.delete(tag);
    }
    let pending = this.#lookups.get(tag);
    if (pending === undefined) {
      pending = withTimeout(this.#store.getTag(tag), this.#loadTimeoutMs, () => storeTimeout(`looking up tag "${tag}"`, this.#loadTimeoutMs))
        .then((record) => {
          if (record !== undefined) return this.#adopt(record);
          if (this.#negative.size >= NEGATIVE_CACHE_MAX) this.#negative.delete(this.#negative.keys().next().value as string);
          this.#negative.set(tag, this.#clock.now() + this.#negativeCacheMs);
          throw tagNotFound(tag);
        })
        .finally(() => this.#lookups.delete(tag));
      this.#lookups.set(tag, pending);
    }
    return pending;
  }

  /** The buffer for a tag the store has, created on first sight. */
  #adopt(record: TagRecord): SegmentBuffer {
    if (this.#closing !== undefined) throw closedError();
    let buffer = this.#buffers.get(record.tag);
    if (buffer === undefined) {
      buffer = new SegmentBuffer(record.tag, record.step, this.#settings);
      this.#buffers.set(record.tag, buffer);
    } else {
      buffer.setTagStep(record.step);
    }
    this.#negative.delete(record.tag);
    return buffer;
  }

  async #refresh(): Promise<void> {
    let records: TagRecord[];
    try {
      records = await withTimeout(this.#store.listTags(), this.#loadTimeoutMs, () => storeTimeout('listing tags', this.#loadTimeoutMs));
    } catch (error) {
      this.#tagRefreshFailures++;
      const failure = isIdMintError(error) ? error : new IdMintError('STORE_UNAVAILABLE', `listing tags failed: ${String(error)}`, { cause: error });
      this.#onEvent?.({ type: 'refresh', error: failure });
      throw failure;
    }
    if (this.#closing !== undefined) return;
    const present = new Set<string>();
    for (const record of records) {
      present.add(record.tag);
      this.#adopt(record);
    }
    // Deleted tags go; an empty table clears everything (Leaf kept serving deleted tags forever
    // when the table became empty).
    for (const tag of this.#buffers.keys()) if (!present.has(tag)) this.#buffers.delete(tag);
    this.#tagRefreshes++;
    this.#lastTagRefreshAt = this.#clock.now();
    this.#onEvent?.({ type: 'refresh', tags: records.length });
  }
}

function storeTimeout(what: string, ms: number): IdMintError {
  return new IdMintError('STORE_UNAVAILABLE', `${what} took longer than ${ms} ms`, { details: { timeoutMs: ms } });
}

function checkMs(name: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new IdMintError('INVALID_ARGUMENT', `${name} must be an integer number of ms >= ${min}, got ${String(value)}`);
  }
  return value;
}
