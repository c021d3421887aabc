import type { SegmentEvent } from './segment-service.ts';

// What the dashboard shows over time and the services do not keep on their own: draw rates over
// the last minute and each tag's recent range loads (the dynamic step's history). Memory is
// bounded twice: state exists only for keys in use (a tag that draws nothing for a whole window
// costs one number, a tag that loads nothing keeps no history beyond its last loads), and the
// number of keys with state is capped, so thousands of tags cannot grow it without limit.

/** Samples a {@link RateWindow} keeps by default: a minute at one sample a second. */
export const RATE_WINDOW_SAMPLES = 60;
/** Keys a {@link RateWindow} or {@link StepHistory} keeps state for at most, by default. */
export const ACTIVITY_MAX_KEYS = 10_000;
/** Range loads a {@link StepHistory} keeps per tag. */
export const STEP_HISTORY_LENGTH = 16;

/** Options of {@link RateWindow}. */
export interface RateWindowOptions {
  /** Samples kept (the window is this many sampling intervals). Default 60. */
  readonly samples?: number;
  /** Keys with a rate series at most; a key beyond it reports `null`. Default 10,000. */
  readonly maxKeys?: number;
}

/** One key's rates over the window. */
export interface RateSeries {
  /** Mean rate over the window (per second): the growth of the total over the time sampled. */
  readonly perSecond: number;
  /**
   * Per-sample rates, oldest first, one per sampling interval; as many as samples taken so far, up
   * to the window.
   */
  readonly rates: readonly number[];
}

/**
 * Per-second rates of growing totals (IDs issued per tag, requests per route) over a sliding
 * window of samples. Feed it the totals once per interval ({@link record}); a key gets a rate
 * series only once its total moves, and loses it after a whole window without growth, so idle
 * keys cost one number each. Totals that go down (a counter that was replaced) restart from the
 * new value rather than report a negative rate.
 */
export class RateWindow {
  readonly #samples: number;
  readonly #maxKeys: number;
  /**
   * Sample times (ms) in a ring of `samples + 1` slots (n rates need n + 1 times); every series
   * is a ring of the same size and index: slot i holds the rate from the sample before i to i.
   */
  readonly #times: Float64Array;
  /** Index of the latest sample in the rings; -1 before the first. */
  #head = -1;
  /** Samples taken so far (capped at the ring's size). */
  #taken = 0;
  /** Each key's total at the latest sample. */
  readonly #last = new Map<string, number>();
  readonly #series = new Map<string, { readonly rates: Float64Array; idle: number }>();
  /** Keys that moved while the cap was reached: they have no series, and say so (null). */
  readonly #untracked = new Set<string>();

  constructor(options: RateWindowOptions = {}) {
    this.#samples = options.samples ?? RATE_WINDOW_SAMPLES;
    this.#maxKeys = options.maxKeys ?? ACTIVITY_MAX_KEYS;
    this.#times = new Float64Array(this.#samples + 1);
  }

  /**
   * Takes a sample: every key's total at `nowMs` (a monotonic time in ms). Keys missing from
   * `totals` are forgotten (a deleted tag); a key first seen after the first sample counts from 0.
   * A sample no later than the previous one is ignored.
   */
  record(nowMs: number, totals: Iterable<readonly [string, number]>): void {
    const ring = this.#times.length;
    const previousAt = this.#head < 0 ? undefined : (this.#times[this.#head] as number);
    if (previousAt !== undefined && !(nowMs > previousAt)) return;
    const slot = (this.#head + 1) % ring;
    this.#head = slot;
    this.#times[slot] = nowMs;
    this.#taken = Math.min(this.#taken + 1, ring);
    const seconds = previousAt === undefined ? 0 : (nowMs - previousAt) / 1000;
    const current: ReadonlyMap<string, number> = totals instanceof Map ? totals : new Map(totals);
    // Keys that are gone go first, so the room they leave under the cap is there for new ones.
    for (const key of this.#last.keys()) {
      if (!current.has(key)) {
        this.#last.delete(key);
        this.#series.delete(key);
        this.#untracked.delete(key);
      }
    }
    for (const [key, total] of current) {
      // A key new since the previous sample started from 0 after it (a tag's buffer is created
      // with nothing issued); at the first sample ever, the totals are only the base.
      const before = this.#last.get(key) ?? (seconds === 0 ? total : 0);
      this.#last.set(key, total);
      const delta = total < before ? 0 : total - before;
      let series = this.#series.get(key);
      if (series === undefined) {
        if (delta === 0) continue;
        if (this.#series.size >= this.#maxKeys) {
          this.#untracked.add(key);
          continue;
        }
        this.#untracked.delete(key);
        series = { rates: new Float64Array(ring), idle: 0 };
        this.#series.set(key, series);
      }
      series.rates[slot] = delta / seconds;
      if (delta === 0) {
        if (++series.idle >= this.#samples) this.#series.delete(key);
      } else {
        series.idle = 0;
      }
    }
  }

  /**
   * `key`'s rates over the window: zeros for a key sampled that has not moved in the window;
   * null for a key never sampled, or one that moved while the cap on series was reached.
   */
  series(key: string): RateSeries | null {
    if (!this.#last.has(key) || this.#untracked.has(key)) return null;
    const series = this.#series.get(key);
    const count = Math.max(0, this.#taken - 1);
    const ring = this.#times.length;
    const rates: number[] = [];
    let grown = 0;
    for (let i = count - 1; i >= 0; i--) {
      const at = (this.#head - i + ring) % ring;
      const rate = series === undefined ? 0 : (series.rates[at] as number);
      rates.push(rate);
      grown += rate * this.#interval(at);
    }
    const span = this.#span();
    return { perSecond: span > 0 ? grown / span : 0, rates };
  }

  /** `key`'s mean rate over the window, as {@link series} has it, without building the series. */
  perSecond(key: string): number | null {
    if (!this.#last.has(key) || this.#untracked.has(key)) return null;
    const series = this.#series.get(key);
    const span = this.#span();
    if (series === undefined || span === 0) return 0;
    const ring = this.#times.length;
    let grown = 0;
    for (let i = this.#taken - 2; i >= 0; i--) {
      const at = (this.#head - i + ring) % ring;
      grown += (series.rates[at] as number) * this.#interval(at);
    }
    return grown / span;
  }

  /** Keys with a rate series now (those that moved within the window). */
  get activeKeys(): number {
    return this.#series.size;
  }

  /** Seconds between the sample at ring index `at` and the one before it. */
  #interval(at: number): number {
    const ring = this.#times.length;
    return ((this.#times[at] as number) - (this.#times[(at - 1 + ring) % ring] as number)) / 1000;
  }

  /** Seconds from the oldest sample kept to the latest. */
  #span(): number {
    if (this.#taken < 2) return 0;
    const ring = this.#times.length;
    const oldest = (this.#head - (this.#taken - 1) + ring) % ring;
    return ((this.#times[this.#head] as number) - (this.#times[oldest] as number)) / 1000;
  }
}

/** One range load, as the step history keeps it. */
export interface StepRecord {
  /** Wall time of the load (ms since the Unix epoch). */
  readonly at: number;
  /** The step of the range loaded: its size. */
  readonly step: number;
  /** How long the allocation took, in ms. */
  readonly ms: number;
}

/**
 * The last {@link STEP_HISTORY_LENGTH} range loads per tag: how the dynamic step moved and how
 * long the store took. Tags are evicted least recently loaded first beyond `maxKeys`.
 */
export class StepHistory {
  readonly #length: number;
  readonly #maxKeys: number;
  readonly #loads = new Map<string, StepRecord[]>();

  constructor(options: { readonly length?: number; readonly maxKeys?: number } = {}) {
    this.#length = options.length ?? STEP_HISTORY_LENGTH;
    this.#maxKeys = options.maxKeys ?? ACTIVITY_MAX_KEYS;
  }

  record(tag: string, load: StepRecord): void {
    let loads = this.#loads.get(tag);
    if (loads === undefined) {
      if (this.#loads.size >= this.#maxKeys)
        this.#loads.delete(this.#loads.keys().next().value as string);
      loads = [];
    } else {
      // Re-inserted, so the Map's order is least recently loaded first.
      this.#loads.delete(tag);
    }
    loads.push(load);
    if (loads.length > this.#length) loads.shift();
    this.#loads.set(tag, loads);
  }

  /** `tag`'s recent loads, oldest first (empty when none is kept). */
  loads(tag: string): readonly StepRecord[] {
    return this.#loads.get(tag) ?? [];
  }

  /** Forgets tags `keep` rejects (tags that are gone). */
  retain(keep: (tag: string) => boolean): void {
    for (const tag of this.#loads.keys()) if (!keep(tag)) this.#loads.delete(tag);
  }

  get size(): number {
    return this.#loads.size;
  }
}

/** What {@link SegmentActivity} reads from the segment service. */
export interface IssuedTotalsSource {
  /** IDs handed out so far per tag in use. */
  issuedByTag(): ReadonlyMap<string, number>;
}

/**
 * Segment mode over time: each tag's draw rate over the last minute and its recent range loads.
 * Pass {@link onEvent} the service's events and call {@link sample} once a second.
 */
export class SegmentActivity {
  readonly rates: RateWindow;
  readonly steps: StepHistory;
  readonly #source: IssuedTotalsSource;
  readonly #wallClock: () => number;

  constructor(
    source: IssuedTotalsSource,
    options: {
      readonly rates?: RateWindowOptions;
      readonly wallClock?: () => number;
      readonly maxKeys?: number;
    } = {},
  ) {
    this.#source = source;
    this.rates = new RateWindow({ maxKeys: options.maxKeys, ...options.rates });
    this.steps = new StepHistory({ maxKeys: options.maxKeys });
    this.#wallClock = options.wallClock ?? Date.now;
  }

  /** Records a successful range load (pass every segment event; others are ignored). */
  onEvent(event: SegmentEvent): void {
    if (event.type !== 'load' || event.range === undefined) return;
    this.steps.record(event.tag, { at: this.#wallClock(), step: event.range.step, ms: event.ms });
  }

  /** Samples every tag's total at `nowMs` (monotonic ms) and forgets tags the service dropped. */
  sample(nowMs: number): void {
    const totals = this.#source.issuedByTag();
    this.rates.record(nowMs, totals);
    this.steps.retain((tag) => totals.has(tag));
  }
}
