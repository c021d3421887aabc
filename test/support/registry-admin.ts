import { SERVICES, hostPort, uniqueName } from './services.ts';
import type { TcpProxy } from './tcp-proxy.ts';
import type { RegistryHarness } from './worker-registry-suite.ts';

/**
 * Clean-up for the registry suites: each removes only the namespace or table a test created,
 * never anything else on the shared services.
 */

/** `url` with its host:port replaced by the proxy's, so a client connects through the proxy. */
export function viaProxy(url: string, proxy: TcpProxy | undefined): string {
  if (proxy === undefined) return url;
  const parsed = new URL(url);
  parsed.host = proxy.address;
  return parsed.toString();
}

/** Deletes the Redis keys of one registry namespace. */
export async function deleteRedisNamespace(url: string, name: string): Promise<void> {
  const { Redis } = await import('ioredis');
  const client = new Redis(url, { lazyConnect: true });
  await client.connect();
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `idmint:workers:{${name}}:*`, 'COUNT', 1000);
      if (keys.length > 0) await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
}

/** Deletes the etcd keys of one registry namespace. */
export async function deleteEtcdNamespace(hosts: string, name: string): Promise<void> {
  const { Etcd3 } = await import('etcd3');
  const client = new Etcd3({ hosts });
  try {
    await client.delete().prefix(`/idmint/workers/${name}/`);
  } finally {
    client.close();
  }
}

/** Deletes `/snowflake/<name>` and everything under it. */
export async function deleteZooKeeperNamespace(connectionString: string, name: string): Promise<void> {
  const zookeeper = await import('node-zookeeper-client');
  const client = zookeeper.createClient(connectionString, { sessionTimeout: 10_000 });
  await new Promise<void>((resolve) => {
    client.once('connected', resolve);
    client.connect();
  });
  const call = <T>(run: (cb: (error: unknown, result: T) => void) => void) =>
    new Promise<T>((resolve, reject) => run((error, result) => (error ? reject(error) : resolve(result))));
  const remove = async (path: string): Promise<void> => {
    const children = await call<string[]>((cb) => client.getChildren(path, cb)).catch(() => []);
    for (const child of children) await remove(`${path}/${child}`);
    await call<void>((cb) => client.remove(path, -1, (error) => cb(error, undefined))).catch(() => {});
  };
  try {
    await remove(`/snowflake/${name}`);
  } finally {
    client.close();
  }
}

/** Drops a table the suite created (PostgreSQL or MySQL). */
export async function dropSqlTable(url: string, table: string): Promise<void> {
  if (url.startsWith('mysql:')) {
    const mysql = await import('mysql2/promise');
    const connection = await mysql.createConnection(url);
    await connection.query(`DROP TABLE IF EXISTS ${table}`);
    await connection.end();
  } else {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`DROP TABLE IF EXISTS ${table}`);
    await client.end();
  }
}

/**
 * The harness for a SQL server (PostgreSQL or MariaDB/MySQL): one table for the test file, every
 * test with its own cluster name in it; `dropTable()` at the end of the file.
 */
export function sqlServerHarness(service: 'postgres' | 'mysql'): { harness: RegistryHarness; dropTable(): Promise<void> } {
  const url = SERVICES[service].url;
  const table = uniqueName('worker_node');
  return {
    harness: {
      backend: service,
      services: [service],
      ttlMs: 3000,
      target: hostPort(url),
      url: (_name, proxy) => viaProxy(url, proxy),
      options: (name) => ({ name, table, ttlMs: 3000, operationTimeoutMs: 1500 }),
      cleanup: async () => {},
    },
    // Nothing to drop when the suite was skipped because the server is unreachable.
    dropTable: () => dropSqlTable(url, table).catch(() => {}),
  };
}
