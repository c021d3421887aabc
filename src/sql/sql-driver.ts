// The one SQL layer under every SQL adapter (the segment store and the worker registry): a
// connection at a time, and the few ways the dialects differ, as flags and fragments. Everything
// backend-specific lives in one file per backend beside this one (kysely's dialect/driver split);
// code outside those files never asks which backend it runs on.

import { IdMintError } from '../core/errors.ts';
import type { UrlCredentials, UrlHost } from '../shared/connection-url.ts';

/** A value bound to a `?` placeholder. Integers past 2^53 are bigints. */
export type SqlValue = string | number | bigint | null;

/** A row as the driver returns it. BIGINT columns come back exact: a bigint or a decimal string. */
export type SqlRow = Readonly<Record<string, unknown>>;

/** What one statement returned: its rows (SELECT, RETURNING) and how many rows it matched. */
export interface SqlResult {
  readonly rows: readonly SqlRow[];
  /**
   * Rows the statement matched, whether or not their values changed (MySQL counts changed rows
   * unless the connection has FOUND_ROWS, which the MySQL driver sets): an UPDATE writing values
   * identical to the stored ones still counts.
   */
  readonly affectedRows: number;
}

/** One database connection, as shared code sees it. */
export interface SqlConnection {
  /**
   * Runs one statement written with `?` placeholders; a driver whose database wants another
   * style (PostgreSQL's `$1`) rewrites them. Shared SQL has no `?` inside literals.
   */
  query(sql: string, params: readonly SqlValue[]): Promise<SqlResult>;
}

/** How a dialect's SQL differs, as capability flags and fragments shared code splices in. */
export interface SqlDialect {
  /** `sqlite`, `postgres`, `mysql`: for messages, logs and metrics. */
  readonly backend: string;
  /** True when `UPDATE ... RETURNING` exists: an update and its read are then one statement. */
  readonly supportsReturning: boolean;
  /** The current time in UTC as a value for a `timestamp` column (no zone). */
  readonly nowTimestamp: string;
  /**
   * The database's clock in integer ms since the Unix epoch, read when the statement runs (not
   * frozen at the start of a transaction). Leases are judged by this one clock.
   */
  readonly nowMs: string;
  /**
   * A `timestamp` value (UTC, comparable with what {@link nowTimestamp} writes, and with what
   * Leaf's own writers leave) for the ms since the epoch bound to `param`, rounded down to the
   * column's precision: `update_time >= timestampFromMs('?')` reads rows changed since a time.
   */
  timestampFromMs(param: string): string;
  /**
   * A statement creating index `index` on `table (column)`, a no-op where it exists, if the
   * dialect can say so; else a plain CREATE INDEX whose failure {@link isDuplicateIndex} names.
   */
  createIndex(table: string, index: string, column: string): string;
  /**
   * True when `error` says an index of that name already exists (a CREATE INDEX that raced or ran
   * before).
   */
  isDuplicateIndex(error: unknown): boolean;
  /**
   * The definition of a `timestamp` column (no zone, UTC) that a row inserted without it gets
   * the current time in, and, where the database can, every update too: Leaf's `update_time`
   * (`DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP` on MySQL, scripts/leaf_alloc.sql).
   */
  autoTimestampColumn(name: string): string;
  /**
   * `expr` as a 64-bit integer, for arithmetic that must not overflow a 32-bit `int` column
   * (PostgreSQL computes `int * int` in 32 bits and fails past 2^31).
   */
  castToBigint(expr: string): string;
  /** Appended to CREATE TABLE: table options the backend needs (a character set), or ''. */
  readonly tableOptions: string;
  /**
   * True when `error` says the database cannot store or compare a value its column cannot hold
   * (a character outside the column's character set, a string too long): the value is bad input,
   * not a database outage.
   */
  isValueRefused(error: unknown): boolean;
  /** An INSERT of one row that affects 0 rows, without an error, when its primary key exists. */
  insertIfAbsent(table: string, columns: readonly string[], values: readonly string[]): string;
  /** True when `error` is a primary-key or unique violation. */
  isDuplicateKey(error: unknown): boolean;
  /** True when `error` says a table the statement names does not exist. */
  isMissingTable(error: unknown): boolean;
  /**
   * Appended to an ordered SELECT: return at most `rows` rows (`LIMIT n`; SQL Server would say
   * `OFFSET 0 ROWS FETCH NEXT n ROWS ONLY`). `rows` is a whole number idmint chose, never input.
   */
  limit(rows: number): string;
  /** The larger of two integer expressions (`GREATEST`; SQLite's two-argument `MAX`). */
  greatest(a: string, b: string): string;
  /**
   * An expression for the database's history as it reports it now (StoreHistory.live), read on
   * the server the statement runs on: a text that changes when a replica is promoted in place of
   * the primary. See each dialect for what it is made of, and docs/segments.md for its limits.
   */
  readonly liveHistory: string;
}

/** {@link SqlDialect.insertIfAbsent} in the standard form PostgreSQL and SQLite share. */
export function insertOnConflictDoNothing(
  table: string,
  columns: readonly string[],
  values: readonly string[],
): string {
  return (
    `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${values.join(', ')}) ON CONFLICT ` +
    `DO NOTHING`
  );
}

/** Options of {@link SqlDriver.withConnection}. */
export interface SqlConnectionOptions {
  /** Run inside a transaction: committed if `run` resolves, rolled back otherwise. */
  readonly transaction: boolean;
  /**
   * Aborts when the caller gives up (a timeout). A network driver then destroys the connection
   * at once, so the server rolls back whatever is not committed and the connection is never
   * reused in an unknown state; a call that has not started yet never starts.
   */
  readonly signal: AbortSignal;
}

/** A SQL backend: its dialect, and connections one call at a time. */
export interface SqlDriver {
  readonly dialect: SqlDialect;
  /** Runs `run` on one connection; see {@link SqlConnectionOptions}. */
  withConnection<T>(
    run: (connection: SqlConnection) => Promise<T>,
    options: SqlConnectionOptions,
  ): Promise<T>;
  /** Closes what the driver owns (a pool it opened or was told to end); a no-op otherwise. */
  close(): Promise<void>;
}

/** `LIMIT n`, the form SQLite, PostgreSQL and MySQL share. */
export function limitClause(rows: number): string {
  return `LIMIT ${rows}`;
}

/**
 * Where a network SQL database is, as its backend parsed it from the URL (src/backends/): drivers
 * take these parts, never the URL string.
 */
export interface SqlServerAddress extends UrlCredentials {
  readonly host: UrlHost;
  readonly database: string;
  /** Driver options as the URL's query string gave them (`sslmode=require`), without `?`; ''. */
  readonly query: string;
}

/** Options of a driver that opens its own pool.*/
export interface SqlPoolOptions {
  /** Connections in the pool. */
  readonly poolSize: number;
  /** Bound on connecting and on one statement, in ms (the caller's signal bounds whole calls). */
  readonly timeoutMs: number;
}

/** A connection checked out of a network driver's pool. */
export interface PooledConnection extends SqlConnection {
  /** Returns the connection to the pool, or closes it when `destroy`. Called exactly once. */
  release(destroy: boolean): void;
}

/**
 * {@link SqlDriver.withConnection} for pooled network drivers (pg, mysql2): runs `run` on one
 * connection, inside `begin` ... COMMIT when asked. On abort the connection is destroyed at once,
 * so the server rolls back whatever it has not committed; after any error it is destroyed too
 * rather than reused in an unknown state (an open transaction, a half-read reply).
 */
export async function withPooledConnection<T>(
  acquire: () => Promise<PooledConnection>,
  run: (connection: SqlConnection) => Promise<T>,
  options: SqlConnectionOptions & { readonly begin: string },
): Promise<T> {
  const connection = await acquire();
  let released = false;
  const release = (destroy: boolean) => {
    if (released) return;
    released = true;
    connection.release(destroy);
  };
  const abort = () => release(true);
  // Checked out after the caller gave up: hand it straight back.
  if (options.signal.aborted) release(false);
  options.signal.addEventListener('abort', abort, { once: true });
  try {
    if (released) throw options.signal.reason;
    if (options.transaction) await connection.query(options.begin, []);
    const result = await run(connection);
    if (options.transaction) await connection.query('COMMIT', []);
    release(false);
    return result;
  } catch (error) {
    release(true);
    throw error;
  } finally {
    options.signal.removeEventListener('abort', abort);
  }
}

/**
 * Table names are interpolated into SQL (and Redis keys) unquoted, so only a plain identifier is
 * accepted; 63 characters is the shortest limit among the backends (PostgreSQL's).
 */
export const SQL_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** {@link SQL_IDENTIFIER} in words, for error messages and docs. */
export const SQL_IDENTIFIER_RULE =
  'an identifier: a letter or _, then letters, digits or _, at most 63 characters';

/** `table` if it is a plain identifier; INVALID_ARGUMENT naming the rule otherwise. */
export function checkTableName(table: unknown): string {
  if (typeof table !== 'string' || !SQL_IDENTIFIER.test(table)) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `table must be ${SQL_IDENTIFIER_RULE}, got ${JSON.stringify(table)}`,
    );
  }
  return table;
}
