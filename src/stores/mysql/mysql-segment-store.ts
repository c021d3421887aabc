import {
  SqlSegmentStore,
  withPooledConnection,
  type ConnectSegmentStoreOptions,
  type PooledConnection,
  type PooledSegmentStoreOptions,
  type SqlConnection,
  type SqlDriver,
  type SqlValue,
} from '../sql/sql-segment-store.ts';
import { resolveStoreOptions } from '../store-support.ts';

/** Per-query options idmint sets, so BIGINT and TIMESTAMP come back as exact strings whatever the pool's defaults. */
export interface MysqlQueryOptions {
  sql: string;
  values: SqlValue[];
  supportBigNumbers: boolean;
  bigNumberStrings: boolean;
  dateStrings: boolean;
}

/** The part of a `mysql2/promise` PoolConnection idmint uses (a structural subset). */
export interface MysqlConnectionLike {
  query(options: MysqlQueryOptions): Promise<[unknown, unknown]>;
  release(): void;
  destroy(): void;
}

/** The part of a `mysql2/promise` Pool idmint uses. */
export interface MysqlPoolLike {
  getConnection(): Promise<MysqlConnectionLike>;
  end(): Promise<void>;
}

/** Options for {@link MysqlSegmentStore}: `pool`, `closePool`, `table`, `timeoutMs`. */
export type MysqlSegmentStoreOptions = PooledSegmentStoreOptions<MysqlPoolLike>;

/**
 * Leaf's table on MySQL or MariaDB through `mysql2`. Neither has `UPDATE ... RETURNING`, so an
 * allocation is Leaf's own transaction on one connection: the UPDATE locks the row, the SELECT
 * reads the new max_id and step, COMMIT releases it. Concurrent allocators queue on the row lock.
 */
export class MysqlSegmentStore extends SqlSegmentStore {
  constructor(options: MysqlSegmentStoreOptions) {
    super(new MysqlDriver(options.pool, options.closePool === true), options);
  }

  /** Opens a pool of its own on `url` (`mysql://user@host:3306/db`), ended by close(). Loads `mysql2` on first use. */
  static async connect(url: string, options: ConnectSegmentStoreOptions = {}): Promise<MysqlSegmentStore> {
    const { timeoutMs } = resolveStoreOptions(options);
    const mysql = await import('mysql2/promise');
    const pool = mysql.createPool({
      uri: url,
      connectionLimit: options.poolSize ?? 10,
      connectTimeout: timeoutMs,
      enableKeepAlive: true,
      supportBigNumbers: true,
      bigNumberStrings: true,
    });
    return new MysqlSegmentStore({ ...options, pool, closePool: true });
  }
}

/** ER_DUP_ENTRY */
const DUPLICATE_ENTRY = 1062;

class MysqlDriver implements SqlDriver {
  readonly backend = 'mysql';
  readonly supportsReturning = false;
  // Written as UTC and read back with dateStrings in the same session zone, so it stays UTC.
  readonly nowSql = 'UTC_TIMESTAMP()';
  readonly #pool: MysqlPoolLike;
  readonly #ownsPool: boolean;

  constructor(pool: MysqlPoolLike, ownsPool: boolean) {
    if (pool === undefined || typeof pool.getConnection !== 'function') throw new TypeError('MysqlSegmentStore needs { pool } (a mysql2/promise Pool); use MysqlSegmentStore.connect(url) to open one');
    this.#pool = pool;
    this.#ownsPool = ownsPool;
  }

  isDuplicateKey(error: unknown): boolean {
    return (error as { errno?: unknown } | null)?.errno === DUPLICATE_ENTRY;
  }

  withConnection<T>(run: (connection: SqlConnection) => Promise<T>, options: { readonly transaction: boolean; readonly signal: AbortSignal }): Promise<T> {
    const acquire = async (): Promise<PooledConnection> => {
      const conn = await this.#pool.getConnection();
      return {
        query: async (sql, params) => {
          const [result] = await conn.query({ sql, values: [...params], supportBigNumbers: true, bigNumberStrings: true, dateStrings: true });
          return Array.isArray(result)
            ? { rows: result as Record<string, unknown>[], affectedRows: 0 }
            : { rows: [], affectedRows: Number((result as { affectedRows?: number }).affectedRows ?? 0) };
        },
        release: (destroy) => (destroy ? conn.destroy() : conn.release()),
      };
    };
    return withPooledConnection(acquire, run, { ...options, begin: 'START TRANSACTION' });
  }

  async close(): Promise<void> {
    if (this.#ownsPool) await this.#pool.end();
  }
}
