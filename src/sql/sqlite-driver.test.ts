import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { openSqliteDatabase, type SqliteDatabaseLike } from './sqlite-driver.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-sqlite-open-'));
after(() => rmSync(root, { recursive: true, force: true }));

/**
 * A database whose switch to WAL is refused `refusals` times with SQLite's own message, as when two
 * processes switch one new file at once and SQLite breaks the deadlock by refusing one of them
 * without waiting (its busy timeout is not called then, so only a retry helps).
 */
function refusingWal(refusals: number): {
  Database: new (path: string) => SqliteDatabaseLike;
  statements: string[];
} {
  const statements: string[] = [];
  let left = refusals;
  class Database {
    constructor(_path: string) {}
    exec(sql: string): void {
      statements.push(sql);
      if (sql === 'PRAGMA journal_mode = WAL' && left-- > 0) throw new Error('database is locked');
    }
    prepare(): never {
      throw new Error('not used');
    }
    close(): void {}
  }
  return { Database: Database as unknown as new (path: string) => SqliteDatabaseLike, statements };
}

describe('openSqliteDatabase', () => {
  it('retries the switch to WAL that SQLite refused ("database is locked")', () => {
    const { Database, statements } = refusingWal(3);
    openSqliteDatabase(Database, join(root, 'a', 'idmint.db'), 2000);
    assert.deepEqual(statements, [
      'PRAGMA busy_timeout = 2000',
      ...Array<string>(4).fill('PRAGMA journal_mode = WAL'),
    ]);
  });

  it("gives up once the timeout has passed, with SQLite's error", () => {
    const { Database } = refusingWal(Number.POSITIVE_INFINITY);
    const started = Date.now();
    assert.throws(
      () => openSqliteDatabase(Database, join(root, 'b', 'idmint.db'), 50),
      /database is locked/,
    );
    assert.ok(Date.now() - started >= 50);
  });

  it('does not retry another error', () => {
    let calls = 0;
    class Broken {
      constructor(_path: string) {}
      exec(sql: string): void {
        if (sql.startsWith('PRAGMA journal_mode')) {
          calls++;
          throw new Error('disk I/O error');
        }
      }
    }
    assert.throws(
      () =>
        openSqliteDatabase(
          Broken as unknown as new (
            path: string,
          ) => SqliteDatabaseLike,
          join(root, 'c', 'idmint.db'),
          2000,
        ),
      /disk I\/O error/,
    );
    assert.equal(calls, 1);
  });
});
