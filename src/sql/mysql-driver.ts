import { buildUrl } from '../shared/connection-url.ts';
import {
  limitClause,
  withPooledConnection,
  type PooledConnection,
  type SqlConnection,
  type SqlConnectionOptions,
  type SqlDialect,
  type SqlDriver,
  type SqlPoolOptions,
  type SqlServerAddress,
  type SqlValue,
} from './sql-driver.ts';
import { loadDriver } from '../shared/load-driver.ts';

/**
 * Per-query options idmint sets, so BIGINT and TIMESTAMP come back as exact strings whatever the
 * pool's defaults.
 */
export interface MysqlQueryOptions {
  sql: string;
  values: SqlValue[];
  supportBigNumbers: boolean;
  bigNumberStrings: boolean;
  dateStrings: boolean;
  /** ms; mysql2 fails the query after it (the driver then destroys the connection). */
  timeout?: number;
}

/** The part of a `mysql2/promise` PoolConnection idmint uses (a structural subset). */
export interface MysqlConnectionLike {
  query(options: MysqlQueryOptions): Promise<[unknown, unknown]>;
  release(): void;
  destroy(): void;
}

/**
 * The part of a `mysql2/promise` Pool idmint uses. Create it with the `FOUND_ROWS` flag (mysql2's
 * default; {@link MysqlDriver.open} sets it): without it MySQL counts only rows whose values
 * changed, and a lease renewal writing the same values would look like a lost lease. Set the
 * session time zone to UTC on each connection, as `open` does, so the database clock cannot
 * repeat an hour when daylight saving ends.
 */
export interface MysqlPoolLike {
  getConnection(): Promise<MysqlConnectionLike>;
  end(): Promise<void>;
}

/** ER_DUP_ENTRY */
const DUPLICATE_ENTRY = 1062;
/** ER_NO_SUCH_TABLE */
const NO_SUCH_TABLE = 1146;
/** ER_DUP_KEYNAME */
const DUPLICATE_KEY_NAME = 1061;
/**
 * ER_CANT_AGGREGATE_2COLLATIONS (a tag compared with a column whose set cannot hold it),
 * ER_CANT_AGGREGATE_NCOLLATIONS, ER_TRUNCATED_WRONG_VALUE_FOR_FIELD ("Incorrect string value"),
 * ER_INVALID_CHARACTER_STRING, ER_DATA_TOO_LONG.
 */
const VALUE_REFUSED = new Set([1267, 1271, 1366, 1300, 1406]);

export const mysqlDialect: SqlDialect = {
  backend: 'mysql',
  supportsReturning: false,
  // Written as UTC and read back with dateStrings in the same session zone, so it stays UTC.
  nowTimestamp: 'UTC_TIMESTAMP()',
  // NOW(3) is converted from the session time zone, which open() sets to UTC, so the repeated
  // hour of a daylight-saving change cannot make the clock jump back.
  nowMs: 'CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)',
  // Leaf's own definition (scripts/leaf_alloc.sql).
  autoTimestampColumn: (name) =>
    `${name} timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP`,
  // FROM_UNIXTIME answers in the session zone, UTC (open() sets it), as update_time reads back:
  // a Leaf writer's CURRENT_TIMESTAMP in any zone is stored as the instant and compares right.
  timestampFromMs: (param) => `FROM_UNIXTIME(FLOOR(${param} / 1000))`,
  // MySQL has no CREATE INDEX IF NOT EXISTS (MariaDB has): run it, and take ER_DUP_KEYNAME as done.
  createIndex: (table, index, column) => `CREATE INDEX ${index} ON ${table} (${column})`,
  isDuplicateIndex: (error) => (error as { errno?: unknown } | null)?.errno === DUPLICATE_KEY_NAME,
  // utf8mb4 holds every tag idmint accepts, whatever the server's default set (latin1 on many
  // servers); the binary collation compares tags exactly, as the other backends do (no case or
  // accent folding; trailing spaces are still ignored, as in every MySQL PAD SPACE collation).
  castToBigint: (expr) => `CAST(${expr} AS SIGNED)`,
  tableOptions: ' DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin',
  insertIfAbsent(table, columns, values) {
    return `INSERT IGNORE INTO ${table} (${columns.join(', ')}) VALUES (${values.join(', ')})`;
  },
  isDuplicateKey(error) {
    return (error as { errno?: unknown } | null)?.errno === DUPLICATE_ENTRY;
  },
  isValueRefused(error) {
    return VALUE_REFUSED.has(Number((error as { errno?: unknown } | null)?.errno));
  },
  isMissingTable: (error) => (error as { errno?: unknown } | null)?.errno === NO_SUCH_TABLE,
  limit: limitClause,
  greatest: (a, b) => `GREATEST(${a}, ${b})`,
  // The server's server_id, which MySQL and MariaDB replication both require to differ between a
  // primary and its replicas, so a promoted replica reports another one. MySQL's server_uuid
  // would also tell apart a server rebuilt under a reused server_id, but MariaDB has none, and
  // the one statement must run on both; GTID positions move on every write, so they name no
  // history (docs/segments.md, Failover and restore).
  liveHistory: "CONCAT('mysql server_id ', @@server_id)",
};

/**
 * MySQL or MariaDB through a `mysql2/promise` Pool: {@link MysqlDriver.open} opens one, or pass
 * your own.
 */
export class MysqlDriver implements SqlDriver {
  readonly dialect = mysqlDialect;
  readonly #pool: MysqlPoolLike;
  readonly #closePool: boolean;
  readonly #queryTimeoutMs: number | undefined;

  /**
   * A driver on `pool`; close() ends the pool only when `closePool`; each statement bounded by
   * `queryTimeoutMs` when given.
   */
  constructor(
    pool: MysqlPoolLike,
    options: { readonly closePool: boolean; readonly queryTimeoutMs?: number },
  ) {
    if (pool === null || typeof pool !== 'object' || typeof pool.getConnection !== 'function') {
      throw new TypeError(
        'the MySQL driver needs a mysql2/promise Pool; MysqlDriver.open(address) opens one',
      );
    }
    this.#pool = pool;
    this.#closePool = options.closePool;
    this.#queryTimeoutMs = options.queryTimeoutMs;
  }

  /**
   * A driver on a pool of its own at `address` (MySQL or MariaDB), ended by close(). Loads `mysql2`
   * only now.
   */
  static async open(address: SqlServerAddress, options: SqlPoolOptions): Promise<MysqlDriver> {
    return new MysqlDriver(await openMysqlPool(address, options), {
      closePool: true,
      queryTimeoutMs: options.timeoutMs,
    });
  }

  withConnection<T>(
    run: (connection: SqlConnection) => Promise<T>,
    options: SqlConnectionOptions,
  ): Promise<T> {
    const acquire = async (): Promise<PooledConnection> => {
      const conn = await this.#pool.getConnection();
      return {
        query: async (sql, params) => {
          const [result] = await conn.query({
            sql,
            values: [...params],
            supportBigNumbers: true,
            bigNumberStrings: true,
            dateStrings: true,
            timeout: this.#queryTimeoutMs,
          });
          return Array.isArray(result)
            ? { rows: result as Record<string, unknown>[], affectedRows: 0 }
            : {
                rows: [],
                affectedRows: Number((result as { affectedRows?: number }).affectedRows ?? 0),
              };
        },
        // After a timeout the connection is out of step with the server (a reply may still come,
        // and pool.end() would wait for it forever): destroyed, never handed out again.
        release: (destroy) => (destroy ? conn.destroy() : conn.release()),
      };
    };
    return withPooledConnection(acquire, run, { ...options, begin: 'START TRANSACTION' });
  }

  async close(): Promise<void> {
    if (this.#closePool) await this.#pool.end();
  }
}

/** Opens a `mysql2` Pool on `address` (MySQL or MariaDB), loading the driver only now. */
export async function openMysqlPool(
  address: SqlServerAddress,
  options: SqlPoolOptions,
): Promise<MysqlPoolLike> {
  const mysql = await loadDriver('mysql2', 'a mysql:// URL', () => import('mysql2/promise'));
  const pool = mysql.createPool({
    // Every part encoded: a raw password with `@` or `/` in it reads as written (and mariadb://
    // is mysql2's mysql://).
    uri: buildUrl({ ...address, scheme: 'mysql', path: address.database }),
    connectionLimit: options.poolSize,
    connectTimeout: options.timeoutMs,
    enableKeepAlive: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
    flags: ['FOUND_ROWS'],
    timezone: 'Z',
  });
  // Before the pool hands a new connection out; its queries queue behind this one. A connection
  // that could not be switched to UTC is closed rather than used.
  pool.pool.on('connection', (connection) => {
    connection.query("SET time_zone = '+00:00'", (error: unknown) => {
      if (error) connection.destroy();
    });
  });
  return pool;
}
