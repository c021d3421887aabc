// Public API of the idmint package: named exports only. Adapters for databases and coordinators
// are published as subpath exports so importing the core never loads a driver.
export { ERROR_CODES, IdMintError, isIdMintError } from './core/errors.ts';
export type { ErrorCode, ErrorCodeInfo, ErrorDetails } from './core/errors.ts';
export {
  DEFAULT_LAYOUT,
  LAYOUT_PRESETS,
  composeId,
  decomposeId,
  defineLayout,
  getLayout,
  parseId,
  resolveLayout,
} from './core/layout.ts';
export type { IdParts, Layout, LayoutPresetName, LayoutSpec } from './core/layout.ts';
export { DEFAULT_ROLLBACK_POLICY, ROLLBACK_POLICIES, resolveRollbackPolicy } from './core/clock-policy.ts';
export type { RollbackPolicy, RollbackPolicyName, RollbackPolicyOptions } from './core/clock-policy.ts';
export { SnowflakeGenerator } from './core/snowflake.ts';
export type { SnowflakeOptions } from './core/snowflake.ts';
export type { Clock } from './ports/clock.ts';
export { ManualClock } from './clocks/manual-clock.ts';
export { MonotonicClock } from './clocks/monotonic-clock.ts';
export type { MonotonicClockOptions } from './clocks/monotonic-clock.ts';
export { SystemClock } from './clocks/system-clock.ts';
export { SegmentService, MAX_SEGMENT_BATCH } from './core/segment-service.ts';
export type { SegmentEvent, SegmentRefreshEvent, SegmentServiceOptions, SegmentServiceStats, SegmentShutdownReport } from './core/segment-service.ts';
export type { SegmentLoadEvent, SegmentTagStats } from './core/segment-buffer.ts';
export { DEFAULT_STEP_POLICY, nextStep, resolveStepPolicy } from './core/step-policy.ts';
export type { StepInput, StepPolicy, StepPolicyOptions } from './core/step-policy.ts';
export { MAX_SEGMENT_ID, MAX_TAG_STEP, TAG_PATTERN } from './core/segment-limits.ts';
export type { NewTag, SegmentRange, SegmentStore, TagRecord, TagUpdate } from './ports/segment-store.ts';
export { DEFAULT_SEGMENT_STORE_URL, SEGMENT_STORE_URL_FORMS, openSegmentStore } from './stores/open-segment-store.ts';
export type { OpenSegmentStoreOptions } from './stores/open-segment-store.ts';
export { DEFAULT_SEGMENT_TABLE, DEFAULT_STORE_TIMEOUT_MS } from './stores/store-support.ts';
export type { SegmentStoreOptions } from './stores/store-support.ts';
export { IdMintClient } from './client/client.ts';
export type { DecodedId, IdMintClientOptions, Readiness, Tag } from './client/client.ts';
export type { AcquireRequest, NodeIdentity, PeerTime, WorkerLease, WorkerRegistry, WorkerReport } from './ports/worker-registry.ts';
export { SnowflakeWorker } from './service/snowflake-worker.ts';
export type {
  PeerClockCheck,
  SnowflakeWorkerEvent,
  SnowflakeWorkerOptions,
  SnowflakeWorkerState,
  WorkerRollbackOptions,
} from './service/snowflake-worker.ts';
export { localNodeIdentity } from './service/node-identity.ts';
export { WORKER_REGISTRY_FORMS, openWorkerRegistry } from './registries/open-worker-registry.ts';
export type { OpenWorkerRegistryOptions } from './registries/open-worker-registry.ts';
