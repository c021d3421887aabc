import { PeriodicSegments } from './periodic-segments.ts';
import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import { clockNamed } from '../clocks/named-clock.ts';
import {
  SegmentService,
  type SegmentEvent,
  type SegmentShutdownReport,
} from './segment-service.ts';
import type { Clock } from '../ports/clock.ts';
import type { SegmentStore } from '../ports/segment-store.ts';
import { openConfiguredRegistry, openConfiguredStore } from '../backends/open-configured.ts';
import { localNodeIdentity } from './node-identity.ts';
import type { IssuerEvent } from './issuer-holding.ts';
import { SnowflakeWorker, type SnowflakeWorkerEvent } from './snowflake-worker.ts';
import { MultiSegmentStore, type SetDatabaseStats } from '../stores/multi/multi-segment-store.ts';
import type { ServerConfig } from '../config/schema.ts';
import { configuredSpread } from '../config/snowflake.ts';

/** The segment service's own bound behind the store's timeout: the store abandons a call first. */
const LOAD_TIMEOUT_SLACK_MS = 2000;

/** Segment mode: the store (for tag administration) and the service over it (for IDs). */
export interface Segments {
  readonly store: SegmentStore;
  readonly service: SegmentService;
  /** Periodic tags' formatted IDs over the service (docs/segments.md, Periodic sequences). */
  readonly periodic?: PeriodicSegments;
  /** With a set of databases (segment.stores): each database's health, for metrics and logs. */
  readonly databases?: { stats(): SetDatabaseStats[] };
}

/** The ID sources behind the routes; a mode turned off is absent. */
export interface Backends {
  readonly segments?: Segments;
  /** Snowflake mode: a generator on a worker ID leased from the configured registry. */
  readonly snowflake?: SnowflakeWorker;
  /**
   * Gives everything back, in reverse order of opening: the worker lease to the registry, each
   * tag's unissued tail to the store, then the connections. Call once no request can draw an ID
   * any more. Resolves to what segment mode gave back (absent when it is off).
   */
  close(): Promise<BackendsShutdownReport>;
}

/** What {@link Backends.close} did, for the shutdown log. */
export interface BackendsShutdownReport {
  readonly segments?: SegmentShutdownReport;
}

/** Options the embedding code or a test may pass to {@link openBackends}. */
export interface BackendOptions {
  /**
   * Clock for both modes, in place of the configured ones (tests pass a ManualClock). Default:
   * segment mode a MonotonicClock (it measures durations); snowflake mode the clock
   * `snowflake.clock` names.
   */
  readonly clock?: Clock;
  /** Told about every range load and tag refresh (metrics, logs). */
  readonly onSegmentEvent?: (event: SegmentEvent) => void;
  /** Told about lease events: acquired, renewals failing, lost, recovered, released (logs). */
  readonly onWorkerEvent?: (event: SnowflakeWorkerEvent) => void;
  /** Told about cluster-ordered tags' issuer leases: claimed, lost, released (logs). */
  readonly onIssuerEvent?: (event: IssuerEvent) => void;
  /**
   * Wraps the segment store once opened, before anything uses it: tests put faults or a
   * stand-in for a port between the service and the database. The wrapper closes the store.
   */
  readonly wrapSegmentStore?: (store: SegmentStore) => SegmentStore;
  /**
   * Aborts start-up (a SIGTERM while the store or registry is slow to answer): no further step
   * starts, what was opened is closed again, and openBackends rejects with the signal's reason.
   */
  readonly signal?: AbortSignal;
}

/**
 * Opens what the configuration names: the segment store (checked to answer: its tag list is
 * loaded) and the worker registry (a worker ID leased, the clock checked against it). Either
 * failing stops start-up, with whatever was opened closed again.
 */
export async function openBackends(
  config: ServerConfig,
  options: BackendOptions = {},
): Promise<Backends> {
  const opened: (() => Promise<unknown>)[] = [];
  const report: { segments?: SegmentShutdownReport } = {};
  const closeAll = async (): Promise<BackendsShutdownReport> => {
    for (const close of opened.reverse().splice(0)) await close().catch(() => undefined);
    return report;
  };
  // Between steps: a step already running is bounded by its own timeout, and the caller that
  // aborted need not wait for it (idmint serve stops waiting after a few seconds).
  const step = () => options.signal?.throwIfAborted();
  try {
    step();
    const segments = config.segment.enabled
      ? await openSegments(
          config,
          options.clock ?? new MonotonicClock(),
          options.onSegmentEvent,
          opened,
          report,
          step,
          options.onIssuerEvent,
          options.wrapSegmentStore,
        )
      : undefined;
    step();
    const snowflakeClock = options.clock ?? clockNamed(config.snowflake.clock);
    const snowflake = config.snowflake.enabled
      ? await openSnowflake(config, snowflakeClock, options.onWorkerEvent, opened, step)
      : undefined;
    step();
    return {
      ...(segments === undefined ? {} : { segments }),
      ...(snowflake === undefined ? {} : { snowflake }),
      close: closeAll,
    };
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
  report: { segments?: SegmentShutdownReport },
  step: () => void,
  onIssuerEvent: ((event: IssuerEvent) => void) | undefined,
  wrap: ((store: SegmentStore) => SegmentStore) | undefined,
): Promise<Segments> {
  const s = config.segment;
  // Settings are named by their variable in messages: `cannot open SQLite file ...
  // (IDMINT_SEGMENT_STORE)`. The store fences a new history itself (segment.fenceRanges) and tells
  // of it as a segment event. A set of databases is checked before it serves: a database whose
  // rows are of another class is refused.
  const raw = await openConfiguredStore(s, onEvent === undefined ? {} : { onHistory: onEvent });
  const store = wrap === undefined ? raw : wrap(raw);
  opened.push(() => store.close());
  step();
  const service = new SegmentService({
    store,
    clock,
    step: {
      maxStep: s.maxStep,
      growBelowMs: s.rangeDurationMs,
      keepBelowMs: 2 * s.rangeDurationMs,
    },
    prefetchThreshold: s.prefetchThreshold,
    waitTimeoutMs: s.waitTimeoutMs,
    // The store abandons its own calls after timeoutMs; the service's bound is a safety net behind
    // it. A set tries its databases one after another within one allocation, each so bounded.
    loadTimeoutMs: s.timeoutMs * Math.max(1, s.stores.length) + LOAD_TIMEOUT_SLACK_MS,
    retryAfterMs: s.retryAfterMs,
    tagRefreshMs: s.tagRefreshMs,
    tagFullRefreshMs: s.tagFullRefreshMs,
    ...(onEvent === undefined ? {} : { onEvent }),
    issuers: {
      ttlMs: s.issuerTtlMs,
      retryMs: s.issuerRetryMs,
      ...(onIssuerEvent === undefined ? {} : { onEvent: onIssuerEvent }),
    },
  });
  opened.push(async () => {
    report.segments = await service.close();
  });
  const periodic = new PeriodicSegments({
    service,
    store,
    clock,
    skewMs: s.periodSkewMs,
    waitTimeoutMs: s.waitTimeoutMs,
    loadTimeoutMs: s.timeoutMs * Math.max(1, s.stores.length) + LOAD_TIMEOUT_SLACK_MS,
  });
  // Loads every tag, so the first request for each is served at once, and proves the store answers.
  await service.start();
  return {
    store,
    service,
    periodic,
    ...(store instanceof MultiSegmentStore ? { databases: store } : {}),
  };
}

async function openSnowflake(
  config: ServerConfig,
  clock: Clock,
  onEvent: ((event: SnowflakeWorkerEvent) => void) | undefined,
  opened: (() => Promise<unknown>)[],
  step: () => void,
): Promise<SnowflakeWorker> {
  const s = config.snowflake;
  const registry = await openConfiguredRegistry(s);
  opened.push(() => registry.close());
  step();
  const worker = await SnowflakeWorker.start({
    registry,
    // Leaf's identity: this host's address and the configured port. The registry never hands one
    // worker ID to two live holders, whatever their identity; the identity only lets a restarted
    // node have its old worker ID back.
    identity: localNodeIdentity(config.port),
    clock,
    layout: s.layout,
    datacenterId: s.datacenterId,
    sequenceSpread: configuredSpread(s),
    rollback: s.rollback,
    peerClockCheck: s.peerClockCheck,
    maxPeerSkewMs: s.maxPeerSkewMs,
    waitTimeoutMs: s.waitTimeoutMs,
    ...(onEvent === undefined ? {} : { onEvent }),
  });
  opened.push(() => worker.close());
  return worker;
}
