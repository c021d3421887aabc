import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { IdMintError, isIdMintError } from '../core/errors.ts';
import { MAX_SEGMENT_DATABASES } from '../core/segment-limits.ts';
import type { SegmentStore, StoreHistoryEvent } from '../ports/segment-store.ts';
import type { ConnectSegmentStoreOptions } from './sql/sql-segment-store.ts';
import {
  SEGMENT_STORE_URL_FORMS,
  parseConnectionUrl,
  redactUrl,
} from '../shared/connection-url.ts';
import type { MultiSegmentStore, SetMemberStore } from './multi/multi-segment-store.ts';

/** The embedded default: a SQLite file under ./data, created on first use. */
export const DEFAULT_SEGMENT_STORE_URL = 'sqlite:./data/idmint.db';

/** The URL forms {@link openSegmentStore} accepts, for messages and `--help` (owned by shared/connection-url.ts). */
export { SEGMENT_STORE_URL_FORMS };

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
 * deployment never loads pg, mysql2 or ioredis. Throws CONFIG_INVALID for a URL that is not an
 * accepted form (the message names the setting, the value with its password hidden, and the
 * forms), INVALID_ARGUMENT for bad options, and STORE_UNAVAILABLE for a SQLite file that cannot
 * be opened; a server database's connection problems surface later, as STORE_UNAVAILABLE from
 * the first call.
 */
export async function openSegmentStore(
  url: string,
  options: OpenSegmentStoreOptions = {},
): Promise<SegmentStore> {
  const setting = options.source ?? 'segment store URL';
  const parsed = parseConnectionUrl(url, 'segment-store', setting);
  let store: SegmentStore;
  switch (parsed.kind) {
    case 'sqlite': {
      const { SqliteSegmentStore } = await import('./sqlite/sqlite-segment-store.ts');
      try {
        store = new SqliteSegmentStore({ ...options, path: parsed.path });
      } catch (error) {
        if (isIdMintError(error)) throw error;
        throw new IdMintError(
          'STORE_UNAVAILABLE',
          `cannot open SQLite file ${parsed.path} (${setting}): ${whySqliteCannotOpen(parsed.path, error)}`,
          {
            cause: error,
            details: { backend: 'sqlite', setting, path: parsed.path },
          },
        );
      }
      break;
    }
    case 'postgres': {
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
      // parseConnectionUrl admits only the segment store kinds.
      throw new IdMintError('CONFIG_INVALID', `${setting}: not a segment store URL`);
  }
  if (options.init ?? parsed.kind === 'sqlite') {
    try {
      await store.init();
    } catch (error) {
      await store.close().catch(() => undefined);
      throw error;
    }
  }
  return store;
}

/** Options for {@link openSegmentStores}: those of {@link openSegmentStore}, and: */
export interface OpenSegmentStoresOptions extends Omit<OpenSegmentStoreOptions, 'residue'> {
  /**
   * Check every database that answers before returning (MultiSegmentStore.verify): each row must
   * be of its database's class, else CONFIG_INVALID. Default true; `idmint db init`, which forms
   * the set, and `idmint tags list`, which shows it, open without the check.
   */
  readonly verify?: boolean;
  /** After a database fails it is skipped for this long, doubling per failure in a row. Default 1000. */
  readonly backoffMs?: number;
  /** The longest a failing database is skipped. Default 10000. */
  readonly maxBackoffMs?: number;
}

/**
 * Opens a set of segment databases (src/stores/multi/): database r (the URL at index r) issues
 * only IDs ≡ r (mod the number of URLs). Each URL is any form {@link openSegmentStore} accepts
 * (a mix of SQL and Redis is fine), checked and opened the same way; its password never reaches
 * a message. Throws CONFIG_INVALID for an empty or too long list, a URL listed twice, or a set
 * whose rows disagree with the list (see {@link OpenSegmentStoresOptions.verify}).
 */
export async function openSegmentStores(
  urls: readonly string[],
  options: OpenSegmentStoresOptions = {},
): Promise<MultiSegmentStore> {
  const setting = options.source ?? 'segment store URLs';
  if (!Array.isArray(urls) || urls.length < 1 || urls.length > MAX_SEGMENT_DATABASES) {
    throw new IdMintError(
      'CONFIG_INVALID',
      `${setting}: a set of segment databases needs 1 to ${MAX_SEGMENT_DATABASES} URLs, got ${Array.isArray(urls) ? urls.length : String(urls)}`,
      { details: { key: setting } },
    );
  }
  urls.forEach((url, index) => {
    parseConnectionUrl(url, 'segment-store', `${setting}[${index}]`);
    const first = urls.indexOf(url);
    if (first !== index)
      throw new IdMintError(
        'CONFIG_INVALID',
        `${setting}: ${JSON.stringify(redactUrl(url))} is listed twice (at ${first} and ${index}); each database of a set is listed once`,
        { details: { key: setting } },
      );
  });
  const { MultiSegmentStore } = await import('./multi/multi-segment-store.ts');
  const { verify = true, backoffMs, maxBackoffMs, onHistory, ...storeOptions } = options;
  const opened: SegmentStore[] = [];
  try {
    for (const [index, url] of urls.entries()) {
      // Each database has its own history; its events name it (the URL, password hidden).
      const database = redactUrl(url);
      const named =
        onHistory === undefined
          ? {}
          : {
              onHistory: (event: StoreHistoryEvent) => onHistory({ ...event, database }),
            };
      const residue = { offset: index, increment: urls.length };
      const source = `${setting}[${index}]`;
      opened.push(
        await openSegmentStore(url, { ...storeOptions, ...named, init: false, residue, source }),
      );
    }
    const store = new MultiSegmentStore({
      databases: opened.map((member, index) => ({
        store: member as SetMemberStore,
        name: redactUrl(urls[index] as string),
      })),
      ...(backoffMs === undefined ? {} : { backoffMs }),
      ...(maxBackoffMs === undefined ? {} : { maxBackoffMs }),
    });
    if (options.init ?? urls.every((url) => url.startsWith('sqlite:'))) await store.init();
    if (verify) await store.verify();
    return store;
  } catch (error) {
    await Promise.all(opened.map((member) => member.close().catch(() => undefined)));
    throw error;
  }
}

/** Why a SQLite file could not be opened, in words: the file system's reason where there is one. */
function whySqliteCannotOpen(path: string, error: unknown): string {
  const { code, path: where } = error as { code?: unknown; path?: unknown };
  const place = typeof where === 'string' ? where : path;
  switch (code) {
    case 'EACCES':
    case 'EPERM':
      return `permission denied (${place})`;
    case 'EEXIST':
    case 'ENOTDIR':
      return `${place} is not a directory`;
    case 'EROFS':
      return 'read-only file system';
    case 'ENOSPC':
      return 'no space left on device';
  }
  // node:sqlite says only "unable to open database file"; find out why where that is cheap.
  try {
    if (existsSync(path) && statSync(path).isDirectory()) return 'it is a directory';
    accessSync(existsSync(path) ? path : dirname(path), constants.R_OK | constants.W_OK);
  } catch (reason) {
    if ((reason as { code?: unknown }).code === 'EACCES') return `permission denied (${place})`;
  }
  return error instanceof Error ? error.message : String(error);
}
