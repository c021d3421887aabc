import { IdMintError } from '../core/errors.ts';
import type { SegmentStore } from '../ports/segment-store.ts';
import type { ConnectSegmentStoreOptions } from './sql/sql-segment-store.ts';
import { redactUrl, sqlitePathOf } from '../service/connection-url.ts';

/** The embedded default: a SQLite file under ./data, created on first use. */
export const DEFAULT_SEGMENT_STORE_URL = 'sqlite:./data/idmint.db';

/** The URL forms {@link openSegmentStore} accepts, for messages and `--help`. */
export const SEGMENT_STORE_URL_FORMS = [
  'sqlite:./data/idmint.db (a file; its directory is created)',
  'sqlite::memory:',
  'postgres://user@host:5432/db (or postgresql://)',
  'mysql://user@host:3306/db (MySQL or MariaDB)',
  'redis://host:6379/0',
] as const;

/** Options for {@link openSegmentStore}: `table`, `timeoutMs`, `poolSize` (PostgreSQL, MySQL), and: */
export interface OpenSegmentStoreOptions extends ConnectSegmentStoreOptions {
  /**
   * Create the table if missing (`init()`) before returning. Default: true for SQLite (the
   * embedded store owns its file), false for server databases, whose schema is created
   * deliberately with `idmint db init`.
   */
  readonly init?: boolean;
  /** Where the URL came from, for error messages: `IDMINT_SEGMENT_STORE`, `--store`. */
  readonly source?: string;
}

/**
 * Opens the SegmentStore a URL names. The driver is loaded only for the scheme used, so a SQLite
 * deployment never loads pg, mysql2 or ioredis. Throws CONFIG_INVALID for an unknown form (the
 * message names the value and the allowed forms) and INVALID_ARGUMENT for bad options;
 * connection problems surface later, as STORE_UNAVAILABLE from the first call.
 */
export async function openSegmentStore(url: string, options: OpenSegmentStoreOptions = {}): Promise<SegmentStore> {
  const scheme = typeof url === 'string' ? /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase() : undefined;
  let store: SegmentStore;
  switch (scheme) {
    case 'sqlite': {
      const path = sqlitePathOf(url);
      if (path === undefined) throw invalidUrl(url, options.source);
      const { SqliteSegmentStore } = await import('./sqlite/sqlite-segment-store.ts');
      store = new SqliteSegmentStore({ ...options, path });
      break;
    }
    case 'postgres':
    case 'postgresql': {
      const { PostgresSegmentStore } = await import('./postgres/postgres-segment-store.ts');
      store = await PostgresSegmentStore.connect(url, options);
      break;
    }
    case 'mysql': {
      const { MysqlSegmentStore } = await import('./mysql/mysql-segment-store.ts');
      store = await MysqlSegmentStore.connect(url, options);
      break;
    }
    case 'redis': {
      const { RedisSegmentStore } = await import('./redis/redis-segment-store.ts');
      store = await RedisSegmentStore.connect(url, options);
      break;
    }
    default:
      throw invalidUrl(url, options.source);
  }
  if (options.init ?? scheme === 'sqlite') {
    try {
      await store.init();
    } catch (error) {
      await store.close().catch(() => undefined);
      throw error;
    }
  }
  return store;
}

function invalidUrl(url: unknown, source: string | undefined): IdMintError {
  const shown = typeof url === 'string' ? JSON.stringify(redactUrl(url)) : String(url);
  return new IdMintError('CONFIG_INVALID', `${source === undefined ? 'segment store URL' : source} ${shown} is not a supported store; use one of: ${SEGMENT_STORE_URL_FORMS.join(', ')}`, {
    details: { key: source ?? 'segmentStore', value: typeof url === 'string' ? redactUrl(url) : String(url) },
  });
}
