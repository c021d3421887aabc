import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { blockingSleep } from '../clocks/sleep.ts';
import {
  insertOnConflictDoNothing,
  limitClause,
  type SqlConnection,
  type SqlConnectionOptions,
  type SqlDialect,
  type SqlDriver,
  type SqlResult,
  type SqlValue,
} from './sql-driver.ts';

/** The part of a `node:sqlite` StatementSync idmint uses (a structural subset). */
export interface SqliteStatementLike {
  all(...params: SqlValue[]): unknown[];
  run(...params: SqlValue[]): { changes: number | bigint };
  setReadBigInts(enabled: boolean): void;
}

/** The part of a `node:sqlite` DatabaseSync idmint uses. */
export interface SqliteDatabaseLike {
  prepare(sql: string): SqliteStatementLike;
  exec(sql: string): void;
  close(): void;
}

/** SQLITE_CONSTRAINT_PRIMARYKEY and SQLITE_CONSTRAINT_UNIQUE extended result codes. */
const DUPLICATE_KEY_CODES = new Set([1555, 2067]);

export const sqliteDialect: SqlDialect = {
  backend: 'sqlite',
  supportsReturning: true,
  // SQLite's CURRENT_TIMESTAMP is UTC ('YYYY-MM-DD HH:MM:SS').
  nowTimestamp: 'CURRENT_TIMESTAMP',
  // 'now' is fixed for the duration of one statement, so every use in it agrees.
  nowMs: "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
  autoTimestampColumn: (name) => `${name} timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP`,
  // Integer division: whole seconds, rounded down, in CURRENT_TIMESTAMP's text form, which
  // compares in time order as text.
  timestampFromMs: (param) => `datetime(${param} / 1000, 'unixepoch')`,
  createIndex: (table, index, column) =>
    `CREATE INDEX IF NOT EXISTS ${index} ON ${table} (${column})`,
  isDuplicateIndex: () => false,
  castToBigint: (expr) => `CAST(${expr} AS INTEGER)`,
  tableOptions: '',
  insertIfAbsent: insertOnConflictDoNothing,
  isDuplicateKey(error) {
    return DUPLICATE_KEY_CODES.has((error as { errcode?: number } | null)?.errcode ?? 0);
  },
  // SQLite stores any text of any length in any column.
  isValueRefused: () => false,
  // SQLITE_ERROR carries no code of its own for this: only its message tells.
  isMissingTable: (error) =>
    /no such table/i.test(error instanceof Error ? error.message : String(error)),
  limit: limitClause,
  greatest: (a, b) => `MAX(${a}, ${b})`,
  // A file has no replicas and no promotion: its history is one, as far as SQLite can tell. A
  // file restored from a backup is what `idmint db fence` is for.
  liveHistory: "'sqlite'",
};

/**
 * SQLite through `node:sqlite`, embedded: one connection, and calls run one after another, so a
 * transaction never sees another call's statements. Statements are synchronous, so a timeout
 * cannot interrupt one; the busy timeout bounds the wait for another process's write lock.
 */
export class SqliteDriver implements SqlDriver {
  readonly dialect = sqliteDialect;
  readonly #db: SqliteDatabaseLike;
  readonly #closeDatabase: boolean;
  readonly #statements = new Map<
    string,
    { statement: SqliteStatementLike; returnsRows: boolean }
  >();
  #queue: Promise<unknown> = Promise.resolve();
  #open = true;

  /** A driver on `db`; close() closes it only when `closeDatabase`. */
  constructor(db: SqliteDatabaseLike, options: { readonly closeDatabase: boolean }) {
    this.#db = db;
    this.#closeDatabase = options.closeDatabase;
  }

  /**
   * A driver on the file at `path` (see {@link openSqliteDatabase}), closed by close(). Loads
   * `node:sqlite` only now.
   */
  static async open(path: string, options: { readonly timeoutMs: number }): Promise<SqliteDriver> {
    const { DatabaseSync } = await import('node:sqlite');
    return new SqliteDriver(openSqliteDatabase(DatabaseSync, path, options.timeoutMs), {
      closeDatabase: true,
    });
  }

  withConnection<T>(
    run: (connection: SqlConnection) => Promise<T>,
    options: SqlConnectionOptions,
  ): Promise<T> {
    const result = this.#queue.then(() => {
      // The caller gave up while this call waited its turn: it never starts.
      options.signal.throwIfAborted();
      return this.#run(run, options.transaction);
    });
    this.#queue = result.catch(() => undefined);
    return result;
  }

  async close(): Promise<void> {
    await this.#queue;
    if (this.#open && this.#closeDatabase) this.#db.close();
    this.#open = false;
  }

  async #run<T>(run: (connection: SqlConnection) => Promise<T>, transaction: boolean): Promise<T> {
    const connection: SqlConnection = { query: async (sql, params) => this.#query(sql, params) };
    if (!transaction) return run(connection);
    this.#db.exec('BEGIN IMMEDIATE');
    try {
      const result = await run(connection);
      this.#db.exec('COMMIT');
      return result;
    } catch (error) {
      try {
        this.#db.exec('ROLLBACK');
      } catch {
        // SQLite already rolled back (some errors end the transaction themselves).
      }
      throw error;
    }
  }

  #query(sql: string, params: readonly SqlValue[]): SqlResult {
    let prepared = this.#statements.get(sql);
    if (prepared === undefined) {
      const statement = this.#db.prepare(sql);
      // Integers come back as bigint: max_id may exceed 2^53.
      statement.setReadBigInts(true);
      prepared = { statement, returnsRows: /^\s*select\b|\breturning\b/i.test(sql) };
      this.#statements.set(sql, prepared);
    }
    // node:sqlite binds every JS number as a REAL: `max_id + 1.0` would turn max_id into a lossy
    // float, and `9223372036854775807 - 1.0` rounds up to 2^63, defeating the overflow guard.
    // Integers are bound as bigints, so SQLite's arithmetic stays in 64-bit integers.
    const values = params.map((value) =>
      typeof value === 'number' && Number.isInteger(value) ? BigInt(value) : value,
    );
    if (prepared.returnsRows) {
      const rows = prepared.statement.all(...values) as Record<string, unknown>[];
      return { rows, affectedRows: rows.length };
    }
    return { rows: [], affectedRows: Number(prepared.statement.run(...values).changes) };
  }
}

/**
 * Opens the SQLite file at `path` (its directory created if missing), or `:memory:` for a private
 * in-memory database. Several processes may share a file: WAL lets readers run beside the
 * writer, and the busy timeout makes a writer wait up to `timeoutMs` for the lock instead of
 * failing. (A PRAGMA, not DatabaseSync's `timeout` option: older Node 22 releases ignore it.)
 * `Database` is node:sqlite's DatabaseSync, passed in so that importing this module loads no
 * driver.
 */
export function openSqliteDatabase(
  Database: new (path: string) => SqliteDatabaseLike,
  path: string,
  timeoutMs: number,
): SqliteDatabaseLike {
  if (typeof path !== 'string' || path === '')
    throw new TypeError('the SQLite driver needs a path (a file or ":memory:")');
  const file = path !== ':memory:';
  if (file) mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  db.exec(`PRAGMA busy_timeout = ${timeoutMs}`);
  if (file) enterWal(db, timeoutMs);
  return db;
}

/**
 * Switches a new file to WAL (a no-op on a file already in WAL). Two processes switching the same
 * new file at once can deadlock on the exclusive lock it needs; SQLite then answers one of them
 * "database is locked" at once, without its busy timeout (seen with `serve --processes 2` on a
 * fresh ./data). The switch is idempotent, so it is retried until `timeoutMs` has passed.
 */
function enterWal(db: SqliteDatabaseLike, timeoutMs: number): void {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
    try {
      db.exec('PRAGMA journal_mode = WAL');
      return;
    } catch (error) {
      if (!/database is locked/i.test(String(error)) || Date.now() >= deadline) throw error;
      blockingSleep(pause);
    }
  }
}
