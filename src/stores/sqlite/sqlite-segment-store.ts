import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { SqlSegmentStore, type SqlConnection, type SqlDriver, type SqlResult, type SqlValue } from '../sql/sql-segment-store.ts';
import { resolveStoreOptions, type SegmentStoreOptions } from '../store-support.ts';

/** Options for {@link SqliteSegmentStore}. */
export interface SqliteSegmentStoreOptions extends SegmentStoreOptions {
  /** Database file (its directory is created if missing), or `:memory:` for a private in-memory database. */
  readonly path: string;
}

/**
 * The embedded SegmentStore: Leaf's table in a SQLite file through Node's built-in `node:sqlite`,
 * so idmint runs with no database server. Allocation is one `UPDATE ... RETURNING`. Several
 * processes may share the file: SQLite serialises writers, and WAL lets readers run beside them.
 */
export class SqliteSegmentStore extends SqlSegmentStore {
  constructor(options: SqliteSegmentStoreOptions) {
    super(new SqliteDriver(options.path, resolveStoreOptions(options).timeoutMs), options);
  }
}

/** SQLITE_CONSTRAINT_PRIMARYKEY and SQLITE_CONSTRAINT_UNIQUE extended result codes. */
const DUPLICATE_KEY_CODES = new Set([1555, 2067]);

class SqliteDriver implements SqlDriver {
  readonly backend = 'sqlite';
  readonly supportsReturning = true;
  // SQLite's CURRENT_TIMESTAMP is UTC ('YYYY-MM-DD HH:MM:SS').
  readonly nowSql = 'CURRENT_TIMESTAMP';
  readonly #db: DatabaseSync;
  readonly #statements = new Map<string, { statement: StatementSync; returnsRows: boolean }>();
  /** Calls run one after another: a transaction must not see another call's statements. */
  #queue: Promise<unknown> = Promise.resolve();
  #open = true;

  constructor(path: string, timeoutMs: number) {
    if (typeof path !== 'string' || path === '') throw new TypeError('SqliteSegmentStore needs a path (a file or ":memory:")');
    const file = path !== ':memory:';
    if (file) mkdirSync(dirname(path), { recursive: true });
    this.#db = new DatabaseSync(path);
    // Another process holding the write lock: wait for it, at most as long as a call may take.
    this.#db.exec(`PRAGMA busy_timeout = ${timeoutMs}`);
    if (file) this.#db.exec('PRAGMA journal_mode = WAL');
  }

  isDuplicateKey(error: unknown): boolean {
    return DUPLICATE_KEY_CODES.has((error as { errcode?: number } | null)?.errcode ?? 0);
  }

  withConnection<T>(run: (connection: SqlConnection) => Promise<T>, options: { readonly transaction: boolean }): Promise<T> {
    const result = this.#queue.then(() => this.#run(run, options.transaction));
    this.#queue = result.catch(() => undefined);
    return result;
  }

  async close(): Promise<void> {
    await this.#queue;
    if (this.#open) this.#db.close();
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
    const values = params.map((value) => (typeof value === 'number' && Number.isInteger(value) ? BigInt(value) : value));
    if (prepared.returnsRows) {
      const rows = prepared.statement.all(...values) as Record<string, unknown>[];
      return { rows, affectedRows: rows.length };
    }
    return { rows: [], affectedRows: Number(prepared.statement.run(...values).changes) };
  }
}
