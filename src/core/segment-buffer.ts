import type { Clock } from '../ports/clock.ts';
import type { SegmentRange } from '../ports/segment-store.ts';
import { IdMintError, isIdMintError } from './errors.ts';
import { MAX_SEGMENT_DATABASES } from './segment-limits.ts';
import { nextStep, type StepPolicy } from './step-policy.ts';

/** What every tag's buffer shares with its service. */
export interface SegmentBufferSettings {
  /**
   * Allocates a range: the store's `allocate`, bounded in time by the service (core keeps no
   * timers). A call that outlives its bound rejects with STORE_UNAVAILABLE whose details say
   * `abandoned: true`: its outcome is unknown, so its range is skipped.
   */
  readonly allocate: (tag: string, step: number | undefined) => Promise<SegmentRange>;
  /**
   * Raises the tag's max_id to at least `atLeast` (never lowers it): the store's `raise`, bounded
   * in time by the service. Used when the store hands out a range below IDs already loaded.
   */
  readonly raise: (tag: string, atLeast: bigint) => Promise<unknown>;
  readonly clock: Clock;
  readonly stepPolicy: StepPolicy;
  /** Fraction of a range issued before the next range is loaded (Leaf: 0.1). */
  readonly prefetchThreshold: number;
  /**
   * After a failed load, no new load starts for this long; callers with nothing buffered fail fast.
   */
  readonly retryAfterMs: number;
  /** Called after every load and heal, for logs, metrics and latency histograms. */
  readonly onEvent: ((event: SegmentLoadEvent | SegmentHealEvent) => void) | undefined;
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

/**
 * The store handed out a range below IDs this buffer had already loaded of its class (its history
 * went back further than a fence covered, or was restored unfenced): the range was not used, and
 * the tag's max_id was raised to `highest`, the end of those IDs, before allocating again.
 */
export interface SegmentHealEvent {
  readonly type: 'heal';
  readonly tag: string;
  /** The range refused. */
  readonly range: SegmentRange;
  /** Where max_id was raised to: the end of the latest range of the class loaded before. */
  readonly highest: bigint;
}

/** Figures for one tag, for metrics and the admin API. */
export interface SegmentTagStats {
  readonly tag: string;
  /** Step of the latest range (the dynamic step); 0 before the first load. */
  readonly step: number;
  /** The tag's configured step as last seen in the store (an allocation or a tag refresh). */
  readonly tagStep: number;
  /**
   * IDs that can be issued without touching the store: rest of the current range plus the next one.
   */
  readonly remaining: number;
  /** True when the next range is loaded and waiting. */
  readonly nextReady: boolean;
  /** True while a load is in flight. */
  readonly loading: boolean;
  /** Successful range loads. */
  readonly loads: number;
  /** Failed range loads (including abandoned ones). */
  readonly loadFailures: number;
  /**
   * Loads abandoned after the service's load timeout: if the store committed them, their ranges are
   * skipped.
   */
  readonly abandonedLoads: number;
  /**
   * Ranges refused because they started below IDs already loaded, each followed by raising max_id
   * past them (SegmentHealEvent).
   */
  readonly heals: number;
  /** Sum and maximum of successful load latencies, in ms. */
  readonly loadMsTotal: number;
  readonly loadMsMax: number;
  /**
   * Message of the latest load failure while it still blocks loading (within retryAfterMs); else
   * null.
   */
  readonly lastError: string | null;
  /** Code of that failure (`lastError`'s), or null. */
  readonly lastErrorCode: string | null;
  /**
   * IDs handed out so far (every range loaded, less what is still buffered): its growth is the draw
   * rate.
   */
  readonly issued: number;
  /**
   * The range IDs are issued from now: `[start, end)`, `position` the next ID; null before the
   * first.
   */
  readonly range: {
    readonly start: bigint;
    readonly end: bigint;
    readonly position: bigint;
  } | null;
  /** The loaded, not yet started range; null when none is waiting. */
  readonly next: { readonly start: bigint; readonly end: bigint } | null;
}

/** The unissued IDs a closed buffer leaves: tails it may give back, and what is lost for good. */
export interface SegmentLeftover {
  /**
   * The unissued tops of this buffer's ranges, at most one per residue class (per database of a
   * set): `[from, to)` stepping by `stride`, contiguous up to the end of the latest range of its
   * class. Empty when nothing is left.
   */
  readonly tails: readonly SegmentTail[];
  /**
   * Unissued IDs below a gap (current range remainder when the next range of its class is not
   * adjacent).
   */
  readonly wasted: number;
}

/** IDs handed out as one run: `start`, `start + stride`, ... below `end`; `count` of them. */
export interface SegmentRun {
  readonly start: bigint;
  readonly end: bigint;
  readonly stride: number;
  readonly count: number;
}

/** An unissued tail: `from`, `from + stride`, ... below `to`; `ids` of them. */
export interface SegmentTail {
  readonly from: bigint;
  readonly to: bigint;
  readonly stride: number;
  readonly ids: number;
}

/**
 * Why a range is not issued from; `below`, for one below IDs already loaded, is the end of those
 * IDs.
 */
interface RangeProblem {
  readonly message: string;
  readonly below?: bigint;
}

/**
 * How many times in a row one load raises the row and allocates again before it gives up (and the
 * range is refused as before): a store that goes back again after being raised is not settling.
 */
const MAX_HEALS = 3;

/**
 * One tag's double buffer: a current range that IDs are issued from and a next range loaded in
 * the background once `prefetchThreshold` of the current one is issued (Leaf's design).
 *
 * The hot path, {@link nextSync}, is a number decrement and a bigint addition: `#left` counts
 * the IDs the fast path may issue before anything needs a look (the prefetch threshold, or the end
 * of the range). Everything else (starting a load, switching ranges, backing off after a failure)
 * happens in `#refill`, at most a few times per range.
 *
 * A range's IDs are `stride` apart (1 from one database; N from one database of a set of N,
 * whose IDs share a residue mod N): the cursor steps by it, and counts divide by it.
 *
 * Invariants that keep IDs unique: an ID is issued only from a range the store returned to this
 * buffer; `#cursor` only moves forwards; every range has the stride of the first; a new range must
 * start at or above the end of every range of its residue class loaded before (a store that goes
 * back is never issued from: the buffer raises max_id past its own IDs and allocates again, so it
 * heals instead of refusing until the row climbs back; with one database there is one class, so
 * that is every range); an abandoned load's range is never used. Ranges of different classes
 * never share an ID, so a set's databases may each be anywhere: IDs increase per class, and across
 * classes only as the databases do.
 */
export class SegmentBuffer {
  readonly tag: string;
  readonly #s: SegmentBufferSettings;

  /** Next ID to issue from the current range. */
  #cursor = 0n;
  /** One past the current range's last ID; `#cursor === #end` when it is used up. */
  #end = 0n;
  /** Distance between the current range's IDs (1n from one database). */
  #stride = 1n;
  /** First ID of the current range, for stats; -1n before the first range. */
  #start = -1n;
  /** IDs the fast path may issue before `#refill` must look. Never more than `#end - #cursor`. */
  #left = 0;
  /** The loaded, not yet started range. */
  #next: SegmentRange | undefined;
  /** The one load in flight; every caller that needs it shares it. */
  #loading: Promise<void> | undefined;
  /**
   * The end of the latest store allocation (a load or a dedicated range), settled either way:
   * every allocation starts after it, so ranges land in the order the store gave them and the
   * check that a range never starts below one loaded before stays sound.
   */
  #turn: Promise<unknown> = Promise.resolve();
  /** Allocations started or queued and not yet settled. */
  #allocations = 0;
  /** Step of the latest range; 0 before the first load. */
  #step = 0;
  /** The tag's step as last seen in the store (an allocation or a tag refresh), for stats. */
  #tagStep: number;
  /** The stored step read with the latest allocation: Leaf's `minStep`, the floor of a shrink. */
  #minStep = 0;
  /** Clock time of the latest successful load, for the dynamic step. */
  #lastLoadAt = 0;
  /**
   * Per residue class (`start % stride`), the end of its latest range: a new range of the class
   * below it would repeat IDs.
   */
  readonly #highest = new Map<bigint, bigint>();
  /** The stride of every range: fixed by the first one loaded (undefined before). */
  #rangeStride: number | undefined;
  /** The latest failure, and when the next load may be tried. */
  #failure: { readonly error: IdMintError; readonly retryAt: number } | undefined;
  #closed = false;

  /** Loads of the double buffer: the first two take the stored step (see #load). */
  #loads = 0;
  /** Ranges allocated for one caller ({@link allocateRun}); counted in stats' loads. */
  #dedicatedLoads = 0;
  #loadFailures = 0;
  #abandonedLoads = 0;
  #heals = 0;
  #loadMsTotal = 0;
  #loadMsMax = 0;
  /** IDs in every range loaded (stats: issued = this less what is still buffered). */
  #loadedIds = 0;

  constructor(tag: string, tagStep: number, settings: SegmentBufferSettings) {
    this.tag = tag;
    this.#tagStep = tagStep;
    this.#s = settings;
  }

  /** The next ID, or undefined when none is buffered (a load is then started or backing off). */
  nextSync(): bigint | undefined {
    if (this.#left > 0) {
      this.#left--;
      // Not `this.#cursor++`: the postfix form on a private field measured at half this speed.
      const id = this.#cursor;
      this.#cursor = id + this.#stride;
      return id;
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
      const stride = this.#stride;
      let id = this.#cursor;
      for (let i = 0; i < run; i++) {
        out.push(id);
        id += stride;
      }
      this.#cursor = id;
      this.#left -= run;
      taken += run + 1;
    }
    return taken;
  }

  /**
   * Takes up to `max` IDs as one run of the current range: `count` IDs from `start`, `stride`
   * apart, the run ending at `end` (exclusive). A run never spans two ranges (the next range is
   * seldom adjacent, and never in a set of databases), so when the current range has fewer than
   * `max` left the run is its rest: shorter, nothing skipped. Undefined when nothing is buffered
   * (as {@link nextSync}). Crossing the prefetch threshold starts the next load, as IDs do.
   */
  takeRun(max: number): SegmentRun | undefined {
    const first = this.nextSync(); // switches ranges and starts loads exactly as one ID does
    if (first === undefined) return undefined;
    const stride = this.#stride;
    const run = Math.min(max - 1, Number((this.#end - this.#cursor) / stride));
    this.#cursor += BigInt(run) * stride;
    if (run <= this.#left) {
      this.#left -= run;
    } else {
      // The run crossed the threshold: the next range must be ready or on its way.
      const covered = this.#prefetch();
      this.#left = covered ? Number((this.#end - this.#cursor) / stride) : 0;
    }
    return { start: first, end: this.#cursor, stride: Number(stride), count: run + 1 };
  }

  /**
   * Takes exactly `size` IDs as one run when the current range holds them (or, when it is used
   * up, the next range does); undefined otherwise, with nothing taken. As {@link takeRun}, which
   * it uses: crossing the prefetch threshold starts the next load.
   */
  takeExactRun(size: number): SegmentRun | undefined {
    if (this.#closed) return undefined;
    const rest =
      this.#cursor < this.#end
        ? Number((this.#end - this.#cursor) / this.#stride)
        : (this.#next?.step ?? 0);
    return rest >= size ? this.takeRun(size) : undefined;
  }

  /**
   * A range of exactly `size` IDs allocated from the store for one caller (one atomic allocation,
   * outside the double buffer), as one run. It is checked as every loaded range is (it must start
   * at or above the IDs already loaded of its class, else the row is raised and it is allocated
   * again) and counts as loaded and issued at once. Allocations of this buffer run one at a time,
   * loads included. Rejects at once during the back-off after a failed allocation; a failure of
   * its own starts that back-off (so a store that is down gets one try per `retryAfterMs`),
   * except ID_SPACE_EXHAUSTED, which a smaller range may not meet. A buffer closed meanwhile
   * drops the range: never issued.
   */
  allocateRun(size: number): Promise<SegmentRun> {
    if (this.#closed) return Promise.reject(closedError());
    const failure = this.#failure;
    if (failure !== undefined && this.#s.clock.now() < failure.retryAt)
      return Promise.reject(failure.error);
    return this.#serial(() => this.#dedicated(size));
  }

  /** IDs that {@link take} can hand out right now without waiting. */
  available(): number {
    if (this.#closed) return 0;
    return (
      Number((this.#end - this.#cursor) / this.#stride) +
      (this.#next === undefined ? 0 : this.#next.step)
    );
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
    if (failure !== undefined && this.#s.clock.now() < failure.retryAt)
      return Promise.reject(failure.error);
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
    // A dedicated allocation in flight lands (and is dropped) before the tails are read, so a
    // give-back compares max_id with what the store holds after it.
    await this.#turn;
    const cursor = this.#cursor;
    const end = this.#end;
    const stride = Number(this.#stride);
    const next = this.#next;
    this.#next = undefined;
    this.#cursor = end;
    const rest =
      cursor < end
        ? { from: cursor, to: end, stride, ids: Number((end - cursor) / this.#stride) }
        : undefined;
    if (next === undefined) return { tails: rest === undefined ? [] : [rest], wasted: 0 };
    const upper = { from: next.start, to: next.end, stride: next.stride ?? 1, ids: next.step };
    if (rest === undefined) return { tails: [upper], wasted: 0 };
    // The current remainder joins the tail only if the next range continues it directly.
    if (end === next.start)
      return {
        tails: [{ from: cursor, to: next.end, stride, ids: rest.ids + next.step }],
        wasted: 0,
      };
    // A remainder of another residue class came from another database of a set, whose max_id
    // the next range did not move: it is the top of its own class and may go back there. (With
    // one database there is one class, and a remainder below a gap is wasted, as before.)
    if ((next.start - end) % this.#stride !== 0n) return { tails: [upper, rest], wasted: 0 };
    return { tails: [upper], wasted: rest.ids };
  }

  /**
   * The tag's configured step as the store now reports it, for stats. The dynamic step does not
   * follow it: as in Leaf, a new stored step applies to the first two loads after a restart and
   * is the floor of shrinking from the next allocation on (see nextStep).
   */
  setTagStep(step: number): void {
    this.#tagStep = step;
  }

  /**
   * IDs handed out so far; read by the dashboard's sampler every second, so it allocates nothing.
   */
  issued(): number {
    return this.#loadedIds - this.available();
  }

  stats(): SegmentTagStats {
    const next = this.#next;
    return {
      tag: this.tag,
      step: this.#step,
      tagStep: this.#tagStep,
      remaining: this.available(),
      nextReady: this.#next !== undefined,
      loading: this.#loading !== undefined,
      loads: this.#loads + this.#dedicatedLoads,
      loadFailures: this.#loadFailures,
      abandonedLoads: this.#abandonedLoads,
      heals: this.#heals,
      loadMsTotal: this.#loadMsTotal,
      loadMsMax: this.#loadMsMax,
      lastError:
        this.#failure !== undefined && this.#s.clock.now() < this.#failure.retryAt
          ? this.#failure.error.message
          : null,
      lastErrorCode:
        this.#failure !== undefined && this.#s.clock.now() < this.#failure.retryAt
          ? this.#failure.error.code
          : null,
      issued: this.issued(),
      range:
        this.#start < 0n ? null : { start: this.#start, end: this.#end, position: this.#cursor },
      next: next === undefined ? null : { start: next.start, end: next.end },
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
      this.#start = next.start;
      this.#cursor = next.start;
      this.#end = next.end;
      this.#stride = BigInt(next.stride ?? 1);
      this.#left = Math.floor(next.step * this.#s.prefetchThreshold);
      if (this.#left > 0) {
        this.#left--;
        const id = this.#cursor;
        this.#cursor = id + this.#stride;
        return id;
      }
    }
    // Past the threshold: make sure the next range is ready or on its way. While a failed load
    // waits out its retry delay, #left stays 0 so every call comes back here and retries in time,
    // before the current range runs dry.
    const covered = this.#prefetch();
    this.#left = covered ? Number((this.#end - this.#cursor) / this.#stride) - 1 : 0;
    const id = this.#cursor;
    this.#cursor = id + this.#stride;
    return id;
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
    const loading = this.#serial(() => {
      const s = this.#s;
      // Leaf's first two loads (the first range and the first prefetch) take the tag's stored
      // step, read in the same atomic step as the allocation; the dynamic step starts with the
      // third, timed from the second (SegmentIDGenImpl.updateSegmentFromDb's three branches).
      const step =
        this.#loads < 2
          ? undefined
          : nextStep(s.stepPolicy, {
              step: this.#step,
              minStep: this.#minStep,
              lastedMs: s.clock.now() - this.#lastLoadAt,
            });
      const started = performance.now(); // latency for stats only; behaviour reads the clock
      return this.#allocateAbove(step).then(
        (range) => this.#loaded(range, step, performance.now() - started),
        (error: unknown) => this.#failed(error, performance.now() - started),
      );
    });
    this.#loading = loading;
    return loading;
  }

  /**
   * Runs `work` after every allocation before it has settled (see #turn): at once when none is in
   * flight, so a load starts within the call that needs it, as callers of {@link nextSync} expect.
   */
  #serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#allocations === 0 ? work() : this.#turn.then(work);
    this.#allocations++;
    const settled = () => {
      this.#allocations--;
    };
    this.#turn = run.then(settled, settled);
    return run;
  }

  async #dedicated(size: number): Promise<SegmentRun> {
    if (this.#closed) throw closedError();
    const started = performance.now();
    let range: SegmentRange;
    try {
      range = await this.#allocateAbove(size);
    } catch (error) {
      throw this.#recordFailure(error, performance.now() - started, true);
    }
    const ms = performance.now() - started;
    const problem = this.#problem(range, size);
    if (problem !== undefined) throw this.#recordFailure(this.#refusal(range, problem), ms, false);
    const stride = range.stride ?? 1;
    this.#rangeStride = stride;
    this.#highest.set(range.start % BigInt(stride), range.end);
    this.#failure = undefined;
    this.#tagStep = range.tagStep;
    this.#minStep = range.tagStep;
    this.#dedicatedLoads++;
    this.#loadedIds += range.step;
    this.#loadMsTotal += ms;
    if (ms > this.#loadMsMax) this.#loadMsMax = ms;
    this.#s.onEvent?.({ type: 'load', tag: this.tag, ms, range });
    // Allocated after close began: dropped, never issued (the IDs are lost, not reissued).
    if (this.#closed) throw closedError();
    return { start: range.start, end: range.end, stride, count: range.step };
  }

  /**
   * Allocates a range. One that starts below IDs this buffer already loaded of its class (the
   * store went back further than a fence covered, or was restored unfenced) is never issued from:
   * max_id is raised past those IDs (never lowered) and a range allocated again, so the node goes
   * on serving instead of refusing until the row climbs back by itself. After {@link MAX_HEALS}
   * such ranges in a row, the last goes to #loaded, which refuses it.
   */
  async #allocateAbove(step: number | undefined): Promise<SegmentRange> {
    for (let heals = 0; ; heals++) {
      const range = await this.#s.allocate(this.tag, step);
      const highest = this.#problem(range, step)?.below;
      if (highest === undefined || heals >= MAX_HEALS) return range;
      await this.#s.raise(this.tag, highest);
      this.#heals++;
      this.#s.onEvent?.({ type: 'heal', tag: this.tag, range, highest });
    }
  }

  /**
   * Why a range must not be issued from, or undefined: malformed; of another stride than the
   * ranges before (a set re-formed under this node); or below IDs already loaded of its class, a
   * store gone back (`below` is then the end of those IDs, what a heal raises max_id to).
   */
  #problem(range: SegmentRange, step: number | undefined): RangeProblem | undefined {
    const stride = range.stride ?? 1;
    const strideOk = Number.isSafeInteger(stride) && stride >= 1 && stride <= MAX_SEGMENT_DATABASES;
    const sized =
      range.step >= 1 && range.end - range.start === BigInt(range.step) * BigInt(stride);
    if (
      !(strideOk && range.tag === this.tag && sized && (step === undefined || range.step === step))
    ) {
      return { message: 'which is malformed' };
    }
    if (this.#rangeStride !== undefined && stride !== this.#rangeStride) {
      const before = `the stride ${this.#rangeStride} of the ranges before it`;
      const question = '(was the set of databases re-formed under this node?)';
      return { message: `whose stride ${stride} is not ${before} ${question}` };
    }
    const highest = this.#highest.get(range.start % BigInt(stride)) ?? 0n;
    if (range.start >= highest) return undefined;
    return {
      message: `which starts below IDs already loaded (${highest}); was max_id moved back?`,
      below: highest,
    };
  }

  #loaded(range: SegmentRange, step: number | undefined, ms: number): void {
    const stride = range.stride ?? 1;
    const strideOk = Number.isSafeInteger(stride) && stride >= 1 && stride <= MAX_SEGMENT_DATABASES;
    const residue = strideOk ? range.start % BigInt(stride) : 0n;
    const problem = this.#problem(range, step);
    // A store that hands out a range below one already loaded of its class (and went on doing so
    // after being raised), or of another stride (a set re-formed under a running node), would
    // make this process repeat IDs: refuse it rather than issue from it.
    if (problem !== undefined) this.#failed(this.#refusal(range, problem), ms);
    this.#loading = undefined;
    this.#failure = undefined;
    this.#rangeStride = stride;
    this.#highest.set(residue, range.end);
    this.#next = range;
    this.#step = range.step;
    this.#tagStep = range.tagStep;
    this.#minStep = range.tagStep;
    this.#lastLoadAt = this.#s.clock.now();
    this.#loads++;
    this.#loadedIds += range.step;
    this.#loadMsTotal += ms;
    if (ms > this.#loadMsMax) this.#loadMsMax = ms;
    this.#s.onEvent?.({ type: 'load', tag: this.tag, ms, range });
  }

  /** The error refusing a range the store returned that must not be issued from. */
  #refusal(range: SegmentRange, problem: RangeProblem): IdMintError {
    const stride = range.stride ?? 1;
    const strideOk = Number.isSafeInteger(stride) && stride >= 1 && stride <= MAX_SEGMENT_DATABASES;
    const highest = this.#highest.get(strideOk ? range.start % BigInt(stride) : 0n) ?? 0n;
    const strided = stride === 1 ? '' : ` and stride ${String(stride)}`;
    const returned =
      `the store returned range [${range.start}, ${range.end}) of step ` +
      `${range.step}${strided}`;
    return new IdMintError(
      'STORE_UNAVAILABLE',
      `tag "${this.tag}": ${returned}, ${problem.message}`,
      {
        details: {
          tag: this.tag,
          start: range.start.toString(),
          end: range.end.toString(),
          stride: String(stride),
          highest: highest.toString(),
        },
      },
    );
  }

  #failed(cause: unknown, ms: number): never {
    this.#loading = undefined;
    throw this.#recordFailure(cause, ms, false);
  }

  /**
   * Records a failed allocation (counts, back-off, event) and returns its error. `sized`: the
   * allocation was of a size a caller chose, whose ID_SPACE_EXHAUSTED says nothing of the tag's
   * own loads: only returned.
   */
  #recordFailure(cause: unknown, ms: number, sized: boolean): IdMintError {
    const error = isIdMintError(cause)
      ? cause
      : new IdMintError(
          'STORE_UNAVAILABLE',
          `tag "${this.tag}": allocating a range failed: ` +
            `${cause instanceof Error ? cause.message : String(cause)}`,
          { cause },
        );
    // The caller's size did not fit below 2^63-1: an answer to that caller, not a store failure.
    if (sized && error.code === 'ID_SPACE_EXHAUSTED') return error;
    if (error.details?.abandoned === true) this.#abandonedLoads++;
    this.#failure = { error, retryAt: this.#s.clock.now() + this.#s.retryAfterMs };
    // the fast path must look again, so a retry happens while IDs are still buffered
    this.#left = 0;
    this.#loadFailures++;
    this.#s.onEvent?.({ type: 'load', tag: this.tag, ms, error });
    return error;
  }
}

/** The error for a request that reaches a closed service or buffer. */
export function closedError(): IdMintError {
  return new IdMintError(
    'SEGMENTS_NOT_READY',
    'the segment service is closed (shutting down); ask another node',
  );
}
