import { closeSync, fsync, mkdirSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
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

/** fsync, awaited: the one step of a write done off the event loop. */
const flush = promisify(fsync);

/**
 * Writes `value` as JSON: to a temporary file, flushed to disk, then renamed over `path`.
 *
 * Only the flush waits off the event loop; the other steps (mkdir, open, write, close, rename)
 * are synchronous, microseconds each on a local disk. Each awaited step costs a turn of the event
 * loop, and a loop busy with 1,000 connections and other processes on its cores took 200 ms and
 * more a turn: six awaited steps made a static lease renewal take 1.3 to 2.7 s, past its 1 s
 * deadline, and the node answered 503 LEASE_LOST to everything for as long as the load lasted.
 */
export async function writeStateFile(path: string, value: unknown): Promise<void> {
  mkdirSync(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.${crypto.randomUUID()}.tmp`;
  try {
    const fd = openSync(temporary, 'w');
    try {
      writeFileSync(fd, `${JSON.stringify(value)}\n`, 'utf8');
      await flush(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}
