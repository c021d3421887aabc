// idmint/registries: opening a worker registry from a URL, and the adapters that need no
// driver. Each coordinator adapter is its own subpath (idmint/registries/zookeeper, idmint/registries/etcd,
// idmint/registries/redis, idmint/registries/sql), so importing this loads none of them.
export { WORKER_REGISTRY_FORMS, openWorkerRegistry } from './open-worker-registry.ts';
export type { OpenWorkerRegistryOptions } from './open-worker-registry.ts';
export { StaticWorkerRegistry } from './static/static-worker-registry.ts';
export type { StaticWorkerRegistryOptions } from './static/static-worker-registry.ts';
export { CachedWorkerRegistry } from './cache/cached-worker-registry.ts';
export type { CachedWorkerRegistryOptions } from './cache/cached-worker-registry.ts';
export type { Interleave, InterleavePoint, InterleaveStep } from './common.ts';
export type {
  AcquireRequest,
  NodeIdentity,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from '../ports/worker-registry.ts';
