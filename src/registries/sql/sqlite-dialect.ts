import { questionMarks, type SqlClient, type SqlDialect, type SqlRow, type SqlValue } from './sql-dialect.ts';

export const sqliteDialect: SqlDialect = {
  backend: 'sqlite',
  // 'now' is fixed for the duration of one statement, so every use in it agrees.
  nowMs: "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
  placeholders: questionMarks,
  insertIfAbsent(table, columns, values) {
    return `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${values.join(', ')}) ON CONFLICT DO NOTHING`;
  },
};

/** The part of a `node:sqlite` DatabaseSync the registry uses. */
export interface SqliteDatabaseLike {
  prepare(sql: string): {
    all(...params: SqlValue[]): unknown[];
    run(...params: SqlValue[]): { changes: number | bigint };
  };
  exec(sql: string): void;
  close(): void;
}

/** Adapts a `node:sqlite` database to {@link SqlClient}. Statements run synchronously. */
export function sqliteClient(db: SqliteDatabaseLike): SqlClient {
  return {
    async select(sql, params) {
      return db.prepare(sql).all(...params) as SqlRow[];
    },
    async execute(sql, params) {
      return Number(db.prepare(sql).run(...params).changes);
    },
    async close() {
      db.close();
    },
  };
}

/**
 * Opens the SQLite file at `path`. Several processes may share it: WAL lets readers run beside
 * the writer, and the busy timeout makes a writer wait for the lock instead of failing.
 */
export async function openSqlite(path: string, timeoutMs: number): Promise<SqlClient> {
  const { DatabaseSync } = await import('node:sqlite');
  const db = new DatabaseSync(path, { timeout: timeoutMs });
  db.exec('PRAGMA journal_mode = WAL');
  return sqliteClient(db);
}
