import { questionMarks, type SqlClient, type SqlDialect, type SqlRow } from './sql-dialect.ts';

export const mysqlDialect: SqlDialect = {
  backend: 'mysql',
  // NOW(3) is converted from the session time zone, which the client sets to UTC (below), so the
  // repeated hour of a daylight-saving change cannot make the clock jump back.
  nowMs: 'CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)',
  placeholders: questionMarks,
  insertIfAbsent(table, columns, values) {
    return `INSERT IGNORE INTO ${table} (${columns.join(', ')}) VALUES (${values.join(', ')})`;
  },
};

/** A connection taken from a `mysql2/promise` Pool. */
export interface MysqlConnectionLike {
  query(options: { sql: string; values: unknown[]; timeout?: number }): Promise<[unknown, unknown]>;
  release(): void;
  destroy(): void;
}

/** The part of a `mysql2/promise` Pool the registry uses. */
export interface MysqlPoolLike {
  getConnection(): Promise<MysqlConnectionLike>;
  end(): Promise<void>;
}

/**
 * Adapts a `mysql2/promise` Pool to {@link SqlClient}. The pool must be created with the
 * `FOUND_ROWS` flag: without it MySQL counts only rows whose values changed, and a renewal that
 * writes the same values would look like a lost lease.
 */
export function mysqlClient(pool: MysqlPoolLike, timeoutMs?: number): SqlClient {
  const run = async (sql: string, params: readonly unknown[]): Promise<unknown> => {
    const connection = await pool.getConnection();
    try {
      const [result] = await connection.query({ sql, values: [...params], timeout: timeoutMs });
      connection.release();
      return result;
    } catch (error) {
      // After a timeout the connection is out of step with the server (a reply may still come,
      // and pool.end() would wait for it forever): never hand it out again.
      connection.destroy();
      throw error;
    }
  };
  return {
    select: async (sql, params) => (await run(sql, params)) as SqlRow[],
    execute: async (sql, params) => ((await run(sql, params)) as { affectedRows?: number }).affectedRows ?? 0,
    close: () => pool.end(),
  };
}

/** Opens a `mysql2` pool for `url` (MySQL or MariaDB), loading the driver only now. */
export async function openMysql(url: string, timeoutMs: number): Promise<SqlClient> {
  const mysql = await import('mysql2/promise');
  const pool = mysql.createPool({ uri: url, connectionLimit: 2, connectTimeout: timeoutMs, flags: ['FOUND_ROWS'], timezone: 'Z' });
  pool.pool.on('connection', (connection) => {
    connection.query("SET time_zone = '+00:00'");
  });
  return mysqlClient(pool, timeoutMs);
}
