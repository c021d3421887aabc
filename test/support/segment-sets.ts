// The real databases sets of segment databases are tested on: two PostgreSQL databases (the test
// database and the server's `postgres` database, or IDMINT_TEST_POSTGRES_URL_2), MariaDB and Redis.
// Each test works on a table (or key prefix) of its own and drops it in every database afterwards.
import { setTableName } from '../../src/stores/sql/sql-segment-store.ts';
import {
  SEGMENT_BACKENDS,
  deleteRedisPrefix,
  setRecordedHistory,
  withPort,
} from './segment-backends.ts';
import { SERVICES, hostPort } from './services.ts';
import { TcpProxy } from './tcp-proxy.ts';

/** `url` naming another database on the same server. */
function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** The databases a set may be made of, by name. */
export const SET_URLS = {
  postgresA: SERVICES.postgres.url,
  postgresB:
    process.env['IDMINT_TEST_POSTGRES_URL_2'] ?? withDatabase(SERVICES.postgres.url, 'postgres'),
  mariadb: SERVICES.mysql.url,
  redis: SERVICES.redis.url,
} as const;

export type SetDatabaseName = keyof typeof SET_URLS;

/** Runs raw SQL on a PostgreSQL or MariaDB URL, outside any store (for checks and DDL). */
export function rawSql(url: string, statement: string): Promise<Record<string, unknown>[]> {
  const backend = url.startsWith('postgres') ? SEGMENT_BACKENDS.postgres : SEGMENT_BACKENDS.mariadb;
  return (backend.sql as NonNullable<typeof backend.sql>)(url, statement);
}

/**
 * Drops `table` and the set's own records table (or deletes the Redis prefix) in every database of
 * `urls`.
 */
export async function dropSet(urls: readonly string[], table: string): Promise<void> {
  for (const url of urls) {
    if (url.startsWith('redis')) {
      await deleteRedisPrefix(url, table);
    } else {
      await rawSql(url, `DROP TABLE IF EXISTS ${table}`);
      await rawSql(url, `DROP TABLE IF EXISTS ${setTableName(table)}`);
      // its row of idmint_history
      await setRecordedHistory(url, table, undefined).catch(() => undefined);
    }
  }
}

/** A TcpProxy in front of each URL's server, and the URLs through them. */
export async function proxied(
  urls: readonly string[],
): Promise<{ readonly proxies: TcpProxy[]; readonly urls: string[]; close(): Promise<void> }> {
  const proxies: TcpProxy[] = [];
  for (const url of urls) proxies.push(await TcpProxy.start(hostPort(url)));
  return {
    proxies,
    urls: urls.map((url, index) => withPort(url, (proxies[index] as TcpProxy).port)),
    close: async () => {
      for (const proxy of proxies) await proxy.close();
    },
  };
}
