// SQLite, embedded through node:sqlite: segment store and worker registry in a file this
// process owns (its directory is created), or in memory.

import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { refuse } from '../../shared/connection-url.ts';
import { sqlBackend } from '../sql-backend.ts';

/** What a `sqlite:` URL names. */
export interface SqliteOptions {
  /** The database file, or `:memory:`. */
  readonly path: string;
}

/** The embedded default: a SQLite file under ./data, created on first use. */
export const DEFAULT_SEGMENT_STORE_URL = 'sqlite:./data/idmint.db';

/**
 * The database file a `sqlite:` URL names: `sqlite:./data/idmint.db`, `sqlite:/abs/file.db`,
 * `sqlite::memory:`, and the `sqlite:///abs/file.db` spelling other tools use (the `//` is
 * dropped). Undefined when `url` is not a `sqlite:` URL or names no file.
 */
export function sqlitePathOf(url: string): string | undefined {
  if (!/^sqlite:/i.test(url)) return undefined;
  let path = url.slice('sqlite:'.length);
  if (path.startsWith('//')) path = path.slice(2);
  return path === '' ? undefined : path;
}

const shared = sqlBackend<SqliteOptions>({
  kind: 'sqlite',
  schemes: ['sqlite'],
  forms: {
    'segment-store': [
      'sqlite:./data/idmint.db (a file; its directory is created)',
      'sqlite::memory:',
    ],
    'worker-registry': ['sqlite:<file>'],
  },
  embedded: true,
  parse(url) {
    const path = sqlitePathOf(url);
    return path === undefined
      ? refuse('sqlite: needs a file, as in sqlite:./data/idmint.db, or :memory:')
      : { path };
  },
  target: (options) => options.path,
  hosts: () => [],
  async openDriver(options, pool) {
    const { SqliteDriver } = await import('../../sql/sqlite-driver.ts');
    try {
      return await SqliteDriver.open(options.path, { timeoutMs: pool.timeoutMs });
    } catch (error) {
      if (isIdMintError(error)) throw error;
      // node:sqlite says only "unable to open database file": the file system's reason instead.
      throw new Error(whySqliteCannotOpen(options.path, error), { cause: error });
    }
  },
});

/** SQLite (`sqlite:`). */
export const sqliteBackend: typeof shared = {
  ...shared,
  async openStore(options, settings) {
    const open = shared.openStore;
    if (open === undefined) throw new TypeError('the SQL backend opens stores');
    try {
      return await open(options, settings);
    } catch (error) {
      if (isIdMintError(error)) throw error;
      const setting = settings.source ?? 'segment store URL';
      const reason = error instanceof Error ? error.message : String(error);
      throw new IdMintError(
        'STORE_UNAVAILABLE',
        `cannot open SQLite file ${options.path} (${setting}): ${reason}`,
        { cause: error, details: { backend: 'sqlite', setting, path: options.path } },
      );
    }
  },
};

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
  // node:sqlite says only "unable to open database file", and creating a directory on a
  // read-only mount says ENOENT: ask the nearest place that exists why, where that is cheap.
  try {
    if (existsSync(path) && statSync(path).isDirectory()) return 'it is a directory';
    let nearest = path;
    while (!existsSync(nearest) && dirname(nearest) !== nearest) nearest = dirname(nearest);
    accessSync(nearest, constants.R_OK | constants.W_OK);
  } catch (reason) {
    const why = (reason as { code?: unknown }).code;
    if (why === 'EACCES') return `permission denied (${place})`;
    // A read-only mount: SQLite itself said only that it could not open the file.
    if (why === 'EROFS') return 'read-only file system';
  }
  return error instanceof Error ? error.message : String(error);
}
