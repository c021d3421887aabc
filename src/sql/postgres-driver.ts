import { buildUrl } from '../shared/connection-url.ts';
import {
  insertOnConflictDoNothing,
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
 * The part of a `pg` PoolClient idmint uses (a structural subset: idmint never imports pg's types).
 * Queries go through the callback form: see {@link PostgresDriver}.
 */
export interface PgClientLike {
  query(
    config: { text: string; values: SqlValue[]; types: PgTypesLike },
    callback: (
      error: Error | null | undefined,
      result: { rows: Record<string, unknown>[]; rowCount: number | null },
    ) => void,
  ): void;
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

/** string_data_right_truncation, character_not_in_repertoire, untranslatable_character. */
const VALUE_REFUSED = new Set(['22001', '22021', '22P05']);

export const postgresDialect: SqlDialect = {
  backend: 'postgres',
  supportsReturning: true,
  // Leaf's update_time is `timestamp` (no zone): store UTC in it.
  nowTimestamp: "(now() AT TIME ZONE 'UTC')",
  // clock_timestamp(), not now(): now() is frozen at the start of the transaction.
  nowMs: '(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint',
  autoTimestampColumn: (name) => `${name} timestamp NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')`,
  timestampFromMs: (param) =>
    `(to_timestamp(CAST(${param} AS double precision) / 1000) AT TIME ZONE 'UTC')`,
  createIndex: (table, index, column) =>
    `CREATE INDEX IF NOT EXISTS ${index} ON ${table} (${column})`,
  // Two IF NOT EXISTS racing: the loser trips over the winner's catalog row (unique_violation).
  isDuplicateIndex: (error) => (error as { code?: unknown } | null)?.code === '23505',
  castToBigint: (expr) => `CAST(${expr} AS BIGINT)`,
  tableOptions: '',
  insertIfAbsent: insertOnConflictDoNothing,
  isDuplicateKey(error) {
    return (error as { code?: unknown } | null)?.code === '23505'; // unique_violation
  },
  isValueRefused(error) {
    return VALUE_REFUSED.has(String((error as { code?: unknown } | null)?.code));
  },
  // undefined_table
  isMissingTable: (error) => (error as { code?: unknown } | null)?.code === '42P01',
  limit: limitClause,
  greatest: (a, b) => `GREATEST(${a}, ${b})`,
  // The cluster's system identifier (new on initdb; a base backup, hence a replica, keeps it) and
  // the timeline WAL is written on now, which a promotion (and a point-in-time recovery) moves to
  // a new one; the WAL file name starts with it in hex. The current WAL position is unknown on a
  // server in recovery, so a replica fails here, as any write on it would. pg_control_system()
  // reads the control file (8 kB, cached by the OS); neither function needs a privilege.
  liveHistory:
    "('postgres system ' || (SELECT system_identifier FROM pg_control_system()) || ' " +
    "timeline ' || " +
    "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)",
};

/**
 * Every column comes back as PostgreSQL's text: exact for int8 whatever parsers the pool was
 * configured with (a global "int8 as number" parser would silently lose digits above 2^53).
 */
const TEXT_TYPES: PgTypesLike = { getTypeParser: () => (value: string) => value };

/**
 * PostgreSQL through a `pg` Pool: {@link PostgresDriver.open} opens one, or pass your own.
 *
 * Statements use pg's callback form, and the pool has no `query_timeout` (the caller's signal
 * bounds every call and destroys the connection). pg's promise form and its per-query read timer
 * each keep every row read since the last young-generation collection reachable until that
 * collection: with a million-tag full read, each collection copied 10 to 15 MB and held the event
 * loop 10 to 18 ms; with the callback form it copies almost nothing (0.3 ms).
 */
export class PostgresDriver implements SqlDriver {
  readonly dialect = postgresDialect;
  readonly #pool: PgPoolLike;
  readonly #closePool: boolean;
  readonly #positional = new Map<string, string>();

  /** A driver on `pool`; close() ends the pool only when `closePool`. */
  constructor(pool: PgPoolLike, options: { readonly closePool: boolean }) {
    if (pool === null || typeof pool !== 'object' || typeof pool.connect !== 'function') {
      throw new TypeError(
        'the PostgreSQL driver needs a pg Pool; PostgresDriver.open(address) opens one',
      );
    }
    this.#pool = pool;
    this.#closePool = options.closePool;
  }

  /** A driver on a pool of its own at `address`, ended by close(). Loads `pg` only now. */
  static async open(address: SqlServerAddress, options: SqlPoolOptions): Promise<PostgresDriver> {
    return new PostgresDriver(await openPostgresPool(address, options), { closePool: true });
  }

  withConnection<T>(
    run: (connection: SqlConnection) => Promise<T>,
    options: SqlConnectionOptions,
  ): Promise<T> {
    const acquire = async (): Promise<PooledConnection> => {
      const client = await this.#pool.connect();
      // A connection lost while checked out is reported twice: the query rejects (handled) and
      // the client emits 'error', which would crash the process without a listener. The pool
      // listens only while the client is idle, so listen while it is ours.
      const ignore = () => undefined;
      client.on('error', ignore);
      return {
        query: (sql, params) =>
          new Promise((resolve, reject) => {
            client.query(
              { text: this.#toPositional(sql), values: [...params], types: TEXT_TYPES },
              (error, result) => {
                if (error) reject(error);
                else resolve({ rows: result.rows, affectedRows: result.rowCount ?? 0 });
              },
            );
          }),
        release: (destroy) => {
          client.removeListener('error', ignore);
          client.release(destroy);
        },
      };
    };
    return withPooledConnection(acquire, run, { ...options, begin: 'BEGIN' });
  }

  async close(): Promise<void> {
    if (this.#closePool) await this.#pool.end();
  }

  /** `?` placeholders as pg's `$1, $2, ...`, rewritten once per statement text. */
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

/** Opens a `pg` Pool on `address`, loading the driver only now. */
export async function openPostgresPool(
  address: SqlServerAddress,
  options: SqlPoolOptions,
): Promise<PgPoolLike> {
  const { default: pg } = await loadDriver('pg', 'a postgres:// URL', () => import('pg'));
  const pool = new pg.Pool({
    // Every part encoded: a raw password with `@` or `/` in it reads as written.
    connectionString: buildUrl({ ...address, scheme: 'postgresql', path: address.database }),
    max: options.poolSize,
    connectionTimeoutMillis: options.timeoutMs,
    // No query_timeout: see PostgresDriver. Every call is bounded by its caller's signal.
    keepAlive: true,
  });
  // An idle connection dropped by the server (restart, network cut) is reported here; without a
  // listener Node would crash the process. The pool opens a fresh one on next use.
  pool.on('error', () => undefined);
  return pool;
}
