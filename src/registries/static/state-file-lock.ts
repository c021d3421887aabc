import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import { readStateFile, writeStateFile } from '../state-file.ts';

/** Who holds a state file: written beside the lock, so the next process can name it. */
export interface LockHolder {
  readonly pid: number;
  readonly host: string;
  /** The port the holder serves on; 0 when it serves none or did not know it yet. */
  readonly port: number;
  /** When it took the lock (ISO 8601). */
  readonly since: string;
}

/** SQLITE_BUSY: another connection holds a lock that conflicts. */
const SQLITE_BUSY = 5;

/**
 * An exclusive OS lock on a state file, from {@link StateFileLock.take} until {@link release},
 * or until the process ends however it ends: the kernel drops it on any exit, SIGKILL and a crash
 * included, so there is never a stale lock to clean up by hand.
 *
 * Node has no flock or fcntl API, and a lock file created with O_EXCL outlives a crash (a stale
 * one must then be judged by a pid, which means nothing across containers sharing a volume).
 * node:sqlite, built in, takes POSIX fcntl locks on its database files: a SQLite database held
 * with `PRAGMA locking_mode = EXCLUSIVE` keeps the exclusive lock of its first write for the life
 * of the connection. `<state file>.lock` is such a database, written once when taken. SQLite also
 * tracks the locks of its connections within one process (plain POSIX locks cannot tell them
 * apart), so two registries in one process exclude each other as two processes do.
 *
 * Two cautions come with POSIX locks: they hold between processes of one kernel (containers on
 * one host sharing a volume included) but not reliably over network file systems; and closing any
 * descriptor of the lock file in the holding process drops the lock, so nothing but SQLite ever
 * opens it (the holder is described in a separate file, `<state file>.holder`).
 */
export class StateFileLock {
  readonly #db: DatabaseSync;
  #released = false;

  private constructor(db: DatabaseSync) {
    this.#db = db;
  }

  /**
   * Takes the lock of `stateFile` and records `holder` beside it; or, when another connection
   * holds it, returns who that is (undefined when its holder file is missing or unreadable).
   * Other failures (the directory cannot be written) throw.
   */
  static async take(stateFile: string, holder: Omit<LockHolder, 'since'>): Promise<StateFileLock | { heldBy: LockHolder | undefined }> {
    await mkdir(dirname(stateFile), { recursive: true });
    // Loaded on first use: importing the registries loads no SQLite (Node 22 calls it experimental).
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(`${stateFile}.lock`);
    try {
      db.exec('PRAGMA locking_mode = EXCLUSIVE');
      db.exec('BEGIN EXCLUSIVE');
      db.exec('CREATE TABLE IF NOT EXISTS holder (id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, host TEXT NOT NULL, port INTEGER NOT NULL)');
      db.prepare('INSERT OR REPLACE INTO holder (id, pid, host, port) VALUES (1, ?, ?, ?)').run(holder.pid, holder.host, holder.port);
      db.exec('COMMIT');
    } catch (error) {
      db.close();
      if ((error as { errcode?: unknown }).errcode !== SQLITE_BUSY) throw error;
      return { heldBy: await readHolder(stateFile) };
    }
    const lock = new StateFileLock(db);
    try {
      await writeStateFile(`${stateFile}.holder`, { ...holder, since: new Date().toISOString() } satisfies LockHolder);
    } catch (error) {
      lock.release();
      throw error;
    }
    return lock;
  }

  /** This process's description of itself, for {@link take}. */
  static self(port: number): Omit<LockHolder, 'since'> {
    return { pid: process.pid, host: hostname(), port };
  }

  /** False once released: the state file may then be another process's. */
  get held(): boolean {
    return !this.#released;
  }

  /** Lets the next process take the state file. Idempotent. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#db.close();
  }
}

async function readHolder(stateFile: string): Promise<LockHolder | undefined> {
  try {
    const holder = (await readStateFile(`${stateFile}.holder`)) as Partial<LockHolder> | undefined;
    return typeof holder?.pid === 'number' ? (holder as LockHolder) : undefined;
  } catch {
    return undefined;
  }
}
