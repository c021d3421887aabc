import { redactUrl } from '../service/connection-url.ts';
import { IdMintError } from '../core/errors.ts';
import type { WorkerRegistry } from '../ports/worker-registry.ts';

/** Options for {@link openWorkerRegistry}; each applies only where it says. */
export interface OpenWorkerRegistryOptions {
  /**
   * Cluster name for Redis and SQL; worker IDs are unique within it. Default `idmint`. ZooKeeper
   * and etcd take it from the URL path.
   */
  readonly name?: string;
  /** Lease TTL in ms (ZooKeeper: the session timeout asked for). Default 10000; static 3000. */
  readonly ttlMs?: number;
  /** Bound on connecting and on one coordinator round trip. Default 5000 ms. */
  readonly operationTimeoutMs?: number;
  /** static: directory of the state file. Default `./data`. */
  readonly stateDir?: string;
  /** SQL: table name. Default `worker_node`. */
  readonly table?: string;
  /** ZooKeeper: how long an entry must be unwritten before it is recycled. Default 10000 ms. */
  readonly recycleAfterMs?: number;
  /**
   * Leaf's weak dependency (off unless set): keep the worker ID and reports in this local file,
   * so the node can restart while the coordinator is down. See docs/workers.md first.
   */
  readonly cacheFile?: string;
  /** The setting's name in error messages, e.g. `IDMINT_WORKER_REGISTRY`. Default `workerRegistry`. */
  readonly key?: string;
}

/** The forms accepted, for error messages and docs. */
export const WORKER_REGISTRY_FORMS = [
  'static:<worker id>',
  'zookeeper://host:2181[,host:2181...]/<name>',
  'etcd://host:2379[,host:2379...]/<name>',
  'redis://host:6379/<db>',
  'postgres://user@host:5432/<database>',
  'mysql://user@host:3306/<database>',
  'sqlite:<file>',
] as const;

/**
 * Opens the worker registry a URL names. The static registry loads nothing else; every other
 * adapter, and its driver, is imported only when its URL is used.
 *
 * - `static:0`: worker 0 from configuration, state file under `./data/`;
 * - `zookeeper://host:2181/name`: Leaf's layout under `/snowflake/name`;
 * - `etcd://host:2379/name`: keys under `/idmint/workers/name/`;
 * - `redis://host:6379/0`: keys under `idmint:workers:{<options.name>}:` in database 0;
 * - `postgres://...`, `mysql://...`, `sqlite:path.db`: a `worker_node` table.
 *
 * Anything else is CONFIG_INVALID naming the value and these forms. Connection failures are
 * REGISTRY_UNAVAILABLE.
 */
export async function openWorkerRegistry(url: string, options: OpenWorkerRegistryOptions = {}): Promise<WorkerRegistry> {
  const invalid = (why: string) =>
    new IdMintError('CONFIG_INVALID', `${options.key ?? 'workerRegistry'} ${why}: got "${redactUrl(String(url))}"; allowed forms: ${WORKER_REGISTRY_FORMS.join(', ')}`);
  if (typeof url !== 'string') throw invalid('must be a string');
  const common = { ttlMs: options.ttlMs, operationTimeoutMs: options.operationTimeoutMs };

  const staticId = /^static:(\d{1,10})$/.exec(url);
  if (staticId !== null) {
    const { StaticWorkerRegistry } = await import('./static/static-worker-registry.ts');
    return new StaticWorkerRegistry({ workerId: Number(staticId[1]), stateDir: options.stateDir, ttlMs: options.ttlMs });
  }

  let registry: WorkerRegistry;
  const coordinator = /^(zookeeper|etcd):\/\/([^/]+)\/([^/]+)$/.exec(url);
  if (coordinator !== null) {
    const [, scheme, hosts = '', name] = coordinator;
    if (!/^[A-Za-z0-9_.-]+(:\d+)?(,[A-Za-z0-9_.-]+(:\d+)?)*$/.test(hosts)) throw invalid('has a bad host list');
    if (scheme === 'zookeeper') {
      const { connectZooKeeperWorkerRegistry } = await import('./zookeeper/zookeeper-worker-registry.ts');
      registry = await connectZooKeeperWorkerRegistry(hosts, { ...common, name, recycleAfterMs: options.recycleAfterMs });
    } else {
      const { connectEtcdWorkerRegistry } = await import('./etcd/etcd-worker-registry.ts');
      const endpoints = hosts.split(',').map((host) => `http://${host}`).join(',');
      registry = await connectEtcdWorkerRegistry(endpoints, { ...common, name });
    }
  } else if (/^rediss?:\/\/[^/]+(\/\d+)?$/.test(url)) {
    const { connectRedisWorkerRegistry } = await import('./redis/redis-worker-registry.ts');
    registry = await connectRedisWorkerRegistry(url, { ...common, name: options.name });
  } else if (/^(postgres|postgresql|mysql):\/\/[^/]+\/[^/?]+/.test(url) || /^sqlite:./.test(url)) {
    const { connectSqlWorkerRegistry } = await import('./sql/sql-worker-registry.ts');
    registry = await connectSqlWorkerRegistry(url, { ...common, name: options.name, table: options.table });
  } else {
    throw invalid('is not a worker registry URL');
  }

  if (options.cacheFile === undefined) return registry;
  const { CachedWorkerRegistry } = await import('./cache/cached-worker-registry.ts');
  return new CachedWorkerRegistry(registry, { file: options.cacheFile });
}

