import type { Clock } from '../ports/clock.ts';
import type { SegmentRange, SegmentStore } from '../ports/segment-store.ts';
import { IdMintError, isIdMintError } from './errors.ts';
import { nextStep, type StepPolicy } from './step-policy.ts';
import { withTimeout } from './timeout.ts';

/** What every tag's buffer shares with its service. */
export interface SegmentBufferSettings {
  readonly store: SegmentStore;
  readonly clock: Clock;
  readonly stepPolicy: StepPolicy;
  /** Fraction of a range issued before the next range is loaded (Leaf: 0.1). */
  readonly prefetchThreshold: number;
  /** An allocation that takes longer is abandoned: its range is skipped. */
  readonly loadTimeoutMs: number;
  /** After a failed load, no new load starts for this long; callers with nothing buffered fail fast. */
  readonly retryAfterMs: number;
  /** Called after every load, for logs and latency histograms. */
  readonly onEvent: ((event: SegmentLoadEvent) => void) | undefined;
}

/** One range load, successful or not. */
export interface SegmentLoadEvent {
  readonly type: 'load';
  readonly tag: string;
  /** Wall time the allocation took, in ms (sub-millisecond precision). */
  readonly ms: number;
  /** The range loaded; absent when the load failed. */
  readonly range?: SegmentRange;
  /** Why the load failed; absent when it succeeded. */
  readonly error?: IdMintError;
}

/** Figures for one tag, for metrics and the admin API. */
export interface SegmentTagStats {
  readonly tag: string;
  /** Step of the latest range (the dynamic step); 0 before the first load. */
  readonly step: number;
  /** The tag's configured step as last seen in the store: the dynamic step's floor. */
  readonly tagStep: number;
  /** IDs that can be issued without touching the store: rest of the current range plus the next one. */
  readonly remaining: number;
  /** True when the next range is loaded and waiting. */
  readonly nextReady: boolean;
  /** True while a load is in flight. */
  readonly loading: boolean;
  /** Successful range loads. */
  readonly loads: number;
  /** Failed range loads (including abandoned ones). */
  readonly loadFailures: number;
  /** Loads abandoned after `loadTimeoutMs`: if the store committed them, their ranges are skipped. */
  readonly abandonedLoads: number;
  /** Sum and maximum of successful load latencies, in ms. */
  readonly loadMsTotal: number;
  readonly loadMsMax: number;
  /** Message of the latest load failure while it still blocks loading (within retryAfterMs); else null. */
  readonly lastError: string | null;
}

/** The unissued IDs a closed buffer leaves: a tail it may give back, and what is lost for good. */
export interface SegmentLeftover {
  /** `[from, to)`: the unissued top of this buffer's ranges, contiguous up to the last range's end. */
  readonly tail: { readonly from: bigint; readonly to: bigint } | undefined;
  /** Unissued IDs below a gap (current range remainder when the next range is not adjacent). */
  readonly wasted: number;
}

/**
 * One tag's double buffer: a current range that IDs are issued from and a next range loaded in
 * the background once `prefetchThreshold` of the current one is issued (Leaf's design).
 *
 * The hot path, {@link nextSync}, is a number decrement and a bigint increment: `#left` counts
 * the IDs the fast path may issue before anything needs a look (the prefetch threshold, or the end
 * of the range). Everything else (starting a load, switching ranges, backing off after a failure)
 * happens in `#refill`, at most a few times per range.
 *
 * Invariants that keep IDs unique: an ID is issued only from a range the store returned to this
 * buffer; `#cursor` only moves forwards; a new range must start at or above the end of every range
 * loaded before (a store that goes back is refused); an abandoned load's range is never used.
 */
export class SegmentBuffer {
  readonly tag: string;
  readonly #s: SegmentBufferSettings;

  /** Next ID to issue from the current range. */
  #cursor = 0n;
  /** One past the current range's last ID; `#cursor === #end` when it is used up. */
  #end = 0n;
  /** IDs the fast path may issue before `#refill` must look. Never more than `#end - #cursor`. */
  #left = 0;
  /** The loaded, not yet started range. */
  #next: SegmentRange | undefined;
  /** The one load in flight; every caller that needs it shares it. */
  #loading: Promise<void> | undefined;
  /** Step of the latest range (0 before the first: the first load uses the tag's stored step). */
  #step = 0;
  #tagStep: number;
  /** Clock time of the latest successful load, for the dynamic step. */
  #lastLoadAt = 0;
  /** End of the latest range loaded: a new range below it would repeat IDs. */
  #highest = 0n;
  /** The latest failure, and when the next load may be tried. */
  #failure: { readonly error: IdMintError; readonly retryAt: number } | undefined;
  #closed = false;

  #loads = 0;
  #loadFailures = 0;
  #abandonedLoads = 0;
  #loadMsTotal = 0;
  #loadMsMax = 0;

  constructor(tag: string, tagStep: number, settings: SegmentBufferSettings) {
    this.tag = tag;
    this.#tagStep = tagStep;
    this.#s = settings;
  }

  /** The next ID, or undefined when none is buffered (a load is then started or backing off). */
  nextSync(): bigint | undefined {
    if (this.#left > 0) {
      this.#left--;
      return this.#cursor++;
    }
    return this.#refill();
  }

  /**
   * Appends up to `count` IDs to `out` from what is buffered, increasing; returns how many. Runs
   * between threshold checks are copied in a tight loop.
   */
  take(out: bigint[], count: number): number {
    let taken = 0;
    while (taken < count) {
      const first = this.nextSync();
      if (first === undefined) break;
      out.push(first);
      const run = Math.min(count - taken - 1, this.#left);
      let id = this.#cursor;
      for (let i = 0; i < run; i++) out.push(id++);
      this.#cursor = id;
      this.#left -= run;
      taken += run + 1;
    }
    return taken;
  }

  /** IDs that {@link take} can hand out right now without waiting. */
  available(): number {
    if (this.#closed) return 0;
    return Number(this.#end - this.#cursor) + (this.#next === undefined ? 0 : this.#next.step);
  }

  /**
   * Resolves when IDs are buffered (at once if they are), starting a load if none is in flight.
   * Rejects with the load's error; during the retry delay after a failure, rejects at once with
   * that failure (fail fast: no pile-up on a store that is down).
   */
  whenReady(): Promise<void> {
    if (this.#closed) return Promise.reject(closedError());
    if (this.#cursor < this.#end || this.#next !== undefined) return Promise.resolve();
    if (this.#loading !== undefined) return this.#loading;
    const failure = this.#failure;
    if (failure !== undefined && this.#s.clock.now() < failure.retryAt) return Promise.reject(failure.error);
    return this.#load();
  }

  /**
   * Stops issuing at once, lets a load in flight settle, and reports what is left unissued. After
   * this, the buffer issues nothing, ever.
   */
  async close(): Promise<SegmentLeftover> {
    this.#closed = true;
    this.#left = 0;
    if (this.#loading !== undefined) await this.#loading.catch(() => undefined);
    const cursor = this.#cursor;
    const end = this.#end;
    const next = this.#next;
    this.#next = undefined;
    this.#cursor = end;
    if (next === undefined) return { tail: cursor < end ? { from: cursor, to: end } : undefined, wasted: 0 };
    // The current remainder joins the tail only if the next range continues it directly.
    const adjacent = cursor < end && end === next.start;
    return { tail: { from: adjacent ? cursor : next.start, to: next.end }, wasted: adjacent ? 0 : Number(end - cursor) };
  }

  /** The tag's configured step as the store now reports it: the floor from the next load on. */
  setTagStep(step: number): void {
    this.#tagStep = step;
  }

  stats(): SegmentTagStats {
    return {
      tag: this.tag,
      step: this.#step,
      tagStep: this.#tagStep,
      remaining: this.available(),
      nextReady: this.#next !== undefined,
      loading: this.#loading !== undefined,
      loads: this.#loads,
      loadFailures: this.#loadFailures,
      abandonedLoads: this.#abandonedLoads,
      loadMsTotal: this.#loadMsTotal,
      loadMsMax: this.#loadMsMax,
      lastError: this.#failure !== undefined && this.#s.clock.now() < this.#failure.retryAt ? this.#failure.error.message : null,
    };
  }

  #refill(): bigint | undefined {
    if (this.#closed) return undefined;
    if (this.#cursor === this.#end) {
      const next = this.#next;
      if (next === undefined) {
        this.#prefetch();
        return undefined;
      }
      // Range switch: the next range becomes current; up to the threshold no look is needed.
      this.#next = undefined;
      this.#cursor = next.start;
      this.#end = next.end;
      this.#left = Math.floor(next.step * this.#s.prefetchThreshold);
      if (this.#left > 0) {
        this.#left--;
        return this.#cursor++;
      }
    }
    // Past the threshold: make sure the next range is ready or on its way. While a failed load
    // waits out its retry delay, #left stays 0 so every call comes back here and retries in time,
    // before the current range runs dry.
    const covered = this.#prefetch();
    this.#left = covered ? Number(this.#end - this.#cursor) - 1 : 0;
    return this.#cursor++;
  }

  /** Starts a load unless a range is ready or loading; false while backing off after a failure. */
  #prefetch(): boolean {
    if (this.#next !== undefined || this.#loading !== undefined) return true;
    if (this.#failure !== undefined && this.#s.clock.now() < this.#failure.retryAt) return false;
    // Nobody awaits a prefetch: its failure is recorded in #failure and seen by whenReady().
    this.#load().catch(() => undefined);
    return true;
  }

  #load(): Promise<void> {
    const s = this.#s;
    // The first load takes the tag's stored step in the same atomic step as the allocation.
    const step = this.#step === 0 ? undefined : nextStep(s.stepPolicy, { step: this.#step, tagStep: this.#tagStep, lastedMs: s.clock.now() - this.#lastLoadAt });
    const started = performance.now(); // latency for stats only; behaviour reads the injected clock
    const loading = withTimeout(s.store.allocate(this.tag, step), s.loadTimeoutMs, () => {
      this.#abandonedLoads++;
      return new IdMintError(
        'STORE_UNAVAILABLE',
        `tag "${this.tag}": allocating a range took longer than ${s.loadTimeoutMs} ms; its outcome is unknown, so that range is skipped`,
        { details: { tag: this.tag, timeoutMs: s.loadTimeoutMs } },
      );
    }).then(
      (range) => this.#loaded(range, step, performance.now() - started),
      (error: unknown) => this.#failed(error, performance.now() - started),
    );
    this.#loading = loading;
    return loading;
  }

  #loaded(range: SegmentRange, step: number | undefined, ms: number): void {
    const valid =
      range.tag === this.tag &&
      range.step >= 1 &&
      range.end - range.start === BigInt(range.step) &&
      (step === undefined || range.step === step) &&
      range.start >= this.#highest;
    if (!valid) {
      // A store that hands out a range below one already loaded (a restored backup, a reset
      // row) would make this process repeat IDs: refuse it rather than issue from it.
      this.#failed(
        new IdMintError(
          'STORE_UNAVAILABLE',
          `tag "${this.tag}": the store returned range [${range.start}, ${range.end}) of step ${range.step}, which is malformed or starts below IDs already loaded (${this.#highest}); was max_id moved back?`,
          { details: { tag: this.tag, start: range.start.toString(), end: range.end.toString(), highest: this.#highest.toString() } },
        ),
        ms,
      );
    }
    this.#loading = undefined;
    this.#failure = undefined;
    this.#highest = range.end;
    this.#next = range;
    this.#step = range.step;
    this.#tagStep = range.tagStep;
    this.#lastLoadAt = this.#s.clock.now();
    this.#loads++;
    this.#loadMsTotal += ms;
    if (ms > this.#loadMsMax) this.#loadMsMax = ms;
    this.#s.onEvent?.({ type: 'load', tag: this.tag, ms, range });
  }

  #failed(cause: unknown, ms: number): never {
    const error = isIdMintError(cause)
      ? cause
      : new IdMintError('STORE_UNAVAILABLE', `tag "${this.tag}": allocating a range failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.#loading = undefined;
    this.#failure = { error, retryAt: this.#s.clock.now() + this.#s.retryAfterMs };
    this.#left = 0; // the fast path must look again, so a retry happens while IDs are still buffered
    this.#loadFailures++;
    this.#s.onEvent?.({ type: 'load', tag: this.tag, ms, error });
    throw error;
  }
}

/** The error for a request that reaches a closed service or buffer. */
export function closedError(): IdMintError {
  return new IdMintError('SEGMENTS_NOT_READY', 'the segment service is closed (shutting down); ask another node');
}
