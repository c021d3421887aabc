import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, it } from 'node:test';
import { runIdmint } from './support/cli.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { SERVICES, describeWithServices, uniqueName } from './support/services.ts';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-db-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function sqliteTables(file: string): string[] {
  const db = new DatabaseSync(file);
  try {
    return (db.prepare("select name from sqlite_master where type = 'table' order by name").all() as { name: string }[]).map((row) => row.name);
  } finally {
    db.close();
  }
}

describe('idmint db init', () => {
  it('creates ./data/idmint.db and its leaf_alloc table by default, and is idempotent', async (t) => {
    const dir = tempDir(t);
    for (let run = 0; run < 2; run++) {
      const { code, stdout, stderr } = await runIdmint(['db', 'init'], { cwd: dir });
      assert.equal(code, 0, stderr);
      assert.equal(stdout, 'table leaf_alloc is ready in sqlite:./data/idmint.db\n');
    }
    assert.deepEqual(sqliteTables(join(dir, 'data', 'idmint.db')), ['leaf_alloc']);
  });

  it('takes --store and --table, and creates nothing but the table', async (t) => {
    const file = join(tempDir(t), 'ids.db');
    const { code, stdout } = await runIdmint(['db', 'init', '--store', `sqlite:${file}`, '--table', 'my_ids']);
    assert.equal(code, 0);
    assert.match(stdout, /^table my_ids is ready in sqlite:/);
    assert.deepEqual(sqliteTables(file), ['my_ids']);
  });

  it('answers --help', async () => {
    for (const args of [['db', '--help'], ['db', 'init', '--help'], ['db', '-h']]) {
      const { code, stdout } = await runIdmint(args);
      assert.equal(code, 0, args.join(' '));
      assert.match(stdout, /^Usage: idmint db init \[--store URL\]/);
      assert.match(stdout, /postgres:\/\/user:password@host:5432\/database/);
      assert.match(stdout, /mariadb:\/\/.*\n.*rediss:\/\//);
    }
    assert.match((await runIdmint(['--help'])).stdout, /\n {2}db {6}create the segment table/);
  });

  const failures: [string[], number, RegExp][] = [
    [['db'], 2, /^idmint db: missing argument <subcommand>\n$/],
    [['db', 'drop'], 2, /^idmint db: unknown db subcommand "drop"; the only one is: init\n$/],
    [['db', 'init', '--store', 'mongodb://u:pw@h/x'], 2, /^idmint db: --store "mongodb:\/\/u:\*\*\*@h\/x": not a segment store URL; accepted forms: sqlite:/],
    [['db', 'init', '--store', 'sqlite::memory:', '--table', 'no way'], 2, /table must be an identifier/],
    [['db', 'init', '--timeout', '0'], 2, /--timeout must be an integer from 1 to 600000, got "0"/],
    [['db', 'init', '--store', 'postgres://nobody@127.0.0.1:1/x', '--timeout', '2000'], 1, /^idmint db: segment store \(--store\): postgres store: init failed: connect ECONNREFUSED 127\.0\.0\.1:1\n$/],
  ];
  for (const [args, exit, message] of failures) {
    it(`exits ${exit} with one line for: idmint ${args.join(' ')}`, async () => {
      const { code, stdout, stderr } = await runIdmint(args);
      assert.equal(code, exit);
      assert.equal(stdout, '');
      assert.match(stderr, message);
      assert.equal(stderr.trimEnd().split('\n').length, 1, `more than one line: ${stderr}`);
    });
  }
});

await describeWithServices('idmint db init on database servers', ['postgres', 'mysql', 'redis'], () => {
  for (const [backend, url] of [
    [SEGMENT_BACKENDS.postgres, SERVICES.postgres.url],
    [SEGMENT_BACKENDS.mariadb, SERVICES.mysql.url],
  ] as const) {
    it(`creates the table on ${backend.name}, idempotently`, async (t) => {
      const table = uniqueName('cli_alloc');
      t.after(() => backend.sql?.(url, `DROP TABLE IF EXISTS ${table}`));
      for (let run = 0; run < 2; run++) {
        const { code, stdout, stderr } = await runIdmint(['db', 'init', '--store', url, '--table', table]);
        assert.equal(code, 0, stderr);
        assert.match(stdout, new RegExp(`^table ${table} is ready in `));
      }
      const rows = (await backend.sql?.(url, `select count(*) as n from ${table}`)) ?? [];
      assert.equal(Number(rows[0]?.['n']), 0, 'the table exists and holds no rows');
    });
  }

  it('has nothing to create on Redis', async () => {
    const { code, stdout } = await runIdmint(['db', 'init', '--store', SERVICES.redis.url]);
    assert.equal(code, 0);
    assert.match(stdout, /^redis keeps tags as hashes: no table to create/);
  });
});
