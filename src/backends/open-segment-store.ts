import { IdMintError } from '../core/errors.ts';
import { MAX_SEGMENT_DATABASES } from '../core/segment-limits.ts';
import type { SegmentStore, StoreHistoryEvent } from '../ports/segment-store.ts';
import { redactUrl } from '../shared/connection-url.ts';
import type { MultiSegmentStore, SetMemberStore } from '../stores/multi/multi-segment-store.ts';
import { type BackendUrl, SEGMENT_STORE_URL_FORMS, parseBackendUrl } from './catalog.ts';
import type { StoreSettings } from './descriptor.ts';

export { DEFAULT_SEGMENT_STORE_URL } from './sqlite/sqlite-backend.ts';

/** The URL forms {@link openSegmentStore} accepts, for messages and `--help` (from the catalog). */
export { SEGMENT_STORE_URL_FORMS };

/**
 * Options for {@link openSegmentStore}: `table`, `timeoutMs`, `poolSize` (PostgreSQL, MySQL), and:
 */
export interface OpenSegmentStoreOptions extends StoreSettings {
  /**
   * Create the table if missing (`init()`) before returning. Default: true for SQLite (the
   * embedded store owns its file), false for server databases, whose schema is created
   * deliberately with `idmint db init`.
   */
  readonly init?: boolean;
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
  return openParsedStore(parseBackendUrl(url, 'segment-store', setting), options);
}

/** Opens the store a URL read once names (see {@link openSegmentStore}). */
export async function openParsedStore(
  url: BackendUrl,
  options: OpenSegmentStoreOptions = {},
): Promise<SegmentStore> {
  const { init, ...settings } = options;
  const store = await url.openStore(settings);
  if (init ?? url.backend.embedded) {
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
  /**
   * After a database fails it is skipped for this long, doubling per failure in a row. Default
   * 1000.
   */
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
      `${setting}: a set of segment databases needs 1 to ${MAX_SEGMENT_DATABASES} URLs, got ` +
        `${Array.isArray(urls) ? urls.length : String(urls)}`,
      { details: { key: setting } },
    );
  }
  // Each URL is read once, here; the stores are opened on what was read.
  const parsed = urls.map((url, index) => {
    const read = parseBackendUrl(url, 'segment-store', `${setting}[${index}]`);
    const first = urls.indexOf(url);
    if (first !== index)
      throw new IdMintError(
        'CONFIG_INVALID',
        `${setting}: ${JSON.stringify(redactUrl(url))} is listed twice (at ${first} and ` +
          `${index}); each database of a set is listed once`,
        { details: { key: setting } },
      );
    return read;
  });
  const { MultiSegmentStore } = await import('../stores/multi/multi-segment-store.ts');
  const { verify = true, backoffMs, maxBackoffMs, onHistory, ...storeOptions } = options;
  const opened: SegmentStore[] = [];
  try {
    for (const [index, url] of parsed.entries()) {
      // Each database has its own history; its events name it (the URL, password hidden).
      const database = url.redacted;
      const named =
        onHistory === undefined
          ? {}
          : {
              onHistory: (event: StoreHistoryEvent) => onHistory({ ...event, database }),
            };
      const residue = { offset: index, increment: urls.length };
      const source = `${setting}[${index}]`;
      opened.push(
        await openParsedStore(url, { ...storeOptions, ...named, init: false, residue, source }),
      );
    }
    const store = new MultiSegmentStore({
      databases: opened.map((member, index) => ({
        store: member as SetMemberStore,
        name: parsed[index]?.redacted ?? '',
      })),
      ...(backoffMs === undefined ? {} : { backoffMs }),
      ...(maxBackoffMs === undefined ? {} : { maxBackoffMs }),
    });
    if (options.init ?? parsed.every((url) => url.backend.embedded)) await store.init();
    if (verify) await store.verify();
    return store;
  } catch (error) {
    await Promise.all(opened.map((member) => member.close().catch(() => undefined)));
    throw error;
  }
}
