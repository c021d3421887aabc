import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import { SegmentService, type SegmentEvent } from '../core/segment-service.ts';
import type { Clock } from '../ports/clock.ts';
import type { SegmentStore } from '../ports/segment-store.ts';
import { openWorkerRegistry } from '../registries/open-worker-registry.ts';
import { localNodeIdentity } from '../service/node-identity.ts';
import { SnowflakeWorker, type SnowflakeWorkerEvent } from '../service/snowflake-worker.ts';
import { openSegmentStore } from '../stores/open-segment-store.ts';
import type { ServerConfig } from './config.ts';

/** Segment mode: the store (for tag administration) and the service over it (for IDs). */
export interface Segments {
  readonly store: SegmentStore;
  readonly service: SegmentService;
}

/** The ID sources behind the routes; a mode turned off is absent. */
export interface Backends {
  readonly segments?: Segments;
  /** Snowflake mode: a generator on a worker ID leased from the configured registry. */
  readonly snowflake?: SnowflakeWorker;
  /**
   * Gives everything back, in reverse order of opening: the worker lease to the registry, each
   * tag's unissued tail to the store, then the connections. Call once no request can draw an ID
   * any more.
   */
  close(): Promise<void>;
}

/** Options the embedding code or a test may pass to {@link openBackends}. */
export interface BackendOptions {
  /** Clock for both modes; default a MonotonicClock. */
  readonly clock?: Clock;
  /** Told about every range load and tag refresh (metrics, logs). */
  readonly onSegmentEvent?: (event: SegmentEvent) => void;
  /** Told about lease events: acquired, renewals failing, lost, recovered, released (logs). */
  readonly onWorkerEvent?: (event: SnowflakeWorkerEvent) => void;
}

/**
 * Opens what the configuration names: the segment store (checked to answer: its tag list is
 * loaded) and the worker registry (a worker ID leased, the clock checked against it). Either
 * failing stops start-up, with whatever was opened closed again.
 */
export async function openBackends(config: ServerConfig, options: BackendOptions = {}): Promise<Backends> {
  const clock = options.clock ?? new MonotonicClock();
  const opened: (() => Promise<unknown>)[] = [];
  const closeAll = async () => {
    for (const close of opened.reverse().splice(0)) await close().catch(() => undefined);
  };
  try {
    const segments = config.segment.enabled ? await openSegments(config, clock, options.onSegmentEvent, opened) : undefined;
    const snowflake = config.snowflake.enabled ? await openSnowflake(config, clock, options.onWorkerEvent, opened) : undefined;
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

async function openSnowflake(
  config: ServerConfig,
  clock: Clock,
  onEvent: ((event: SnowflakeWorkerEvent) => void) | undefined,
  opened: (() => Promise<unknown>)[],
): Promise<SnowflakeWorker> {
  const s = config.snowflake;
  const registry = await openWorkerRegistry(s.registry, {
    name: s.cluster,
    table: s.table,
    stateDir: s.stateDir,
    operationTimeoutMs: s.registryTimeoutMs,
    ...(s.leaseTtlMs === 0 ? {} : { ttlMs: s.leaseTtlMs }),
    ...(s.cacheFile === '' ? {} : { cacheFile: s.cacheFile }),
    key: 'snowflake.registry',
  });
  opened.push(() => registry.close());
  const worker = await SnowflakeWorker.start({
    registry,
    // Leaf's identity: this host's address and the configured port. The registry never hands one
    // worker ID to two live holders, whatever their identity; the identity only lets a restarted
    // node have its old worker ID back.
    identity: localNodeIdentity(config.port),
    clock,
    layout: s.layout,
    datacenterId: s.datacenterId,
    sequenceSpread: s.sequenceSpread,
    rollback: s.rollback,
    peerClockCheck: s.peerClockCheck,
    maxPeerSkewMs: s.maxPeerSkewMs,
    ...(onEvent === undefined ? {} : { onEvent }),
  });
  opened.push(() => worker.close());
  return worker;
}
