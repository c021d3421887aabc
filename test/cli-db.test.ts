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
    return (
      db.prepare("select name from sqlite_master where type = 'table' order by name").all() as {
        name: string;
      }[]
    ).map((row) => row.name);
  } finally {
    db.close();
  }
}

describe('idmint db init', () => {
  it('creates ./data/idmint.db, its tables, records the history, idempotently', async (t) => {
    const dir = tempDir(t);
    for (let run = 0; run < 2; run++) {
      const { code, stdout, stderr } = await runIdmint(['db', 'init'], { cwd: dir });
      assert.equal(code, 0, stderr);
      assert.equal(
        stdout,
        'table leaf_alloc is ready in sqlite:./data/idmint.db\n' +
          'history: sqlite (recorded; no fence so far)\n',
      );
    }
    assert.deepEqual(sqliteTables(join(dir, 'data', 'idmint.db')), [
      'idmint_history',
      'idmint_issuer',
      'leaf_alloc',
    ]);
  });

  it("takes --store and --table, creating only the table and idmint's own", async (t) => {
    const file = join(tempDir(t), 'ids.db');
    const { code, stdout } = await runIdmint([
      'db',
      'init',
      '--store',
      `sqlite:${file}`,
      '--table',
      'my_ids',
    ]);
    assert.equal(code, 0);
    assert.match(stdout, /^table my_ids is ready in sqlite:/);
    assert.deepEqual(sqliteTables(file), ['idmint_history', 'idmint_issuer', 'my_ids']);
  });

  it('fences a Leaf table it has no record of once, and says so', async (t) => {
    const file = join(tempDir(t), 'leaf.db');
    const db = new DatabaseSync(file);
    const columns =
      'biz_tag varchar(128) primary key, max_id bigint not null default 1, step int not null';
    db.exec(
      `create table leaf_alloc (${columns}, description varchar(256), update_time timestamp)`,
    );
    db.exec("insert into leaf_alloc (biz_tag, max_id, step) values ('a', 100, 10), ('b', 200, 20)");
    db.close();
    const env = {
      IDMINT_SEGMENT_STORE: `sqlite:${file}`,
      IDMINT_SEGMENT_FENCE_RANGES: '2',
      IDMINT_SEGMENT_MAX_STEP: '50',
    };
    const first = await runIdmint(['db', 'init'], { env });
    assert.equal(first.code, 0, first.stderr);
    assert.match(
      first.stdout,
      new RegExp(
        '\\ntable leaf_alloc: no history was recorded: 2 tags fenced by 2 ranges of ' +
          "max\\(50, the tag's step\\)\\n$",
      ),
    );
    const again = await runIdmint(['db', 'init'], { env });
    assert.doesNotMatch(again.stdout, /fenced/);
    const rows = new DatabaseSync(file);
    const maxIds = rows.prepare('select biz_tag, max_id from leaf_alloc order by biz_tag').all();
    assert.deepEqual(
      maxIds.map((row) => [row['biz_tag'], Number(row['max_id'])]),
      [
        ['a', 200],
        ['b', 300],
      ],
    );
    rows.close();
  });

  it('db history shows history and fences; db fence raises; --if-fences once', async (t) => {
    const dir = tempDir(t);
    const env = { IDMINT_SEGMENT_MAX_STEP: '100' };
    const idmint = async (...args: string[]) => {
      const run = await runIdmint(args, { cwd: dir, env });
      assert.equal(run.code, 0, `${args.join(' ')}: ${run.stderr}`);
      return run.stdout;
    };
    await idmint('db', 'init');
    await idmint('tags', 'create', 'orders', '--step', '10');
    await idmint('tags', 'create', 'users', '--step', '300');
    assert.equal(
      await idmint('db', 'history'),
      // Recorded empty by init: nothing was fenced (docs/segments.md, Failover and restore).
      'table leaf_alloc: history sqlite (recorded, no fence so far)\n',
    );
    const everyTag =
      "table leaf_alloc: 2 tags raised by 2 ranges of max(100, the tag's step); fence 1, " +
      'history sqlite\n';
    assert.equal(await idmint('db', 'fence', '--ranges', '2'), everyTag);
    const once = ['db', 'fence', '--margin', '1000', '--tag', 'orders', '--if-fences', '1'];
    assert.equal(
      await idmint(...once),
      'table leaf_alloc: 1 tag raised by 1000 IDs; fence 2, history sqlite\n',
    );
    const notAgain =
      'table leaf_alloc: not fenced: it has had 2 fences, not 1 (--if-fences); nothing changed\n';
    assert.equal(await idmint(...once), notAgain);
    const listed = (await idmint('tags', 'list', '--json')).trimEnd().split('\n');
    const tags = listed.map((line) => JSON.parse(line) as { tag: string; maxId: string });
    const expected = [
      ['orders', String(1 + 200 + 1000)],
      ['users', String(1 + 600)],
    ];
    assert.deepEqual(
      tags.map((tag) => [tag.tag, tag.maxId]),
      expected,
    );
    assert.equal(
      await idmint('db', 'history'),
      'table leaf_alloc: history sqlite (recorded, 2 fences so far)\n',
    );
  });

  it('db fence with a set fences every database, each on its own record', async (t) => {
    const dir = tempDir(t);
    const stores = `sqlite:${join(dir, 'a.db')},sqlite:${join(dir, 'b.db')}`;
    for (const args of [
      ['db', 'init'],
      ['tags', 'create', 'orders', '--step', '10'],
    ]) {
      const run = await runIdmint([...args, '--stores', stores], { cwd: dir });
      assert.equal(run.code, 0, run.stderr);
    }
    const fenced = await runIdmint(['db', 'fence', '--margin', '100', '--stores', stores], {
      cwd: dir,
    });
    assert.equal(fenced.code, 0, fenced.stderr);
    const raised = (db: string) =>
      `table leaf_alloc in sqlite:.*${db}\\.db: 1 tag raised by 100 IDs; fence 1, history ` +
      `sqlite\\n`;
    assert.match(fenced.stdout, new RegExp(`^${raised('a')}${raised('b')}$`));
    const history = await runIdmint(['db', 'history', '--stores', stores], { cwd: dir });
    const recorded = (db: string) => `${db}\\.db: history sqlite \\(recorded, 1 fence so far\\)\\n`;
    assert.match(history.stdout, new RegExp(`${recorded('a')}.*${recorded('b')}$`));
  });

  it('answers --help', async () => {
    for (const args of [
      ['db', '--help'],
      ['db', 'init', '--help'],
      ['db', '-h'],
    ]) {
      const { code, stdout } = await runIdmint(args);
      assert.equal(code, 0, args.join(' '));
      assert.match(
        stdout,
        /^Usage: idmint db init \[--store URL \| --stores URL,\.\.\. \[--replace INDEX\]\]/,
      );
      assert.match(
        stdout,
        /\n {7}idmint db history .*\n {7}idmint db fence \[--margin IDS \| --ranges N\]/,
      );
      assert.match(stdout, /postgres:\/\/user:password@host:5432\/database/);
      assert.match(stdout, /mariadb:\/\/.*\n.*rediss:\/\//);
    }
    assert.match((await runIdmint(['--help'])).stdout, /\n {2}db {6}create the segment table/);
  });

  const failures: [string[], number, RegExp][] = [
    [['db'], 2, /^idmint db: missing argument <subcommand>\n$/],
    [
      ['db', 'drop'],
      2,
      new RegExp(
        '^idmint db: unknown db subcommand "drop"; the subcommands are: init, history, fence, ' +
          'import\\n$',
      ),
    ],
    [['db', 'init', '--margin', '5'], 2, /^idmint db: --margin belongs to "idmint db fence"\n$/],
    [['db', 'fence', '--replace', '1'], 2, /^idmint db: --replace belongs to "idmint db init"\n$/],
    [
      ['db', 'fence', '--margin', '5', '--ranges', '2'],
      2,
      /^idmint db: --margin and --ranges both size the fence/,
    ],
    [
      ['db', 'fence', '--margin', '0'],
      2,
      /^idmint db: --margin must be an integer from 1 to 9223372036854775807, got/,
    ],
    [
      ['db', 'fence', '--ranges', '0'],
      2,
      /^idmint db: --ranges must be an integer from 1 to 1000000, got "0"\n$/,
    ],
    [
      ['db', 'fence', '--store', 'sqlite::memory:', '--tag', 'nope'],
      1,
      /^idmint db: tag "nope" does not exist\n$/,
    ],
    [
      ['db', 'init', '--store', 'mongodb://u:pw@h/x'],
      2,
      new RegExp(
        '^idmint db: --store "mongodb://u:\\*\\*\\*@h/x": not a segment store URL; accepted ' +
          'forms: sqlite:',
      ),
    ],
    [
      ['db', 'init', '--store', 'sqlite::memory:', '--table', 'no way'],
      2,
      /table must be an identifier/,
    ],
    [['db', 'init', '--timeout', '0'], 2, /--timeout must be an integer from 1 to 600000, got "0"/],
    [
      ['db', 'init', '--store', 'postgres://nobody@127.0.0.1:1/x', '--timeout', '2000'],
      1,
      // The backend, its address and the cause as the system gave it (docs/errors.md).
      /^idmint db: segment store \(--store\): postgres at 127\.0\.0\.1:1: connection refused\n$/,
    ],
    [
      ['db', 'import', '--from-tinyid', 'mysql://root@127.0.0.1:1/tinyid', '--dry-run'],
      1,
      /^idmint db: --from-tinyid "mysql:\/\/root@127\.0\.0\.1:1\/tinyid": connection refused\n$/,
    ],
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

await describeWithServices(
  'idmint db init on database servers',
  ['postgres', 'mysql', 'redis'],
  () => {
    for (const [backend, url] of [
      [SEGMENT_BACKENDS.postgres, SERVICES.postgres.url],
      [SEGMENT_BACKENDS.mariadb, SERVICES.mysql.url],
    ] as const) {
      it(`creates the table on ${backend.name}, idempotently`, async (t) => {
        const table = uniqueName('cli_alloc');
        t.after(() => backend.sql?.(url, `DROP TABLE IF EXISTS ${table}`));
        for (let run = 0; run < 2; run++) {
          const { code, stdout, stderr } = await runIdmint([
            'db',
            'init',
            '--store',
            url,
            '--table',
            table,
          ]);
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
  },
);
