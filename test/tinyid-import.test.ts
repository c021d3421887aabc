// `idmint db import --from-tinyid`: TinyId's own schema and sample rows (fixtures/tinyid-db.sql,
// verbatim from tinyid-server/db.sql) in a database of their own on real MariaDB and PostgreSQL,
// imported into an idmint store on the same server. Each tag's next ID is the first of its class
// above every ID TinyId issued; step, delta, remainder and tokens come along; a dry run changes
// nothing; a second run changes nothing; a run after TinyId issued more raises, never lowers.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { firstIdAbove, idmintStep, planTags } from '../src/cli/tinyid-import.ts';
import { runIdmint } from './support/cli.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { startServe } from './support/serve-process.ts';
import { SERVICES, describeWithServices, uniqueName } from './support/services.ts';
import { CachedIdGenerator, HttpSegmentIdService } from './support/tinyid-client.ts';

/** A directory of the test's own, removed after it. */
function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-tinyid-import-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const SAMPLE_TOKEN = '0f673adf80504e2eaa552f5d791b644c';
const SCRIPT = readFileSync(new URL('./fixtures/tinyid-db.sql', import.meta.url), 'utf8');

/** TinyId's MySQL script in PostgreSQL's words (TinyId ships MySQL only). */
function postgresScript(script: string): string {
  return script
    .replace(/^--.*$/gm, '')
    .replaceAll('`', '')
    .replace(/ COMMENT '[^']*'/g, '')
    .replace(/bigint\(20\)/g, 'bigint')
    .replace(/int\(11\)( unsigned)?/g, 'integer')
    .replace(/ AUTO_INCREMENT/g, '')
    .replace(/UNIQUE KEY \w+ \((\w+)\)/g, 'UNIQUE ($1)')
    .replace(/\) ENGINE=[^;]*;/g, ');');
}

function clean(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return env;
}

describe('TinyId import arithmetic', () => {
  it('starts above max_id in the class, and converts the step to a count of IDs', () => {
    assert.equal(firstIdAbove({ maxId: 1n, delta: 1, remainder: 0 }), 2n);
    assert.equal(firstIdAbove({ maxId: 1n, delta: 2, remainder: 1 }), 3n);
    assert.equal(firstIdAbove({ maxId: 100001n, delta: 2, remainder: 1 }), 100003n);
    assert.equal(firstIdAbove({ maxId: 10n, delta: 3, remainder: 2 }), 11n);
    assert.equal(idmintStep({ step: 100000, delta: 2 }), 50000);
    assert.equal(idmintStep({ step: 5, delta: 3 }), 2);
  });

  it('refuses rows idmint cannot serve as TinyId did, with the reason', () => {
    const plans = planTags(
      [
        { bizType: 'a', maxId: 1n, step: 10, delta: 2, remainder: 2 },
        { bizType: 'b', maxId: 1n, step: 0, delta: 1, remainder: 0 },
        { bizType: 'c', maxId: 1n, step: 10, delta: 65, remainder: 0 },
      ],
      new Map(),
    );
    assert.deepEqual(
      plans.map((plan) => plan.action),
      ['refuse', 'refuse', 'refuse'],
    );
    assert.match(
      plans.map((p) => ('reason' in p ? p.reason : '')).join('|'),
      /remainder.*\|.*step 0/,
    );
  });
});

for (const backend of [SEGMENT_BACKENDS.mariadb, SEGMENT_BACKENDS.postgres]) {
  const service = backend.name === 'mariadb' ? 'mysql' : 'postgres';
  await describeWithServices(`db import --from-tinyid (${backend.name})`, [service], () => {
    it('says in one line that a database holds no TinyId tables, and changes nothing', async () => {
      const result = await runIdmint(
        ['db', 'import', '--from-tinyid', SERVICES[service].url, '--dry-run'],
        { env: clean() },
      );
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, /^idmint db: --from-tinyid "[^"]+": no TinyId tables there \(/);
      assert.equal(result.stderr.trimEnd().split('\n').length, 1, result.stderr);
    });

    it("imports TinyId's tags and tokens once, above every ID it issued", async (t) => {
      // TinyId's database: its own, named for this run, on the same server.
      const database = uniqueName('tinyid').toLowerCase();
      const admin = SERVICES[service].url;
      await backend.sql?.(admin, `CREATE DATABASE ${database}`);
      const tinyIdUrl = admin.replace(/\/[^/]*$/, `/${database}`);
      const fixture = await backend.open();
      const root = tempDir(t);
      const tokensFile = join(root, `${database}.json`);
      t.after(async () => {
        await fixture.dispose();
        await backend.sql?.(admin, `DROP DATABASE IF EXISTS ${database}`);
      });
      const tinyId = (sql: string) => backend.sql?.(tinyIdUrl, sql) as Promise<unknown>;
      if (backend.name === 'mariadb') await tinyId(SCRIPT);
      else for (const sql of postgresScript(SCRIPT).split(';')) if (sql.trim()) await tinyId(sql);
      // TinyId has served two segments of test and three of test_odd: its max_id says so.
      await tinyId("UPDATE tiny_id_info SET max_id = 200001 WHERE biz_type = 'test'");
      await tinyId("UPDATE tiny_id_info SET max_id = 300001 WHERE biz_type = 'test_odd'");
      const importArgs = [
        'db',
        'import',
        '--from-tinyid',
        tinyIdUrl,
        '--store',
        fixture.url,
        '--table',
        fixture.table,
        '--tokens-file',
        tokensFile,
      ];
      const run = async (...more: string[]) => {
        const result = await runIdmint([...importArgs, ...more], { env: clean() });
        assert.equal(result.code, 0, result.stderr);
        return result.stdout;
      };

      // A dry run: the plan, and nothing changed (no tag, no token file).
      const plan = await run('--dry-run');
      assert.match(plan, /tag test: create, first ID 200002, step 100000, delta 1, remainder 0/);
      assert.match(plan, /tag test_odd: create, first ID 300003, step 50000, delta 2, remainder 1/);
      assert.match(plan, /dry run: nothing changed/);
      assert.equal(await fixture.store.getTag('test'), undefined);
      assert.equal(existsSync(tokensFile), false);

      // The import: tags at TinyId's position, shape converted; tokens written, owner only.
      assert.match(await run(), /tag test_odd: created, first ID 300003/);
      const test = await fixture.store.getTag('test');
      const odd = await fixture.store.getTag('test_odd');
      assert.deepEqual(
        [test?.maxId, test?.step, test?.delta ?? 1, test?.remainder ?? 0],
        [200002n, 100000, 1, 0],
      );
      assert.deepEqual([odd?.maxId, odd?.step, odd?.delta, odd?.remainder], [300003n, 50000, 2, 1]);
      assert.deepEqual(JSON.parse(readFileSync(tokensFile, 'utf8')), [
        { token: SAMPLE_TOKEN, bizType: 'test' },
        { token: SAMPLE_TOKEN, bizType: 'test_odd' },
      ]);
      assert.equal(statSync(tokensFile).mode & 0o777, 0o600);

      // Again: nothing changes.
      const again = await run();
      assert.match(again, /tag test: unchanged/);
      assert.match(again, /tag test_odd: unchanged/);
      assert.match(again, /tokens: unchanged in/);
      assert.equal((await fixture.store.getTag('test_odd'))?.maxId, 300003n);

      // idmint serves test_odd for a while; TinyId (still running somewhere) serves more of test.
      const range = await fixture.store.allocate('test_odd');
      assert.equal(range.start, 300003n);
      await tinyId("UPDATE tiny_id_info SET max_id = 500001 WHERE biz_type = 'test'");
      const later = await run();
      assert.match(later, /tag test: changed max_id 200002 -> 500002/);
      assert.match(later, /tag test_odd: unchanged/);
      assert.equal((await fixture.store.getTag('test'))?.maxId, 500002n);
      // Never lowered: test_odd stays past the range idmint handed out.
      assert.equal((await fixture.store.getTag('test_odd'))?.maxId, range.end);

      // A row idmint cannot serve stops the whole import, before anything changes.
      await tinyId(
        'INSERT INTO tiny_id_info (id, biz_type, begin_id, max_id, step, delta, remainder) ' +
          "VALUES (3, 'bad', 1, 1, 10, 2, 2)",
      );
      await tinyId("UPDATE tiny_id_info SET max_id = 900001 WHERE biz_type = 'test'");
      const refused = await runIdmint(importArgs, { env: clean() });
      assert.equal(refused.code, 2, refused.stderr);
      assert.match(refused.stderr, /1 of TinyId's tags cannot be imported, so nothing was/);
      assert.equal((await fixture.store.getTag('test'))?.maxId, 500002n);
    });
  });
}

await describeWithServices('TinyId switch end to end', ['postgres'], () => {
  it("TinyId's client, pointed at idmint after the import, gets only new IDs", async (t) => {
    const database = uniqueName('tinyid').toLowerCase();
    const admin = SERVICES.postgres.url;
    const backend = SEGMENT_BACKENDS.postgres;
    await backend.sql?.(admin, `CREATE DATABASE ${database}`);
    const tinyIdUrl = admin.replace(/\/[^/]*$/, `/${database}`);
    const fixture = await backend.open();
    const root = tempDir(t);
    const tokensFile = join(root, `${database}.json`);
    t.after(async () => {
      await fixture.dispose();
      await backend.sql?.(admin, `DROP DATABASE IF EXISTS ${database}`);
    });
    for (const sql of postgresScript(SCRIPT).split(';'))
      if (sql.trim()) await backend.sql?.(tinyIdUrl, sql);
    await backend.sql?.(tinyIdUrl, 'UPDATE tiny_id_info SET max_id = 100001');
    const imported = await runIdmint(
      [
        'db',
        'import',
        '--from-tinyid',
        tinyIdUrl,
        '--store',
        fixture.url,
        '--table',
        fixture.table,
        '--tokens-file',
        tokensFile,
      ],
      { env: clean() },
    );
    assert.equal(imported.code, 0, imported.stderr);
    const server = await startServe(
      ['--no-snowflake-enabled', '--segment-store', fixture.url, '--segment-table', fixture.table],
      { env: { ...clean(), IDMINT_TINYID_TOKEN_FILE: tokensFile }, cwd: root },
    );
    const client = new HttpSegmentIdService({
      server: new URL(server.url).host,
      token: SAMPLE_TOKEN,
    });
    t.after(async () => {
      client.close();
      await server.stop('SIGTERM');
    });
    const draw = async (bizType: string) => {
      const generator = new CachedIdGenerator(bizType, client);
      const ids: bigint[] = [];
      for (let i = 0; i < 200; i++) ids.push(await generator.nextId());
      return ids;
    };
    const test = await draw('test');
    const odd = await draw('test_odd');
    assert.equal(test[0], 100002n);
    assert.equal(odd[0], 100003n);
    assert.ok(test.every((id) => id > 100001n));
    assert.ok(odd.every((id) => id > 100001n && id % 2n === 1n));
    assert.equal(new Set(test).size, test.length);
    assert.equal(new Set(odd).size, odd.length);
  });
});
