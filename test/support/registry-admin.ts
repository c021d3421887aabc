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
      const [next, keys] = await client.scan(
        cursor,
        'MATCH',
        `idmint:workers:{${name}}:*`,
        'COUNT',
        1000,
      );
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
export async function deleteZooKeeperNamespace(
  connectionString: string,
  name: string,
): Promise<void> {
  const zookeeper = await import('node-zookeeper-client');
  const client = zookeeper.createClient(connectionString, { sessionTimeout: 10_000 });
  await new Promise<void>((resolve) => {
    client.once('connected', resolve);
    client.connect();
  });
  const call = <T>(run: (cb: (error: unknown, result: T) => void) => void) =>
    new Promise<T>((resolve, reject) =>
      run((error, result) => (error ? reject(error) : resolve(result))),
    );
  const remove = async (path: string): Promise<void> => {
    const children = await call<string[]>((cb) => client.getChildren(path, cb)).catch(() => []);
    for (const child of children) await remove(`${path}/${child}`);
    await call<void>((cb) => client.remove(path, -1, (error) => cb(error, undefined))).catch(
      () => {},
    );
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
export function sqlServerHarness(service: 'postgres' | 'mysql'): {
  harness: RegistryHarness;
  dropTable(): Promise<void>;
} {
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
      record: (name, workerId) => sqlRecord(url, table, name, workerId),
    },
    // Nothing to drop when the suite was skipped because the server is unreachable.
    dropTable: () => dropSqlTable(url, table).catch(() => {}),
  };
}

/** A worker ID's record as the backend stores it, read behind the registry's back. */
export interface StoredRecord {
  readonly lastTimestamp: number;
  readonly reportedAt: number;
  /**
   * When the worker ID's lease ends, in ms since the epoch by the backend's clock, where the
   * backend keeps one per ID: SQL's `lease_expires_at`, the Redis lease key's `PEXPIRETIME`.
   */
  readonly leaseEndsAt?: number;
}

/** The Redis record of `workerId` in namespace `name`. */
export async function redisRecord(
  url: string,
  name: string,
  workerId: number,
): Promise<StoredRecord | undefined> {
  const { Redis } = await import('ioredis');
  const client = new Redis(url, { lazyConnect: true });
  await client.connect();
  try {
    const [last, reported] = await client.hmget(
      `idmint:workers:{${name}}:record:${workerId}`,
      'lastTimestamp',
      'reportedAt',
    );
    // -2: no lease key (released or expired); -1: a key without expiry, which no lease is.
    const ends = Number(
      await client.call('PEXPIRETIME', `idmint:workers:{${name}}:lease:${workerId}`),
    );
    return last === null || reported === null
      ? undefined
      : {
          lastTimestamp: Number(last),
          reportedAt: Number(reported),
          ...(ends >= 0 ? { leaseEndsAt: ends } : {}),
        };
  } finally {
    client.disconnect();
  }
}

/** The etcd record of `workerId` in namespace `name`. */
export async function etcdRecord(
  hosts: string,
  name: string,
  workerId: number,
): Promise<StoredRecord | undefined> {
  const { Etcd3 } = await import('etcd3');
  const client = new Etcd3({ hosts });
  try {
    const value = await client.get(`/idmint/workers/${name}/record/${workerId}`).string();
    return value === null ? undefined : recordOf(JSON.parse(value));
  } finally {
    client.close();
  }
}

/** The ZooKeeper record (`/snowflake/<name>/workers/<id>`) of `workerId`. */
export async function zooKeeperRecord(
  connectionString: string,
  name: string,
  workerId: number,
): Promise<StoredRecord | undefined> {
  const zookeeper = await import('node-zookeeper-client');
  const client = zookeeper.createClient(connectionString, { sessionTimeout: 10_000 });
  await new Promise<void>((resolve) => {
    client.once('connected', resolve);
    client.connect();
  });
  try {
    const data = await new Promise<Buffer | undefined>((resolve, reject) =>
      client.getData(`/snowflake/${name}/workers/${workerId}`, (error, value) => {
        if (error === null || error === undefined) resolve(value);
        else if ((error as { code?: number }).code === zookeeper.Exception.NO_NODE)
          resolve(undefined);
        else reject(error);
      }),
    );
    return data === undefined ? undefined : recordOf(JSON.parse(data.toString()));
  } finally {
    client.close();
  }
}

/** The row of `workerId` in a SQL registry table (PostgreSQL, MySQL, or a SQLite file). */
export async function sqlRecord(
  url: string,
  table: string,
  name: string,
  workerId: number,
): Promise<StoredRecord | undefined> {
  const sql =
    `SELECT last_timestamp, reported_at, lease_expires_at FROM ${table} ` +
    'WHERE name = ? AND worker_id = ?';
  const [row] = await runSql(url, sql, [name, workerId]);
  return row === undefined
    ? undefined
    : {
        lastTimestamp: Number(row['last_timestamp']),
        reportedAt: Number(row['reported_at']),
        leaseEndsAt: Number(row['lease_expires_at']),
      };
}

/**
 * Runs one statement, written with `?` placeholders, behind the registry's back on the database
 * `url` names (`postgres:`, `mysql:` or `sqlite:<file>`); the rows it returns, if any.
 */
export async function runSql(
  url: string,
  sql: string,
  params: readonly (string | number)[] = [],
): Promise<Record<string, unknown>[]> {
  if (url.startsWith('mysql:')) {
    const mysql = await import('mysql2/promise');
    const connection = await mysql.createConnection(url);
    try {
      const [result] = await connection.query(sql, [...params]);
      return Array.isArray(result) ? (result as Record<string, unknown>[]) : [];
    } finally {
      await connection.end();
    }
  }
  if (url.startsWith('sqlite:')) {
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(url.slice('sqlite:'.length));
    try {
      const statement = db.prepare(sql);
      if (!/^\s*select/i.test(sql)) {
        statement.run(...params);
        return [];
      }
      return statement.all(...params) as Record<string, unknown>[];
    } finally {
      db.close();
    }
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    let n = 0;
    const text = sql.replace(/\?/g, () => `$${++n}`);
    return (await client.query(text, [...params])).rows as Record<string, unknown>[];
  } finally {
    await client.end();
  }
}

/** The static registry's state file. */
export async function stateFileRecord(path: string): Promise<StoredRecord | undefined> {
  const { readFile } = await import('node:fs/promises');
  const text = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  return text === undefined ? undefined : recordOf(JSON.parse(text));
}

function recordOf(value: { lastTimestamp?: unknown; reportedAt?: unknown }): StoredRecord {
  return { lastTimestamp: Number(value.lastTimestamp), reportedAt: Number(value.reportedAt) };
}

/**
 * Writes a worker ID's ZooKeeper nodes directly, as an older idmint or a node killed right after
 * its claim leaves them: Leaf's entry for `address` and a record at version 0 (never written
 * since its creation).
 */
export async function seedZooKeeperRecord(
  connectionString: string,
  name: string,
  address: string,
  workerId: number,
  record: StoredRecord,
): Promise<void> {
  const zookeeper = await import('node-zookeeper-client');
  const client = zookeeper.createClient(connectionString, { sessionTimeout: 10_000 });
  await new Promise<void>((resolve) => {
    client.once('connected', resolve);
    client.connect();
  });
  const call = (run: (cb: (error: unknown) => void) => void) =>
    new Promise<void>((resolve, reject) => run((error) => (error ? reject(error) : resolve())));
  try {
    for (const dir of ['forever', 'workers', 'live'])
      await call((cb) => client.mkdirp(`/snowflake/${name}/${dir}`, cb));
    const [ip, port] = address.split(':');
    const entry = Buffer.from(JSON.stringify({ ip, port, timestamp: record.lastTimestamp }));
    await call((cb) =>
      client.create(
        `/snowflake/${name}/forever/${address}-${String(workerId).padStart(10, '0')}`,
        entry,
        zookeeper.CreateMode.PERSISTENT,
        cb,
      ),
    );
    await call((cb) =>
      client.create(
        `/snowflake/${name}/workers/${workerId}`,
        Buffer.from(JSON.stringify(record)),
        zookeeper.CreateMode.PERSISTENT,
        cb,
      ),
    );
  } finally {
    client.close();
  }
}
