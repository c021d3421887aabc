// Public API of the idmint package: named exports only. Adapters for databases and coordinators
// are published as subpath exports so importing the core never loads a driver.
import './shared/node-version.ts';
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
export {
  DEFAULT_ROLLBACK_POLICY,
  ROLLBACK_POLICIES,
  resolveRollbackPolicy,
} from './core/clock-policy.ts';
export type {
  RollbackPolicy,
  RollbackPolicyName,
  RollbackPolicyOptions,
} from './core/clock-policy.ts';
// The generators with a default clock (a MonotonicClock), and the one-liners over them.
export {
  ObjectIdGenerator,
  SnowflakeGenerator,
  UlidGenerator,
  UuidV7Generator,
} from './generators/generators.ts';
export type {
  ObjectIdOptions,
  SnowflakeOptions,
  UlidOptions,
  UuidV7Options,
} from './generators/generators.ts';
export { objectId, ulid, uuidv4, uuidv7 } from './generators/one-liners.ts';
export type { Clock } from './ports/clock.ts';
export { ManualClock } from './clocks/manual-clock.ts';
export { MonotonicClock } from './clocks/monotonic-clock.ts';
export type { MonotonicClockOptions } from './clocks/monotonic-clock.ts';
export { SystemClock } from './clocks/system-clock.ts';
export { SegmentService, MAX_SEGMENT_BATCH } from './service/segment-service.ts';
export type {
  SegmentEvent,
  SegmentRefreshEvent,
  SegmentServiceOptions,
  SegmentServiceStats,
  SegmentShutdownReport,
} from './service/segment-service.ts';
export type { SegmentHealEvent, SegmentLoadEvent, SegmentTagStats } from './core/segment-buffer.ts';
export { PeriodicSegments } from './service/periodic-segments.ts';
export type { PeriodicBatch, PeriodicSegmentsOptions } from './service/periodic-segments.ts';
export { PeriodicSequence, parsePeriodic } from './core/periodic.ts';
export type { Period, PeriodicOptions, PeriodUnit, PeriodWindow } from './core/periodic.ts';
export { DEFAULT_STEP_POLICY, nextStep, resolveStepPolicy } from './core/step-policy.ts';
export type { StepInput, StepPolicy, StepPolicyOptions } from './core/step-policy.ts';
export { MAX_SEGMENT_ID, MAX_TAG_STEP, TAG_PATTERN } from './core/segment-limits.ts';
export type {
  FenceMargin,
  FenceReport,
  FenceRequest,
  NewTag,
  SegmentRange,
  SegmentResidue,
  SegmentStore,
  StoreHistory,
  StoreHistoryEvent,
  TagChanges,
  TagListing,
  TagOrdering,
  TagPage,
  TagRecord,
  TagUpdate,
} from './ports/segment-store.ts';
export type { IssuerBusy, IssuerLease, IssuerLeases } from './ports/issuer-lease.ts';
export {
  DEFAULT_SEGMENT_STORE_URL,
  SEGMENT_STORE_URL_FORMS,
  openSegmentStore,
  openSegmentStores,
} from './backends/open-segment-store.ts';
export type {
  OpenSegmentStoreOptions,
  OpenSegmentStoresOptions,
} from './backends/open-segment-store.ts';
export { MultiSegmentStore } from './stores/multi/multi-segment-store.ts';
export type {
  MultiSegmentStoreOptions,
  SetDatabase,
  SetDatabaseStats,
  SetJoinReport,
  SetMemberStore,
} from './stores/multi/multi-segment-store.ts';
export {
  DEFAULT_FENCE_MARGIN,
  DEFAULT_FENCE_RANGES,
  DEFAULT_SEGMENT_TABLE,
  DEFAULT_STORE_TIMEOUT_MS,
} from './stores/store-support.ts';
export type { SegmentStoreOptions } from './stores/store-support.ts';
export { IdMintClient } from './client/client.ts';
export type { DecodedId, IdMintClientOptions, Readiness, Tag } from './client/client.ts';
export type {
  DecodedAnyId as ClientDecodedAnyId,
  DecodedOpaqueSegmentId,
  DecodedOpaqueSnowflakeId,
  IdFamilyName,
} from './client/client.ts';
export type {
  AcquireRequest,
  NodeIdentity,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from './ports/worker-registry.ts';
export { SnowflakeWorker } from './service/snowflake-worker.ts';
export type {
  PeerClockCheck,
  SnowflakeWorkerEvent,
  SnowflakeWorkerOptions,
  SnowflakeWorkerState,
  WorkerRollbackOptions,
} from './service/snowflake-worker.ts';
export { localNodeIdentity } from './service/node-identity.ts';
export { WORKER_REGISTRY_FORMS, openWorkerRegistry } from './backends/open-worker-registry.ts';
export type { OpenWorkerRegistryOptions } from './backends/open-worker-registry.ts';
export { UuidV4Generator, decodeUuid, isUuid, uuidFromBytes, uuidToBytes } from './core/uuid.ts';
export type { DecodedUuid, UuidV4Options, UuidVariant } from './core/uuid.ts';
export { CROCKFORD_BASE32, decodeUlid, isUlid, ulidFromBytes, ulidToBytes } from './core/ulid.ts';
export type { DecodedUlid } from './core/ulid.ts';
export { decodeObjectId, isObjectId, objectIdFromBytes, objectIdToBytes } from './core/objectid.ts';
export type { DecodedObjectId } from './core/objectid.ts';
export { ID_FORMATS, decodeAny, detectFormat } from './core/id-formats.ts';
export type {
  DecodeAnyOptions,
  DecodedAnyId,
  DecodedSnowflake,
  IdFormat,
} from './core/id-formats.ts';
export { FAMILY_ROLLBACK_POLICIES } from './core/monotonic-time.ts';
export { RandomPool, webCryptoFill } from './core/random-pool.ts';
export type { RandomFill } from './core/random-pool.ts';
export { MAX_FF1_LENGTH, MAX_FF1_TWEAK_BYTES, createFf1 } from './core/ff1.ts';
export type { Ff1, Ff1Domain, Ff1Options, Ff1Tweak } from './core/ff1.ts';
export {
  MAX_OPAQUE_RANGE,
  OPAQUE_SEGMENT_DOMAIN,
  OPAQUE_SNOWFLAKE_DOMAIN,
  OpaqueCodec,
  parseOpaqueKeys,
} from './core/opaque.ts';
export type {
  DecodedOpaqueId,
  OpaqueCodecOptions,
  OpaqueDomain,
  OpaqueKey,
} from './core/opaque.ts';
