/**
 * What the SQL worker registry needs from a database, and nothing more: the differences between
 * PostgreSQL, MySQL/MariaDB and SQLite live in the three dialect files beside this one, never as
 * `if (dialect === ...)` in the registry.
 */

/** A value bound to a statement parameter. */
export type SqlValue = string | number | null;

/** A row as the driver returns it; numbers may come back as strings (pg BIGINT) or bigints. */
export type SqlRow = Readonly<Record<string, unknown>>;

/** A connection (or pool) the registry runs its single-statement queries on. */
export interface SqlClient {
  /** Runs a SELECT and returns its rows. */
  select(sql: string, params: readonly SqlValue[]): Promise<SqlRow[]>;
  /** Runs an INSERT/UPDATE/DDL and returns the number of rows it matched. */
  execute(sql: string, params: readonly SqlValue[]): Promise<number>;
  /** Closes the connection or pool. */
  close(): Promise<void>;
}

export interface SqlDialect {
  /** Backend name for logs and metrics: `postgres`, `mysql`, `sqlite`. */
  readonly backend: string;
  /**
   * An expression for the database's clock in integer ms since the Unix epoch. Lease expiry is
   * judged by this one clock, the coordinator's, never by the nodes' clocks.
   */
  readonly nowMs: string;
  /** Rewrites `?` placeholders into the driver's form (`$1`, `$2`, ... for PostgreSQL). */
  placeholders(sql: string): string;
  /** An INSERT of one row that affects 0 rows, without an error, when its primary key exists. */
  insertIfAbsent(table: string, columns: readonly string[], values: readonly string[]): string;
}

/** `?` placeholders as they are: MySQL and SQLite use them. */
export function questionMarks(sql: string): string {
  return sql;
}
