// `idmint tags create --ordering cluster` (issue 24: cluster-ordered tags): stored with the tag,
// shown by `tags list`, and refused with the reason where it cannot keep the order or the table
// cannot hold it (a Leaf table before `idmint db init`).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { runIdmint } from './support/cli.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { SERVICES, describeWithServices, uniqueName } from './support/services.ts';

function clean(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return env;
}

it('creates a cluster-ordered tag, lists it, and refuses what cannot keep the order', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-cli-ordering-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const url = `sqlite:${join(dir, 'ids.db')}`;
  const idmint = (...args: string[]) =>
    runIdmint(['tags', ...args, '--store', url], { env: clean(), cwd: dir });

  const created = await idmint('create', 'invoices', '--step', '10', '--ordering', 'cluster');
  assert.equal(created.code, 0, created.stderr);
  assert.match(
    created.stdout,
    /^TAG\s+MAX_ID\s+STEP\s+OPAQUE\s+ORDERING\s+PERIODIC\s+DESCRIPTION\n/,
  );
  assert.match(created.stdout, /\ninvoices\s+1\s+10\s+no\s+cluster\s+-\n$/);
  assert.equal((await idmint('create', 'plain', '--step', '10')).code, 0);
  const listed = await idmint('list', '--json');
  assert.equal(listed.code, 0, listed.stderr);
  const tags = listed.stdout
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as { tag: string; ordering?: string });
  assert.deepEqual(
    tags.map((tag) => [tag.tag, tag.ordering ?? null]),
    [
      ['invoices', 'cluster'],
      ['plain', null],
    ],
  );

  for (const [args, message] of [
    [['create', 'x', '--step', '3', '--ordering', 'global'], /--ordering must be "cluster"/],
    [
      ['create', 'x', '--step', '3', '--ordering', 'cluster', '--opaque'],
      /cannot be both opaque and cluster-ordered: opaque IDs are encrypted/,
    ],
    [
      [
        'create',
        'x',
        '--step',
        '3',
        '--ordering',
        'cluster',
        '--periodic',
        'day',
        '--template',
        '{yyyyMMdd}{seq:6}',
      ],
      /cannot be both periodic and cluster-ordered/,
    ],
    [['set', 'plain', '--ordering', 'cluster'], /belong to "idmint tags create"/],
  ] as const) {
    const refused = await idmint(...args);
    assert.equal(refused.code, 2, `${args.join(' ')}: ${refused.stderr}`);
    assert.match(refused.stderr, message);
  }
  const after = await idmint('list', '--json');
  assert.equal(after.stdout.trimEnd().split('\n').length, 2, 'a refused create made a tag');
});

// On a server database (SQLite's embedded store runs init itself when opened).
await describeWithServices('idmint tags create --ordering on a Leaf table', ['postgres'], () => {
  it('a Leaf table refuses --ordering cluster until idmint db init', async (t) => {
    const table = uniqueName('leaf_ord');
    const url = SERVICES.postgres.url;
    const sql = (statement: string) => SEGMENT_BACKENDS.postgres.sql?.(url, statement);
    await sql(
      `create table ${table} (biz_tag varchar(128) primary key, max_id bigint not null ` +
        'default 1, step int not null, description varchar(256), update_time timestamp)',
    );
    t.after(async () => {
      await sql(`drop table if exists ${table}`);
      await sql(`delete from idmint_history where segment_table = '${table}'`);
    });
    const run = (...args: string[]) =>
      runIdmint([...args, '--store', url, '--table', table], { env: clean() });
    const create = ['tags', 'create', 'invoices', '--step', '10', '--ordering', 'cluster'];
    const refused = await run(...create);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /tag "invoices" cannot be cluster-ordered: table \w+ has no/);
    assert.match(refused.stderr, /ordering column \(a Leaf table\); run "idmint db init"/);
    const init = await run('db', 'init');
    assert.equal(init.code, 0, init.stderr);
    const created = await run(...create);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /invoices\s+1\s+10\s+no\s+cluster/);
  });
});
