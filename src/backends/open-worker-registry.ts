import type { WorkerRegistry } from '../ports/worker-registry.ts';
import { type BackendUrl, WORKER_REGISTRY_URL_FORMS, parseBackendUrl } from './catalog.ts';
import type { RegistrySettings } from './descriptor.ts';
import { FirstAnswerRegistry } from './first-answer-registry.ts';
import { DEFAULT_OPERATION_TIMEOUT_MS } from '../registries/common.ts';

/** Options for {@link openWorkerRegistry}: those of every registry, and: */
export interface OpenWorkerRegistryOptions extends RegistrySettings {
  /**
   * Leaf's weak dependency (off unless set): keep the worker ID and reports in this local file,
   * so the node can restart while the coordinator is down. See docs/workers.md first.
   */
  readonly cacheFile?: string;
  /**
   * The setting's name in error messages, e.g. `IDMINT_WORKER_REGISTRY`. Default `workerRegistry`.
   */
  readonly key?: string;
}

/** The forms accepted, for error messages and docs (from the catalog). */
export const WORKER_REGISTRY_FORMS = WORKER_REGISTRY_URL_FORMS;

/**
 * Opens the worker registry a URL names. The static registry loads nothing else; every other
 * adapter, and its driver, is imported only when its URL is used.
 *
 * - `static:0`: worker 0 from configuration, state file under `./data/`, locked host-wide;
 * - `zookeeper://host:2181/name`: Leaf's layout under `/snowflake/name`;
 * - `etcd://host:2379/name`: keys under `/idmint/workers/name/`;
 * - `redis://host:6379/0` (`rediss://` for TLS): keys under `idmint:workers:{<options.name>}:` in
 *   database 0;
 * - `postgres://...`, `mysql://...` (or `mariadb://`), `sqlite:path.db`: a `worker_node` table.
 *
 * Anything else is CONFIG_INVALID naming the setting, the value (password hidden) and these
 * forms. Connection failures are REGISTRY_UNAVAILABLE.
 */
export async function openWorkerRegistry(
  url: string,
  options: OpenWorkerRegistryOptions = {},
): Promise<WorkerRegistry> {
  const parsed = parseBackendUrl(url, 'worker-registry', options.key ?? 'worker registry URL');
  return openParsedRegistry(parsed, options);
}

/** Opens the registry a URL read once names (see {@link openWorkerRegistry}). */
export async function openParsedRegistry(
  url: BackendUrl,
  options: OpenWorkerRegistryOptions = {},
): Promise<WorkerRegistry> {
  const { cacheFile, key: _key, ...settings } = options;
  const opened = await url.openRegistry(settings);
  // A coordinator over the network shares one wait among a start's calls; a file (static:,
  // sqlite:) answers at once or fails in its own words.
  const registry =
    url.hosts.length === 0
      ? opened
      : new FirstAnswerRegistry(
          opened,
          url.target,
          settings.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS,
        );
  const cluster = url.cacheCluster(settings);
  if (cacheFile === undefined || cluster === undefined) return registry;
  const { CachedWorkerRegistry } = await import('../registries/cache/cached-worker-registry.ts');
  // The cluster whose worker IDs the file holds: a file of another is never used offline.
  return new CachedWorkerRegistry(registry, { file: cacheFile, cluster });
}
