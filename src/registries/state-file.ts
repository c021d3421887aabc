import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * Small JSON state files (the static registry's and the weak-dependency cache's), written so a
 * crash at any point leaves either the old or the new content, never a torn file: the clock
 * check at the next start reads them, and a half-written file would have to be ignored.
 */

/** The parsed file, or undefined when it does not exist. Other read or parse errors throw. */
export async function readStateFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  return JSON.parse(text) as unknown;
}

/** Writes `value` as JSON: to a temporary file, flushed to disk, then renamed over `path`. */
export async function writeStateFile(path: string, value: unknown): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.${crypto.randomUUID()}.tmp`;
  const handle = await open(temporary, 'w');
  try {
    await handle.writeFile(`${JSON.stringify(value)}\n`, 'utf8');
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}
