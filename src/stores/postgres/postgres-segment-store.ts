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

/** The part of a `pg` PoolClient idmint uses (a structural subset: idmint never imports pg's types). */
export interface PgClientLike {
  query(config: { text: string; values: SqlValue[]; types: PgTypesLike }): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
  /** `release(true)` destroys the connection instead of returning it to the pool. */
  release(destroy?: boolean): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
  removeListener(event: 'error', listener: (error: Error) => void): unknown;
}

/** The part of a `pg` Pool idmint uses. */
export interface PgPoolLike {
  connect(): Promise<PgClientLike>;
  end(): Promise<void>;
}

/** pg's per-query type parser hook. */
export interface PgTypesLike {
  getTypeParser(oid: number, format?: string): (value: string) => unknown;
}

/** Options for {@link PostgresSegmentStore}: `pool`, `closePool`, `table`, `timeoutMs`. */
export type PostgresSegmentStoreOptions = PooledSegmentStoreOptions<PgPoolLike>;

/**
 * Leaf's table on PostgreSQL through `pg`. Allocation is one `UPDATE ... RETURNING` statement,
 * atomic under any number of concurrent allocators.
 */
export class PostgresSegmentStore extends SqlSegmentStore {
  constructor(options: PostgresSegmentStoreOptions) {
    super(new PgDriver(options.pool, options.closePool === true), options);
  }

  /** Opens a pool of its own on `url` (`postgres://user@host:5432/db`), ended by close(). Loads `pg` on first use. */
  static async connect(url: string, options: ConnectSegmentStoreOptions = {}): Promise<PostgresSegmentStore> {
    const { timeoutMs } = resolveStoreOptions(options);
    const { default: pg } = await import('pg');
    const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 10, connectionTimeoutMillis: timeoutMs, keepAlive: true });
    // An idle connection dropped by the server (restart, network cut) is reported here; without a
    // listener Node would crash the process. The pool opens a fresh one on next use.
    pool.on('error', () => undefined);
    return new PostgresSegmentStore({ ...options, pool, closePool: true });
  }
}

/**
 * Every column comes back as PostgreSQL's text: exact for int8 whatever parsers the pool was
 * configured with (a global "int8 as number" parser would silently lose digits above 2^53).
 */
const TEXT_TYPES: PgTypesLike = { getTypeParser: () => (value: string) => value };

class PgDriver implements SqlDriver {
  readonly backend = 'postgres';
  readonly supportsReturning = true;
  // update_time is `timestamp` (no zone), as Leaf's: store UTC in it.
  readonly nowSql = "(now() AT TIME ZONE 'UTC')";
  readonly #pool: PgPoolLike;
  readonly #ownsPool: boolean;
  readonly #positional = new Map<string, string>();

  constructor(pool: PgPoolLike, ownsPool: boolean) {
    if (pool === undefined || typeof pool.connect !== 'function') throw new TypeError('PostgresSegmentStore needs { pool } (a pg Pool); use PostgresSegmentStore.connect(url) to open one');
    this.#pool = pool;
    this.#ownsPool = ownsPool;
  }

  isDuplicateKey(error: unknown): boolean {
    return (error as { code?: unknown } | null)?.code === '23505'; // unique_violation
  }

  withConnection<T>(run: (connection: SqlConnection) => Promise<T>, options: { readonly transaction: boolean; readonly signal: AbortSignal }): Promise<T> {
    const acquire = async (): Promise<PooledConnection> => {
      const client = await this.#pool.connect();
      // A connection lost while checked out is reported twice: the query rejects (handled) and
      // the client emits 'error', which would crash the process without a listener. The pool
      // listens only while the client is idle, so listen while it is ours.
      const ignore = () => undefined;
      client.on('error', ignore);
      return {
        query: async (sql, params) => {
          const result = await client.query({ text: this.#toPositional(sql), values: [...params], types: TEXT_TYPES });
          return { rows: result.rows, affectedRows: result.rowCount ?? 0 };
        },
        release: (destroy) => {
          client.removeListener('error', ignore);
          client.release(destroy);
        },
      };
    };
    return withPooledConnection(acquire, run, { ...options, begin: 'BEGIN' });
  }

  async close(): Promise<void> {
    if (this.#ownsPool) await this.#pool.end();
  }

  /** `?` placeholders as pg's `$1, $2, ...` (the shared SQL has no `?` inside literals). */
  #toPositional(sql: string): string {
    let text = this.#positional.get(sql);
    if (text === undefined) {
      let n = 0;
      text = sql.replace(/\?/g, () => `$${++n}`);
      this.#positional.set(sql, text);
    }
    return text;
  }
}
