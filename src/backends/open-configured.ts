// The composition root: the configured segment store (one database or a set) and the configured
// worker registry, opened one way for the server and every CLI command. It reads the settings as
// structural subsets of config.segment and config.snowflake, so backends/ never imports config/
// (which checks its URLs through the catalog here).

import type { FenceMargin, SegmentStore, StoreHistoryEvent } from '../ports/segment-store.ts';
import type { WorkerRegistry } from '../ports/worker-registry.ts';
import { openSegmentStore, openSegmentStores } from './open-segment-store.ts';
import { openWorkerRegistry } from './open-worker-registry.ts';

/** The segment settings the store is opened with (a structural subset of config.segment). */
export interface SegmentStoreSettings {
  /** One database's URL; used when `stores` is empty. */
  readonly store: string;
  /** A set of databases (docs/segments.md); empty for one database. */
  readonly stores: readonly string[];
  readonly table: string;
  readonly timeoutMs: number;
  readonly poolSize: number;
  /** Ranges and step a fence skips (segment.fenceRanges, segment.maxStep). */
  readonly fenceRanges: number;
  readonly maxStep: number;
}

/** How a command opens the configured store; every field has the server's default. */
export interface OpenConfiguredStoreOptions {
  /** The settings' names in messages. Default `IDMINT_SEGMENT_STORE` / `IDMINT_SEGMENT_STORES`. */
  readonly source?: string;
  /** Check a set's rows against its list (see openSegmentStores). Default true. */
  readonly verify?: boolean;
  /** Create the schema when opened. Default: for an embedded database only. */
  readonly init?: boolean;
  /** The fence margin, in place of the configured one (`idmint db fence --margin`). */
  readonly fence?: FenceMargin;
  /** Told when a store fences a new history of its database. */
  readonly onHistory?: (event: StoreHistoryEvent) => void;
}

/**
 * The margin a store fences a new history with, from the segment keys: fenceRanges of
 * max(maxStep, step).
 */
export function segmentFenceMargin(segment: {
  readonly fenceRanges: number;
  readonly maxStep: number;
}): FenceMargin {
  return { ranges: segment.fenceRanges, maxStep: segment.maxStep };
}

/** True when the settings name a set of databases rather than one. */
export function isStoreSet(segment: Pick<SegmentStoreSettings, 'stores'>): boolean {
  return segment.stores.length > 0;
}

/**
 * Opens the configured segment store: the set `segment.stores` names, or the one database of
 * `segment.store`, with the table, timeout, pool size and fence margin configured.
 */
export async function openConfiguredStore(
  segment: SegmentStoreSettings,
  options: OpenConfiguredStoreOptions = {},
): Promise<SegmentStore> {
  const set = isStoreSet(segment);
  const common = {
    table: segment.table,
    timeoutMs: segment.timeoutMs,
    poolSize: segment.poolSize,
    fence: options.fence ?? segmentFenceMargin(segment),
    ...(options.onHistory === undefined ? {} : { onHistory: options.onHistory }),
    ...(options.init === undefined ? {} : { init: options.init }),
    source: options.source ?? (set ? 'IDMINT_SEGMENT_STORES' : 'IDMINT_SEGMENT_STORE'),
  };
  return set
    ? openSegmentStores(segment.stores, { ...common, verify: options.verify ?? true })
    : openSegmentStore(segment.store, common);
}

/** The snowflake settings the registry is opened with (a structural subset of config.snowflake). */
export interface WorkerRegistrySettings {
  readonly registry: string;
  readonly cluster: string;
  readonly table: string;
  readonly stateDir: string;
  readonly lockDir: string;
  readonly registryTimeoutMs: number;
  /** 0: the registry's default. */
  readonly leaseTtlMs: number;
  /** '' for none: Leaf's weak-dependency cache file. */
  readonly cacheFile: string;
  /** The generator's rollback policy: a `borrow` lead lengthens a new history's settle. */
  readonly rollback: { readonly policy: string; readonly maxLeadMs: number };
}

/** How a command opens the configured registry. */
export interface OpenConfiguredRegistryOptions {
  /** In place of the configured URL (`idmint next --worker W` on a static registry). */
  readonly url?: string;
  /** Use the configured cache file. Default true; `idmint next` holds no lease worth caching. */
  readonly cache?: boolean;
}

/** Opens the configured worker registry with the cluster, table, timeouts and cache configured. */
export async function openConfiguredRegistry(
  snowflake: WorkerRegistrySettings,
  options: OpenConfiguredRegistryOptions = {},
): Promise<WorkerRegistry> {
  const cache = options.cache ?? true;
  return openWorkerRegistry(options.url ?? snowflake.registry, {
    name: snowflake.cluster,
    table: snowflake.table,
    stateDir: snowflake.stateDir,
    lockDir: snowflake.lockDir,
    operationTimeoutMs: snowflake.registryTimeoutMs,
    // Every node of a cluster runs the same policy: its lead is the most any holder's can be.
    maxLeadMs: snowflake.rollback.policy === 'borrow' ? snowflake.rollback.maxLeadMs : 0,
    ...(snowflake.leaseTtlMs === 0 ? {} : { ttlMs: snowflake.leaseTtlMs }),
    ...(cache && snowflake.cacheFile !== '' ? { cacheFile: snowflake.cacheFile } : {}),
    key: 'IDMINT_WORKER_REGISTRY',
  });
}
