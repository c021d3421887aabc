import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import { IdMintError } from '../core/errors.ts';
import type { Layout } from '../core/layout.ts';
import { SegmentService, type SegmentEvent } from '../core/segment-service.ts';
import { SnowflakeGenerator } from '../core/snowflake.ts';
import type { Clock } from '../ports/clock.ts';
import type { SegmentStore } from '../ports/segment-store.ts';
import { openSegmentStore } from '../stores/open-segment-store.ts';
import type { ServerConfig } from './config.ts';

/** What the server needs from snowflake mode. */
export interface SnowflakeWorker {
  readonly layout: Layout;
  readonly workerId: number;
  nextString(): string;
  nextBatch(count: number): bigint[];
  /** True while the worker-ID lease is held and IDs may be issued. */
  leaseHeld(): boolean;
  rollbackCount(): number;
  /** Releases the lease; no ID is issued afterwards. */
  close(): Promise<void>;
}

/** Segment mode: the store (for tag administration) and the service over it (for IDs). */
export interface Segments {
  readonly store: SegmentStore;
  readonly service: SegmentService;
}

/** The ID sources behind the routes; a mode turned off is absent. */
export interface Backends {
  readonly segments?: Segments;
  readonly snowflake?: SnowflakeWorker;
  /**
   * Gives everything back, in order: segment ranges' unissued tails to the store, the worker
   * lease to the registry, then the connections. Call once no request can draw an ID any more.
   */
  close(): Promise<void>;
}

/** Options the embedding code or a test may pass to {@link openBackends}. */
export interface BackendOptions {
  /** Clock for both modes; default a MonotonicClock. */
  readonly clock?: Clock;
  /** Told about every range load and tag refresh (metrics, logs). */
  readonly onSegmentEvent?: (event: SegmentEvent) => void;
}

/**
 * Opens what the configuration names: the segment store (checked to answer: its tag list is
 * loaded) and the worker registry (a worker ID leased). Either failing stops start-up, with
 * whatever was opened closed again.
 */
export async function openBackends(config: ServerConfig, options: BackendOptions = {}): Promise<Backends> {
  const clock = options.clock ?? new MonotonicClock();
  const opened: (() => Promise<unknown>)[] = [];
  const closeAll = async () => {
    for (const close of opened.reverse().splice(0)) await close().catch(() => undefined);
  };
  try {
    const segments = config.segment.enabled ? await openSegments(config, clock, options.onSegmentEvent, opened) : undefined;
    const snowflake = config.snowflake.enabled ? openSnowflake(config, clock) : undefined;
    if (snowflake !== undefined) opened.push(() => snowflake.close());
    return { ...(segments === undefined ? {} : { segments }), ...(snowflake === undefined ? {} : { snowflake }), close: closeAll };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

async function openSegments(
  config: ServerConfig,
  clock: Clock,
  onEvent: ((event: SegmentEvent) => void) | undefined,
  opened: (() => Promise<unknown>)[],
): Promise<Segments> {
  const s = config.segment;
  const store = await openSegmentStore(s.store, { table: s.table, timeoutMs: s.timeoutMs, poolSize: s.poolSize, source: 'segment.store' });
  opened.push(() => store.close());
  const service = new SegmentService({
    store,
    clock,
    step: { maxStep: s.maxStep, growBelowMs: s.rangeDurationMs, keepBelowMs: 2 * s.rangeDurationMs },
    prefetchThreshold: s.prefetchThreshold,
    waitTimeoutMs: s.waitTimeoutMs,
    // The store abandons its own calls after timeoutMs; the service's bound is a safety net behind it.
    loadTimeoutMs: s.timeoutMs + 2000,
    retryAfterMs: s.retryAfterMs,
    tagRefreshMs: s.tagRefreshMs,
    ...(onEvent === undefined ? {} : { onEvent }),
  });
  opened.push(() => service.close());
  // Loads every tag, so the first request for each is served at once, and proves the store answers.
  await service.start();
  return { store, service };
}

function openSnowflake(config: ServerConfig, clock: Clock): SnowflakeWorker {
  const match = /^static:([0-9]{1,10})$/.exec(config.snowflake.registry);
  if (match === null) {
    throw new IdMintError('CONFIG_INVALID', `snowflake.registry = "${config.snowflake.registry}": only static:N is supported so far`);
  }
  const generator = new SnowflakeGenerator({
    clock,
    layout: config.snowflake.layout,
    workerId: Number(match[1]),
    datacenterId: config.snowflake.datacenterId,
    sequenceSpread: config.snowflake.sequenceSpread,
    rollback: config.snowflake.rollback,
  });
  let open = true;
  return {
    layout: generator.layout,
    workerId: generator.workerId,
    nextString: () => generator.nextString(),
    nextBatch: (count) => generator.nextBatch(count),
    leaseHeld: () => open,
    rollbackCount: () => generator.rollbackCount(),
    async close() {
      open = false;
      generator.setValidUntil(Number.NEGATIVE_INFINITY);
    },
  };
}
