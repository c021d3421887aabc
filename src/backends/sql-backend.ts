// What every SQL backend shares: one segment store (stores/sql/) and one worker registry
// (registries/sql/) over the driver layer (src/sql/), so a SQL backend names only its driver. A
// new dialect is a driver file in src/sql/, a descriptor built here and a line in catalog.ts.

import type { SqlDriver, SqlPoolOptions, SqlServerAddress } from '../sql/sql-driver.ts';
import {
  decodeUrlPart,
  hostText,
  isRefusal,
  refuse,
  splitUrl,
  type UrlRefusal,
} from '../shared/connection-url.ts';
import type { BackendDescriptor, StoreSettings } from './descriptor.ts';

/** Connections a segment store's pool holds unless `poolSize` says otherwise. */
const DEFAULT_STORE_POOL_SIZE = 10;

/** A SQL backend: its descriptor without the openers, and how it opens its driver. */
export interface SqlBackendSpec<Options>
  extends Omit<BackendDescriptor<Options>, 'openStore' | 'openRegistry' | 'cacheCluster'> {
  /** Opens the driver on `options`; `pool.poolSize` is ignored by an embedded database. */
  openDriver(options: Options, pool: SqlPoolOptions, settings: StoreSettings): Promise<SqlDriver>;
}

/** A descriptor playing both roles on the shared SQL store and registry. */
export function sqlBackend<Options>(spec: SqlBackendSpec<Options>): BackendDescriptor<Options> {
  const { openDriver, ...described } = spec;
  return {
    ...described,
    async openStore(options, settings) {
      const [{ SqlSegmentStore }, { resolveStoreOptions }] = await Promise.all([
        import('../stores/sql/sql-segment-store.ts'),
        import('../stores/store-support.ts'),
      ]);
      const { timeoutMs } = resolveStoreOptions(settings);
      const poolSize = settings.poolSize ?? DEFAULT_STORE_POOL_SIZE;
      const driver = await openDriver(options, { poolSize, timeoutMs }, settings);
      return new SqlSegmentStore(driver, settings);
    },
    async openRegistry(options, settings) {
      const { connectSqlWorkerRegistry, SQL_REGISTRY_POOL_SIZE } = await import(
        '../registries/sql/sql-worker-registry.ts'
      );
      const connection = {
        backend: spec.kind,
        where: spec.target(options),
        open: (timeoutMs: number) =>
          openDriver(options, { poolSize: SQL_REGISTRY_POOL_SIZE, timeoutMs }, {}),
      };
      return connectSqlWorkerRegistry(connection, {
        name: settings.name,
        table: settings.table,
        ttlMs: settings.ttlMs,
        maxLeadMs: settings.maxLeadMs,
        operationTimeoutMs: settings.operationTimeoutMs,
        interleave: settings.interleave,
      });
    },
    // The table and the cluster together name the worker IDs a cache file holds.
    cacheCluster: (_options, settings) =>
      `${settings.table ?? 'worker_node'}/${settings.name ?? 'idmint'}`,
  };
}

/** How a network SQL database's URL reads: `scheme://user:password@host:port/database?options`. */
export interface SqlServerUrlShape {
  readonly defaultPort: number;
  /** True when the host may be given in the query instead (PostgreSQL's Unix socket directory). */
  readonly hostInQuery?: boolean;
}

/** A network SQL database's URL read into its address, or why it is refused. */
export function parseSqlServerUrl(
  url: string,
  shape: SqlServerUrlShape,
): SqlServerAddress | UrlRefusal {
  const parts = splitUrl(url, {
    pathNames: 'database',
    ...(shape.hostInQuery === true ? { hostInQuery: true } : {}),
  });
  if (isRefusal(parts)) return parts;
  const { scheme, hosts, user, password, path, query } = parts;
  const host = hosts[0];
  if (hosts.length !== 1 || host === undefined)
    return refuse(`names ${hosts.length} hosts; ${scheme}:// takes one`);
  const database = decodeUrlPart(path.slice(1));
  if (database === '' || database.includes('/'))
    return refuse(
      `names no database: ${scheme}://user:password@host:${shape.defaultPort}/<database>`,
    );
  return {
    ...(user === undefined ? {} : { user }),
    ...(password === undefined ? {} : { password }),
    host,
    database,
    query,
  };
}

/** The target and hosts (with the default port where the URL gives none) of a SQL server. */
export function sqlServerPlace(defaultPort: number) {
  return {
    target: (address: SqlServerAddress) => hostText(address.host),
    hosts: (address: SqlServerAddress) => [
      { ...address.host, port: address.host.port ?? defaultPort },
    ],
  };
}
