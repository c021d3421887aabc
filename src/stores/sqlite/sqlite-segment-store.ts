import { DatabaseSync } from 'node:sqlite';
import { SqliteDriver, openSqliteDatabase } from '../../sql/sqlite-driver.ts';
import { SqlSegmentStore } from '../sql/sql-segment-store.ts';
import { resolveStoreOptions, type SegmentStoreOptions } from '../store-support.ts';

/** Options for {@link SqliteSegmentStore}. */
export interface SqliteSegmentStoreOptions extends SegmentStoreOptions {
  /**
   * Database file (its directory is created if missing), or `:memory:` for a private in-memory
   * database.
   */
  readonly path: string;
}

/**
 * The embedded SegmentStore: Leaf's table in a SQLite file through Node's built-in `node:sqlite`,
 * so idmint runs with no database server. Allocation is one `UPDATE ... RETURNING`. Several
 * processes may share the file: SQLite serialises writers, and WAL lets readers run beside them.
 */
export class SqliteSegmentStore extends SqlSegmentStore {
  constructor(options: SqliteSegmentStoreOptions) {
    // Opened here, synchronously: node:sqlite is imported by this module, which only SQLite users
    // load.
    const db = openSqliteDatabase(
      DatabaseSync,
      options.path,
      resolveStoreOptions(options).timeoutMs,
    );
    super(new SqliteDriver(db, { closeDatabase: true }), options);
  }
}
