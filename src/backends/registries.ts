// idmint/registries: opening a worker registry from a URL, and the adapters that need no
// driver. Each coordinator adapter is its own subpath (idmint/registries/zookeeper,
// idmint/registries/etcd, idmint/registries/redis, idmint/registries/sql), so importing this
// loads none of them. It lives beside the catalog, which opens registries by URL.
export { WORKER_REGISTRY_FORMS, openWorkerRegistry } from './open-worker-registry.ts';
export type { OpenWorkerRegistryOptions } from './open-worker-registry.ts';
export { StaticWorkerRegistry } from '../registries/static/static-worker-registry.ts';
export type { StaticWorkerRegistryOptions } from '../registries/static/static-worker-registry.ts';
export { CachedWorkerRegistry } from '../registries/cache/cached-worker-registry.ts';
export type { CachedWorkerRegistryOptions } from '../registries/cache/cached-worker-registry.ts';
export type { Interleave, InterleavePoint, InterleaveStep } from '../registries/common.ts';
export type {
  AcquireRequest,
  NodeIdentity,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from '../ports/worker-registry.ts';
