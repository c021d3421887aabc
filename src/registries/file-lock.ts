import { chmodSync, mkdirSync, utimesSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, resolve, sep } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { readStateFile, writeStateFile } from './state-file.ts';

/** Who holds a lock: written beside it, so the next process can name it. */
export interface LockHolder {
  readonly pid: number;
  readonly host: string;
  /** The port the holder serves on; 0 when it serves none or did not know it yet. */
  readonly port: number;
  /** What the holder uses the lock for, for the refusal (its state file, its cache file). */
  readonly uses?: string;
  /** When it took the lock (ISO 8601). */
  readonly since: string;
}

/** SQLITE_BUSY: another connection holds a lock that conflicts. */
const SQLITE_BUSY = 5;

/** Options for {@link FileLock.take}. */
export interface FileLockOptions {
  /**
   * A directory shared by every user of the host (the host-wide worker-ID locks): the directories
   * it creates get mode 1777, as /tmp has, so another user's process can take its own locks there
   * (and is refused, never let through, on a lock file another user created).
   */
  readonly shared?: boolean;
}

/**
 * An exclusive OS lock on a file that stands for a worker ID (a static state file, the host-wide
 * lock of a static worker ID, a worker cache file), from {@link FileLock.take} until
 * {@link release}, or until the process ends however it ends: the kernel drops it on any exit,
 * SIGKILL and a crash included, so there is never a stale lock to clean up by hand.
 *
 * Node has no flock or fcntl API, and a lock file created with O_EXCL outlives a crash (a stale
 * one must then be judged by a pid, which means nothing across containers sharing a volume).
 * node:sqlite, built in, takes POSIX fcntl locks on its database files: a SQLite database held
 * with `PRAGMA locking_mode = EXCLUSIVE` keeps the exclusive lock of its first write for the life
 * of the connection. `<path>.lock` is such a database, written once when taken. SQLite also
 * tracks the locks of its connections within one process (plain POSIX locks cannot tell them
 * apart), so two holders in one process exclude each other as two processes do.
 *
 * Two cautions come with POSIX locks: they hold between processes of one kernel (containers on
 * one host sharing a volume included) but not reliably over network file systems; and closing any
 * descriptor of the lock file in the holding process drops the lock, so nothing but SQLite ever
 * opens it (the holder is described in a separate file, `<path>.holder`).
 */
export class FileLock {
  /** The lock database, `<path>.lock`. */
  readonly file: string;
  readonly #db: DatabaseSync;
  #released = false;

  private constructor(file: string, db: DatabaseSync) {
    this.file = file;
    this.#db = db;
  }

  /**
   * Takes the lock of `path` (the database `<path>.lock`) and records `holder` in `<path>.holder`;
   * or, when another connection holds it, returns who that is (undefined when its holder file is
   * missing or unreadable). Other failures (the directory cannot be written) throw.
   */
  static async take(
    path: string,
    holder: Omit<LockHolder, 'since'>,
    options: FileLockOptions = {},
  ): Promise<FileLock | { heldBy: LockHolder | undefined }> {
    makeDirectory(dirname(path), options.shared === true);
    // Loaded on first use: importing the registries loads no SQLite (Node 22 calls it
    // experimental).
    const { DatabaseSync } = await import('node:sqlite');
    const file = `${path}.lock`;
    const db = new DatabaseSync(file);
    try {
      db.exec('PRAGMA locking_mode = EXCLUSIVE');
      db.exec('BEGIN EXCLUSIVE');
      db.exec(
        'CREATE TABLE IF NOT EXISTS holder ' +
          '(id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, host TEXT NOT ' +
          'NULL, port INTEGER NOT NULL)',
      );
      const insert = db.prepare(
        'INSERT OR REPLACE INTO holder (id, pid, host, port) VALUES (1, ?, ?, ?)',
      );
      insert.run(holder.pid, holder.host, holder.port);
      db.exec('COMMIT');
    } catch (error) {
      db.close();
      if ((error as { errcode?: unknown }).errcode !== SQLITE_BUSY) throw error;
      return { heldBy: await currentHolder(path) };
    }
    const lock = new FileLock(file, db);
    try {
      await writeStateFile(`${path}.holder`, {
        ...holder,
        since: new Date().toISOString(),
      } satisfies LockHolder);
    } catch (error) {
      lock.release();
      throw error;
    }
    return lock;
  }

  /**
   * This process's description of itself, for {@link take}: `uses` names what it holds the lock
   * for.
   */
  static self(port: number, uses?: string): Omit<LockHolder, 'since'> {
    return {
      pid: process.pid,
      host: hostname(),
      port,
      ...(uses === undefined ? {} : { uses: resolve(uses) }),
    };
  }

  /** False once released: the file may then be another process's. */
  get held(): boolean {
    return !this.#released;
  }

  /**
   * Marks the lock file as in use (its times set to now), so a cleaner of old files in a
   * temporary directory (systemd-tmpfiles ages /tmp by 10 days on many systems) never removes it
   * while it is held: a process that then made a new file of that name would hold a lock of its
   * own beside this one. Sets times by path, opening no descriptor (closing one would drop the
   * lock). Best effort: a failure changes nothing the lock guarantees now.
   */
  touch(): void {
    if (this.#released) return;
    try {
      const now = new Date();
      utimesSync(this.file, now, now);
    } catch {
      // The next touch tries again; the lock itself is unaffected.
    }
  }

  /** Lets the next process take the file. Idempotent. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#db.close();
  }
}

/**
 * Creates `dir` and its missing parents. A shared directory (`<lockDir>/<cluster>`) and its parent
 * (`lockDir`), where this call created them, get mode 1777 (world-writable and sticky: no user can
 * remove or replace another's files), whatever the umask, as the first user of the host to need
 * them would make them. Directories above are created as usual.
 */
function makeDirectory(dir: string, shared: boolean): void {
  const target = resolve(dir);
  const created = mkdirSync(target, { recursive: true });
  if (!shared || created === undefined) return;
  const first = resolve(created);
  for (const at of [target, dirname(target)]) {
    // Only what this call created: the first directory made and those below it.
    if (at !== first && !at.startsWith(`${first}${sep}`)) continue;
    try {
      chmodSync(at, 0o1777);
    } catch {
      // Created by another user between our mkdir and chmod: theirs to set.
    }
  }
}

/** "pid 30580 on vm, port 8080, since ...", or "another process" when its holder file is gone. */
export function describeHolder(holder: LockHolder | undefined): string {
  if (holder === undefined) return 'another process';
  const port = holder.port > 0 ? `, port ${holder.port}` : '';
  return `pid ${holder.pid} on ${holder.host}${port}, since ${String(holder.since)}`;
}

/**
 * The holder as its holder file names it. The winner of a race writes that file just after it
 * takes the lock, so a loser can read the previous holder's file in between: a file naming a
 * process gone from this host is waited on (up to 1 s) for the new one, and never named.
 */
async function currentHolder(path: string): Promise<LockHolder | undefined> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const holder = await readHolder(path);
    if (holder === undefined || holder.host !== hostname() || isRunning(holder.pid)) return holder;
    await sleep(50);
  }
  return undefined;
}

/** Whether a process of this pid runs on this host (EPERM: it does, as another user). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readHolder(path: string): Promise<LockHolder | undefined> {
  try {
    const holder = (await readStateFile(`${path}.holder`)) as Partial<LockHolder> | undefined;
    return typeof holder?.pid === 'number' ? (holder as LockHolder) : undefined;
  } catch {
    return undefined;
  }
}
