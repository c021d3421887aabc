import { IdMintError } from '../core/errors.ts';
import { MAX_SEGMENT_STRIDE } from '../core/segment-limits.ts';

/** Settings of local mode (`IdMintClient` option `local`); every duration in ms. */
export interface LocalModeOptions {
  /** IDs asked for in a tag's first range. Default 1000. */
  readonly initialSize?: number;
  /** Smallest range asked for. Default 100. */
  readonly minSize?: number;
  /** Largest range asked for; at most the servers' `api.maxBatch`. Default 10000 (its default). */
  readonly maxSize?: number;
  /**
   * Fraction of a range issued before the next one is fetched, 0 to 1. Default 0.2 (TinyId's 20%).
   */
  readonly prefetchThreshold?: number;
  /**
   * Target lifetime of a range: a range used up in less than this doubles the next size, one
   * lasting over twice as long halves it (Leaf's dynamic step, at the caller). Default 10000.
   */
  readonly rangeDurationMs?: number;
  /** First backoff of a server that failed, doubled per failure in a row. Default 250. */
  readonly backoffMs?: number;
  /** Longest backoff. Default 10000. */
  readonly maxBackoffMs?: number;
  /**
   * `increasing` (default): the IDs `nextId` returns for a tag strictly increase; a range from a
   * server that is behind another (after a failover) is trimmed to its part above the IDs already
   * held, or dropped, never issued out of order. `any`: ranges are used whole in any order (a set
   * of databases, whose classes run at different heights, is trend-increasing only).
   */
  readonly ordering?: 'increasing' | 'any';
  /**
   * Index in `urls` of the server asked first; default a random one, so clients spread over the
   * servers.
   */
  readonly firstServer?: number;
}

/** The settings with their defaults, checked. */
export interface LocalSettings {
  readonly initialSize: number;
  readonly minSize: number;
  readonly maxSize: number;
  readonly prefetchThreshold: number;
  readonly rangeDurationMs: number;
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  readonly ordering: 'increasing' | 'any';
}

/** Fetches a range of up to `size` IDs of `tag` from some server; throws IdMintError. */
export type RangeFetcher = (tag: string, size: number) => Promise<unknown>;

/** A range as the client holds it: `start`, `start + stride`, ... below `end`. */
interface HeldRange {
  readonly start: bigint;
  readonly end: bigint;
  readonly stride: bigint;
}

/** Figures for one tag, for stats and tests. */
export interface LocalTagStats {
  readonly tag: string;
  /** IDs held and not yet issued (current range plus the next one). */
  readonly buffered: number;
  /** Size of the next range asked for. */
  readonly size: number;
  readonly fetches: number;
  readonly fetchFailures: number;
  /** IDs received below the ones already held, dropped to keep `increasing` order. */
  readonly droppedIds: number;
  /** Code of the failure that currently stops fetching, or null. */
  readonly lastErrorCode: string | null;
}

/** Checks the options and fills in defaults. INVALID_ARGUMENT naming the option. */
export function localSettings(options: LocalModeOptions = {}): LocalSettings {
  const int = (
    name: keyof LocalModeOptions,
    fallback: number,
    min: number,
    max: number,
  ): number => {
    const value = (options[name] as number | undefined) ?? fallback;
    if (!Number.isSafeInteger(value) || value < min || value > max)
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `local.${name} must be an integer from ${min} to ${max}, got ${String(value)}`,
      );
    return value;
  };
  const minSize = int('minSize', 100, 1, 10_000_000);
  const maxSize = int('maxSize', Math.max(10_000, minSize), minSize, 10_000_000);
  const initialSize = int(
    'initialSize',
    Math.min(maxSize, Math.max(minSize, 1000)),
    minSize,
    maxSize,
  );
  const backoffMs = int('backoffMs', 250, 1, 3_600_000);
  const prefetchThreshold = options.prefetchThreshold ?? 0.2;
  if (
    typeof prefetchThreshold !== 'number' ||
    !(prefetchThreshold >= 0 && prefetchThreshold <= 1)
  ) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `local.prefetchThreshold must be a number from 0 to 1, got ${String(prefetchThreshold)}`,
    );
  }
  const ordering = options.ordering ?? 'increasing';
  if (ordering !== 'increasing' && ordering !== 'any')
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `local.ordering must be "increasing" or "any", got ${JSON.stringify(ordering)}`,
    );
  return {
    initialSize,
    minSize,
    maxSize,
    prefetchThreshold,
    rangeDurationMs: int('rangeDurationMs', 10_000, 1, 86_400_000),
    backoffMs,
    maxBackoffMs: int('maxBackoffMs', Math.max(10_000, backoffMs), backoffMs, 3_600_000),
    ordering,
  };
}

/**
 * One tag's ranges in the caller's process: a current range IDs come from and a next one fetched
 * in the background once `prefetchThreshold` of the current one is issued (the double buffer of
 * core/segment-buffer.ts, with a server in place of the store).
 *
 * The hot path, {@link nextSync}, is a number decrement and a bigint addition. Invariants that keep
 * IDs unique: an ID is issued only from a range a server answered (a request that timed out is
 * never read), the cursor only moves forwards, and a range is used once. With `increasing`
 * ordering every accepted range starts at or above the end of the ranges before it.
 */
export class TagRanges {
  readonly tag: string;
  readonly #s: LocalSettings;
  readonly #fetch: RangeFetcher;
  readonly #now: () => number;

  #cursor = 0n;
  #end = 0n;
  #stride = 1n;
  /**
   * IDs the fast path may issue before #refill must look; never more than the current range holds.
   */
  #left = 0;
  #next: HeldRange | undefined;
  #loading: Promise<void> | undefined;
  /** The failure that stops fetching until `retryAt`. */
  #failure: { readonly error: IdMintError; readonly retryAt: number } | undefined;
  /** Every accepted ID is below this (ordering `increasing`). */
  #highest = 0n;
  #size: number;
  #lastFetchAt: number | undefined;
  #fetches = 0;
  #fetchFailures = 0;
  #droppedIds = 0;

  constructor(tag: string, settings: LocalSettings, fetcher: RangeFetcher, now: () => number) {
    this.tag = tag;
    this.#s = settings;
    this.#fetch = fetcher;
    this.#now = now;
    this.#size = settings.initialSize;
  }

  /** The next ID if one is held, else undefined (a fetch is then started unless backing off). */
  nextSync(): bigint | undefined {
    if (this.#left > 0) {
      this.#left--;
      const id = this.#cursor;
      this.#cursor = id + this.#stride;
      return id;
    }
    return this.#refill();
  }

  /**
   * The next ID, waiting for a range when none is held. Throws RANGES_EXHAUSTED (retryable) when
   * no server answered and nothing is held, at once while the servers are backed off; a server's
   * own non-retryable error (TAG_NOT_FOUND, FORBIDDEN, OPAQUE_RANGE_REFUSED, ...) as it is.
   */
  async next(): Promise<bigint> {
    for (;;) {
      const id = this.nextSync();
      if (id !== undefined) return id;
      const failure = this.#failure;
      if (failure !== undefined && this.#now() < failure.retryAt) throw failure.error;
      await (this.#loading ?? this.#load());
    }
  }

  stats(): LocalTagStats {
    const failure = this.#failure;
    return {
      tag: this.tag,
      buffered: this.#buffered(),
      size: this.#size,
      fetches: this.#fetches,
      fetchFailures: this.#fetchFailures,
      droppedIds: this.#droppedIds,
      lastErrorCode:
        failure !== undefined && this.#now() < failure.retryAt ? failure.error.code : null,
    };
  }

  #buffered(): number {
    const next = this.#next;
    return (
      Number((this.#end - this.#cursor) / this.#stride) +
      (next === undefined ? 0 : Number((next.end - next.start) / next.stride))
    );
  }

  #refill(): bigint | undefined {
    if (this.#cursor >= this.#end) {
      const next = this.#next;
      if (next === undefined) {
        this.#prefetch();
        return undefined;
      }
      this.#next = undefined;
      this.#cursor = next.start;
      this.#end = next.end;
      this.#stride = next.stride;
      const ids = idsIn(next);
      // Up to the threshold nothing needs a look; past it the next range is fetched (1: when
      // empty).
      this.#left = Math.floor(ids * this.#s.prefetchThreshold);
      if (this.#left > 0) {
        this.#left--;
        const id = this.#cursor;
        this.#cursor = id + this.#stride;
        return id;
      }
    }
    // Past the threshold: the next range must be held or on its way. While fetching backs off
    // after a failure, #left stays 0 so every call comes back here and retries in time.
    const covered = this.#prefetch();
    const id = this.#cursor;
    this.#cursor = id + this.#stride;
    this.#left = covered ? Number((this.#end - this.#cursor) / this.#stride) : 0;
    return id;
  }

  /**
   * Starts a fetch unless a range is held or on its way; false while backing off after a failure.
   */
  #prefetch(): boolean {
    if (this.#next !== undefined || this.#loading !== undefined) return true;
    if (this.#failure !== undefined && this.#now() < this.#failure.retryAt) return false;
    this.#load().catch(() => undefined); // recorded in #failure, seen by next()
    return true;
  }

  #load(): Promise<void> {
    this.#adaptSize();
    const size = this.#size;
    const loading = this.#fetch(this.tag, size).then(
      (answer) => this.#loaded(answer),
      (error: unknown) => this.#failed(error),
    );
    this.#loading = loading;
    return loading;
  }

  /** Leaf's dynamic step at the caller: the time since the last fetch says how fast IDs go. */
  #adaptSize(): void {
    const now = this.#now();
    const last = this.#lastFetchAt;
    this.#lastFetchAt = now;
    if (last === undefined || this.#fetches === 0) return;
    const lasted = now - last;
    if (lasted < this.#s.rangeDurationMs) this.#size = Math.min(this.#s.maxSize, this.#size * 2);
    else if (lasted > 2 * this.#s.rangeDurationMs)
      this.#size = Math.max(this.#s.minSize, Math.floor(this.#size / 2));
  }

  #loaded(answer: unknown): void {
    this.#loading = undefined;
    let range = parseRange(answer, this.tag);
    if (range === undefined) {
      this.#failed(
        new IdMintError(
          'SERVER_UNAVAILABLE',
          `tag "${this.tag}": a server answered a range request with a malformed range; ` +
            `nothing of it is issued`,
        ),
      );
    }
    if (this.#s.ordering === 'increasing') {
      // Only the part at or above every ID already held is kept. A range with no ID there (a
      // server behind the one before it, or a range of another class of a set that ends just past
      // the floor) is dropped whole and another fetched: a held range is never empty, since
      // #refill hands out its cursor before looking at its end.
      const kept = idsFrom(range, this.#highest);
      this.#droppedIds += idsIn(range) - (kept === undefined ? 0 : idsIn(kept));
      if (kept === undefined) {
        this.#fetches++;
        this.#prefetch();
        return;
      }
      range = kept;
    }
    if (range.end > this.#highest) this.#highest = range.end;
    this.#failure = undefined;
    this.#fetches++;
    this.#next = range;
  }

  #failed(cause: unknown): never {
    this.#loading = undefined;
    this.#fetchFailures++;
    const error =
      cause instanceof IdMintError
        ? cause
        : new IdMintError(
            'SERVER_UNAVAILABLE',
            `tag "${this.tag}": fetching a range failed: ${String(cause)}`,
            { cause },
          );
    const retryAt =
      typeof error.details?.['retryAt'] === 'number'
        ? error.details['retryAt']
        : this.#now() + this.#s.backoffMs;
    // Every server down (or none answering) is local mode's own, retryable error; a server's
    // answer that another server would give too (an unknown tag, a refused token) stays as it is.
    const shown =
      error.code === 'SERVER_UNAVAILABLE'
        ? new IdMintError(
            'RANGES_EXHAUSTED',
            `tag "${this.tag}": no held IDs left and no idmint server answered a range ` +
              `request; retrying by itself from ` +
              `${Math.max(0, Math.round(retryAt - this.#now()))} ms on (${error.message})`,
            { cause: error, details: { tag: this.tag, retryAt } },
          )
        : error;
    this.#failure = { error: shown, retryAt };
    this.#left = 0; // the fast path must look again, so a retry happens while IDs are still held
    throw shown;
  }
}

const DECIMAL = /^[0-9]{1,19}$/;

/** How many IDs a range holds. */
function idsIn(range: HeldRange): number {
  return Number((range.end - range.start) / range.stride);
}

/**
 * The range's IDs at or above `floor` (it starts at its first ID of its class there), or undefined
 * when it has none: trimmed, a range can end before its first ID left, and it is then empty.
 */
function idsFrom(range: HeldRange, floor: bigint): HeldRange | undefined {
  const skipped =
    range.start >= floor ? 0n : (floor - range.start + range.stride - 1n) / range.stride;
  const start = range.start + skipped * range.stride;
  return start < range.end ? { start, end: range.end, stride: range.stride } : undefined;
}

/** A range answer, checked: undefined unless every field is there and consistent. */
function parseRange(answer: unknown, tag: string): HeldRange | undefined {
  if (answer === null || typeof answer !== 'object') return undefined;
  const { tag: answered, start, end, stride, size } = answer as Record<string, unknown>;
  if (
    answered !== tag ||
    typeof start !== 'string' ||
    typeof end !== 'string' ||
    !DECIMAL.test(start) ||
    !DECIMAL.test(end)
  )
    return undefined;
  if (
    typeof stride !== 'number' ||
    !Number.isSafeInteger(stride) ||
    stride < 1 ||
    stride > MAX_SEGMENT_STRIDE ||
    typeof size !== 'number' ||
    !Number.isSafeInteger(size) ||
    size < 1
  )
    return undefined;
  const range = { start: BigInt(start), end: BigInt(end), stride: BigInt(stride) };
  return range.end - range.start === BigInt(size) * range.stride ? range : undefined;
}
