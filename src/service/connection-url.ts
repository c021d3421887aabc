// Connection URLs as operators write them (IDMINT_SEGMENT_STORE, IDMINT_WORKER_REGISTRY): the
// rules the segment store and the worker registry factories share, so one URL means the same to both.

/** `url` with any password replaced by `***`, for messages and logs. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@/]*@/i, '$1***@');
}

/**
 * The database file a `sqlite:` URL names: `sqlite:./data/idmint.db`, `sqlite:/abs/file.db`,
 * `sqlite::memory:`, and the `sqlite:///abs/file.db` spelling other tools use (the `//` is
 * dropped). Undefined when `url` is not a `sqlite:` URL or names no file.
 */
export function sqlitePathOf(url: string): string | undefined {
  if (!url.startsWith('sqlite:')) return undefined;
  let path = url.slice('sqlite:'.length);
  if (path.startsWith('//')) path = path.slice(2);
  return path === '' ? undefined : path;
}
