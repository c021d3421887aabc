import {
  WORKER_REGISTRY_URL_FORMS,
  hostText,
  parseConnectionUrl,
  sqlDriverUrl,
} from '../shared/connection-url.ts';
import type { WorkerRegistry } from '../ports/worker-registry.ts';
import type { Interleave } from './common.ts';

/** Options for {@link openWorkerRegistry}; each applies only where it says. */
export interface OpenWorkerRegistryOptions {
  /**
   * Cluster name for Redis, SQL and static; worker IDs are unique within it (static: on this
   * host). Default `idmint`. ZooKeeper and etcd take it from the URL path.
   */
  readonly name?: string;
  /** Lease TTL in ms (ZooKeeper: the session timeout asked for). Default 10000; static 3000. */
  readonly ttlMs?: number;
  /** Bound on connecting and on one coordinator round trip. Default 5000 ms. */
  readonly operationTimeoutMs?: number;
  /** static: directory of the state file. Default `./data`. */
  readonly stateDir?: string;
  /**
   * static: the host-wide directory of worker-ID locks, the same for every process of the host
   * (so two of them never run one worker ID of a cluster). Default `/tmp/idmint`.
   */
  readonly lockDir?: string;
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
  /** Tests only: pauses the registry at the steps docs/workers.md lists (see {@link Interleave}). */
  readonly interleave?: Interleave;
}

/** The forms accepted, for error messages and docs (owned by shared/connection-url.ts). */
export const WORKER_REGISTRY_FORMS = WORKER_REGISTRY_URL_FORMS;

/**
 * Opens the worker registry a URL names. The static registry loads nothing else; every other
 * adapter, and its driver, is imported only when its URL is used.
 *
 * - `static:0`: worker 0 from configuration, state file under `./data/`, locked host-wide;
 * - `zookeeper://host:2181/name`: Leaf's layout under `/snowflake/name`;
 * - `etcd://host:2379/name`: keys under `/idmint/workers/name/`;
 * - `redis://host:6379/0` (`rediss://` for TLS): keys under `idmint:workers:{<options.name>}:` in database 0;
 * - `postgres://...`, `mysql://...` (or `mariadb://`), `sqlite:path.db`: a `worker_node` table.
 *
 * Anything else is CONFIG_INVALID naming the setting, the value (password hidden) and these
 * forms. Connection failures are REGISTRY_UNAVAILABLE.
 */
export async function openWorkerRegistry(
  url: string,
  options: OpenWorkerRegistryOptions = {},
): Promise<WorkerRegistry> {
  const parsed = parseConnectionUrl(url, 'worker-registry', options.key ?? 'worker registry URL');
  const common = {
    ttlMs: options.ttlMs,
    operationTimeoutMs: options.operationTimeoutMs,
    interleave: options.interleave,
  };

  let registry: WorkerRegistry;
  switch (parsed.kind) {
    case 'static': {
      const { StaticWorkerRegistry } = await import('./static/static-worker-registry.ts');
      return new StaticWorkerRegistry({
        workerId: parsed.workerId,
        stateDir: options.stateDir,
        lockDir: options.lockDir,
        name: options.name,
        ttlMs: options.ttlMs,
        interleave: options.interleave,
      });
    }
    case 'zookeeper': {
      const { connectZooKeeperWorkerRegistry } = await import(
        './zookeeper/zookeeper-worker-registry.ts'
      );
      const hosts = parsed.hosts.map((host) => hostText(host, 2181)).join(',');
      registry = await connectZooKeeperWorkerRegistry(hosts, {
        ...common,
        name: parsed.name,
        recycleAfterMs: options.recycleAfterMs,
      });
      break;
    }
    case 'etcd': {
      const { connectEtcdWorkerRegistry } = await import('./etcd/etcd-worker-registry.ts');
      const endpoints = parsed.hosts.map((host) => `http://${hostText(host, 2379)}`).join(',');
      registry = await connectEtcdWorkerRegistry(endpoints, { ...common, name: parsed.name });
      break;
    }
    case 'redis': {
      const { connectRedisWorkerRegistry } = await import('./redis/redis-worker-registry.ts');
      registry = await connectRedisWorkerRegistry(url, { ...common, name: options.name });
      break;
    }
    default: {
      // postgres, mysql (mariadb:// included) and sqlite. The SQL registry's driver reads the URL
      // rebuilt with every part encoded, so a raw password with `@` or `/` in it works too.
      const { connectSqlWorkerRegistry } = await import('./sql/sql-worker-registry.ts');
      registry = await connectSqlWorkerRegistry(
        parsed.kind === 'sqlite' ? url : sqlDriverUrl(url),
        { ...common, name: options.name, table: options.table },
      );
    }
  }

  if (options.cacheFile === undefined) return registry;
  const { CachedWorkerRegistry } = await import('./cache/cached-worker-registry.ts');
  // The cluster whose worker IDs the file holds: a file of another is never used offline.
  const name =
    parsed.kind === 'zookeeper' || parsed.kind === 'etcd'
      ? parsed.name
      : (options.name ?? 'idmint');
  const sql = parsed.kind !== 'redis' && parsed.kind !== 'zookeeper' && parsed.kind !== 'etcd';
  const cluster = sql ? `${options.table ?? 'worker_node'}/${name}` : name;
  return new CachedWorkerRegistry(registry, { file: options.cacheFile, cluster });
}
