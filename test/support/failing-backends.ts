// The real services the backend-failure suites cut off behind a TcpProxy (refusing or
// black-holing), shared by test/backend-failures-runtime.test.ts (the adapters alone) and
// test/backend-failures-server.test.ts (a server over them): each backend listed once, with how
// to reach it through a proxy's port and how to remove what a test left in it.
import { removeRegistryData } from './coordinators.ts';
import { deleteRedisNamespace, dropSqlTable } from './registry-admin.ts';
import { type SEGMENT_BACKENDS, withPort } from './segment-backends.ts';
import { SERVICES, type ServiceName } from './services.ts';

/** A segment store's kind (in its lines), its fixture in SEGMENT_BACKENDS and its service. */
export const FAILING_STORES: readonly [
  kind: string,
  backend: keyof typeof SEGMENT_BACKENDS,
  service: ServiceName,
][] = [
  ['postgres', 'postgres', 'postgres'],
  ['mysql', 'mariadb', 'mysql'],
  ['redis', 'redis', 'redis'],
];

/** A worker registry reached through a proxy, and how to remove what its cluster left behind. */
export interface FailingRegistry {
  readonly kind: string;
  readonly service: ServiceName;
  /** The registry's URL through `port`, for `cluster`. */
  url(port: number, cluster: string): string;
  clean(cluster: string): Promise<void>;
}

/** The cluster is the URL's path (ZooKeeper, etcd), the name (Redis) or the table (SQL). */
export const FAILING_REGISTRIES: readonly FailingRegistry[] = [
  ...(['zookeeper', 'etcd'] as const).map((kind) => ({
    kind,
    service: kind,
    url: (port: number, cluster: string) => `${kind}://127.0.0.1:${port}/${cluster}`,
    clean: (cluster: string) => removeRegistryData(`${kind}://127.0.0.1/${cluster}`),
  })),
  {
    kind: 'redis',
    service: 'redis',
    url: (port) => withPort(SERVICES.redis.url, port),
    clean: (cluster) => deleteRedisNamespace(SERVICES.redis.url, cluster),
  },
  ...(['postgres', 'mysql'] as const).map((kind) => ({
    kind,
    service: kind,
    url: (port: number) => withPort(SERVICES[kind].url, port),
    clean: (cluster: string) => dropSqlTable(SERVICES[kind].url, cluster),
  })),
];

/**
 * Segment settings of a server whose store is cut off: calls bounded by 1 s, a draw waiting
 * 200 ms at most, a failed load retried after 300 ms, and ranges of 5 loaded at once, so the
 * buffer runs dry and the store's failure shows within a few draws.
 */
export const FAILING_SEGMENT_SETTINGS = {
  timeoutMs: 1000,
  waitTimeoutMs: 200,
  retryAfterMs: 300,
  maxStep: 5,
  prefetchThreshold: 1,
} as const;
