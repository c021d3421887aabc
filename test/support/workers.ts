import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqlWorkerRegistry } from '../../src/registries/sql/sql-worker-registry.ts';
import { SqliteDriver } from '../../src/sql/sqlite-driver.ts';

/** A temporary directory removed by `dispose()`. */
export async function tempDir(prefix: string): Promise<{ path: string; dispose(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `idmint-${prefix}-`));
  return { path, dispose: () => rm(path, { recursive: true, force: true }) };
}

/** A SQLite worker registry on `file`: the real adapter on an embedded database. */
export async function sqliteRegistry(
  file: string,
  options: { ttlMs?: number; name?: string } = {},
): Promise<SqlWorkerRegistry> {
  return new SqlWorkerRegistry({
    client: await SqliteDriver.open(file, { timeoutMs: 5000 }),
    ownsClient: true,
    ...options,
  });
}

/** Resolves once `condition()` holds, polling; rejects after `timeoutMs` naming `what`. */
export async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
