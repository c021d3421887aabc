import type { SqlClient, SqlDialect, SqlRow } from './sql-dialect.ts';

export const postgresDialect: SqlDialect = {
  backend: 'postgres',
  // clock_timestamp(), not now(): now() is frozen at the start of the transaction.
  nowMs: '(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint',
  placeholders(sql) {
    let index = 0;
    return sql.replace(/\?/g, () => `$${++index}`);
  },
  insertIfAbsent(table, columns, values) {
    return `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${values.join(', ')}) ON CONFLICT DO NOTHING`;
  },
};

/** The part of a `pg` Pool the registry uses. */
export interface PgPoolLike {
  query(text: string, values?: unknown[]): Promise<{ rows: SqlRow[]; rowCount: number | null }>;
  end(): Promise<void>;
}

/** Adapts a `pg` Pool (or Client) to {@link SqlClient}. */
export function postgresClient(pool: PgPoolLike): SqlClient {
  return {
    async select(sql, params) {
      return (await pool.query(sql, [...params])).rows;
    },
    async execute(sql, params) {
      return (await pool.query(sql, [...params])).rowCount ?? 0;
    },
    close: () => pool.end(),
  };
}

/** Opens a `pg` pool for `url`, loading the driver only now. */
export async function openPostgres(url: string, timeoutMs: number): Promise<SqlClient> {
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  // An idle connection dropped by the server (or a cut network) is reported here; without a
  // listener it would crash the process. The next query opens a fresh connection.
  pool.on('error', () => {});
  return postgresClient(pool);
}
