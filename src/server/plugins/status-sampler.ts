import { RateWindow, SegmentActivity } from '../../service/activity.ts';
import type { SegmentEvent } from '../../service/segment-service.ts';
import type { RequestHistogramView } from './metrics.ts';
import { RequestWindow } from './request-window.ts';

/** How often the sampler reads the totals: the dashboard's rates are per second. */
export const SAMPLE_INTERVAL_MS = 1000;

/** What the sampler reads; each part is absent when its mode (or metrics) is off. */
export interface SamplerSources {
  /** IDs issued per tag in use (SegmentService.issuedByTag). */
  readonly segments?: { issuedByTag(): ReadonlyMap<string, number> };
  /** Snowflake IDs issued so far. */
  readonly snowflakeIssued?: () => number;
  /** The metrics' request histogram. */
  readonly requests?: () => RequestHistogramView;
}

/**
 * The dashboard's view over time: once a second it samples IDs issued per tag, snowflake IDs and
 * the request histogram, so GET /v1/status can tell rates over the last minute however often (or
 * seldom) it is read. Range loads come in as segment events ({@link segmentEvent}), which arrive
 * from start-up on, before {@link watch} names the sources.
 */
export class StatusSampler {
  readonly segments: SegmentActivity;
  readonly snowflake = new RateWindow();
  #requests: RequestWindow | undefined;
  #sources: SamplerSources = {};
  #timer: ReturnType<typeof setInterval> | undefined;
  readonly #now: () => number;

  /**
   * `now`: a monotonic time in ms (default performance.now): rates divide by the time that really
   * passed.
   */
  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
    this.segments = new SegmentActivity({
      issuedByTag: () => this.#sources.segments?.issuedByTag() ?? new Map(),
    });
  }

  /** Pass every segment event (a range load goes into the tag's step history). */
  segmentEvent(event: SegmentEvent): void {
    this.segments.onEvent(event);
  }

  /** Names what to sample. Call once, before {@link start}. */
  watch(sources: SamplerSources): void {
    this.#sources = sources;
    this.#requests =
      sources.requests === undefined ? undefined : new RequestWindow(sources.requests);
  }

  /** The request window; undefined when metrics are off (there is no histogram to read). */
  get requests(): RequestWindow | undefined {
    return this.#requests;
  }

  /** Takes a sample now, then one every second until {@link stop}. */
  start(): void {
    if (this.#timer !== undefined) return;
    this.sample();
    this.#timer = setInterval(() => this.sample(), SAMPLE_INTERVAL_MS);
    // The server's close stops it; a forgotten one must not keep the process alive.
    this.#timer.unref?.();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One sample of every source, at the sampler's clock. */
  sample(): void {
    const now = this.#now();
    this.segments.sample(now);
    const snowflakeIssued = this.#sources.snowflakeIssued;
    if (snowflakeIssued !== undefined)
      this.snowflake.record(now, [['snowflake', snowflakeIssued()]]);
    this.#requests?.sample(now);
  }
}
