import { IdMintError } from '../core/errors.ts';

/**
 * Database and coordinator drivers are optional peer dependencies: `npm install idmint` for the
 * snowflake generator or the client pulls none of them. An adapter loads its driver only when its
 * URL is used, through this function, so a missing one is one clear line naming the package to
 * install instead of Node's ERR_MODULE_NOT_FOUND with a stack.
 *
 * `load` must be a literal `import('<pkg>')` so bundlers and type-checkers still see it.
 */
export async function loadDriver<T>(
  pkg: string,
  purpose: string,
  load: () => Promise<T>,
): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if (!isMissing(error, pkg)) throw error;
    throw new IdMintError(
      'DRIVER_MISSING',
      `${purpose} needs the npm package "${pkg}", which is not installed: run npm install ${pkg}`,
      {
        cause: error,
        details: { package: pkg },
      },
    );
  }
}

/** True when `error` says that `pkg` itself (not something it imports) cannot be found. */
function isMissing(error: unknown, pkg: string): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false;
  const name = pkg.split('/')[0] ?? pkg;
  // "Cannot find package 'pg' imported from ..." (ESM) or "Cannot find module 'pg'" (CommonJS).
  return new RegExp(`['"]${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(/[^'"]*)?['"]`).test(
    (error as Error).message,
  );
}
