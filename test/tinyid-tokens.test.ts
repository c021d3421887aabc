// TinyId's tokens as its tiny_id_token table holds them (auth.tinyidTokenFile): TinyId's own
// sample token and a 4-character one that idmint's own token rules refuse, each limited to the
// biz types of its rows, spoken to by TinyId's client (support/tinyid-client.ts) against a real
// `idmint serve`. A weak token is named in one start-up warning, by its digest, never in full.
// A file rewritten while the server runs is read again, as TinyId reloads its table.
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import {
  parseTinyIdTokenRows,
  readTinyIdTokenFile,
  tokenFingerprint,
  tokenWeakness,
} from '../src/config/tinyid-tokens.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { startServe } from './support/serve-process.ts';
import { CachedIdGenerator, HttpSegmentIdService, tinyIdPost } from './support/tinyid-client.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-tinyid-tokens-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** TinyId's sample token (tinyid-server/db.sql): rows for `test` and `test_odd`. */
const SAMPLE = '0f673adf80504e2eaa552f5d791b644c';
/** Four characters, one a `:` that IDMINT_TOKENS reads as its separator: TinyId takes it. */
const SHORT = 'q:7x';

function clean(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return env;
}

describe('TinyId token rules', () => {
  it("TinyId's sample token is not weak; a short or digits-only one is, and says why", () => {
    assert.equal(tokenWeakness(SAMPLE), undefined);
    assert.match(tokenWeakness(SHORT) ?? '', /^4 characters \(idmint's own tokens need 16/);
    // 16 digits: long enough, but about 53 bits from an alphabet of ten.
    assert.match(tokenWeakness('0123456789012345') ?? '', /^16 characters of digits: about 53/);
  });

  it('names a token by its digest, never by any of its characters', () => {
    const name = tokenFingerprint(SHORT);
    assert.match(name, /^sha256:[0-9a-f]{12}$/);
    assert.ok(!name.includes(SHORT));
  });

  it('reads rows as tiny_id_token holds them and names the row at fault, never the token', () => {
    assert.deepEqual(
      parseTinyIdTokenRows([{ token: SAMPLE, bizType: 'test', remark: '1' }], 'f.json'),
      [{ token: SAMPLE, bizType: 'test' }],
    );
    assert.throws(
      () => parseTinyIdTokenRows([{ token: SHORT, bizType: 'test' }, { token: '' }], 'f.json'),
      (error: Error) =>
        /auth\.tinyidTokenFile "f\.json": row 2 has no token/.test(error.message) &&
        !error.message.includes(SHORT),
    );
    assert.throws(
      () => parseTinyIdTokenRows([{ token: 'x'.repeat(256), bizType: 't' }], 'f.json'),
      /row 1's token is longer than TinyId's 255/,
    );
    assert.throws(() => parseTinyIdTokenRows({}, 'f.json'), /must hold a list/);
  });

  it("says where a file's JSON broke, never quoting its text as the parser would", () => {
    const file = join(root, 'broken.json');
    writeFileSync(file, `[{"token": "${SAMPLE}", "bizType" "test"}]`);
    assert.throws(
      () => readTinyIdTokenFile(file),
      /is not JSON: Expected ':' after property name in JSON at position 57 \(line 1 column 58\)/,
    );
    // V8 quotes the text ("Unexpected token 'q', "q7x..." is not valid JSON"): left out.
    writeFileSync(file, `${SAMPLE}x`);
    assert.throws(
      () => readTinyIdTokenFile(file),
      (error: Error) =>
        /: is not JSON \(a list of/.test(error.message) && !error.message.includes(SAMPLE),
    );
  });
});

describe('TinyId tokens on idmint serve', () => {
  it("TinyId's client draws with its tokens as stored, each for its rows' biz types", async (t) => {
    const fixture = await SEGMENT_BACKENDS.sqlite.open();
    await fixture.store.createTag({ tag: 'test', step: 200 });
    await fixture.store.createTag({ tag: 'test_odd', step: 200, delta: 2, remainder: 1 });
    const file = join(root, 'tokens.json');
    // tiny_id_token's rows: the sample token twice (two biz types), the short one once.
    writeFileSync(
      file,
      JSON.stringify([
        { token: SAMPLE, bizType: 'test' },
        { token: SAMPLE, bizType: 'test_odd' },
        { token: SHORT, bizType: 'test' },
      ]),
    );
    const server = await startServe(
      ['--no-snowflake-enabled', '--segment-store', fixture.url, '--segment-table', fixture.table],
      { env: { ...clean(), IDMINT_TINYID_TOKEN_FILE: file }, cwd: root },
    );
    const agent = new Agent({ keepAlive: true });
    const services: HttpSegmentIdService[] = [];
    t.after(async () => {
      agent.destroy();
      for (const service of services) service.close();
      await server.stop('SIGTERM');
      await fixture.dispose();
    });
    const host = new URL(server.url).host;
    const draw = async (token: string, bizType: string, count: number) => {
      const service = new HttpSegmentIdService({ server: host, token });
      services.push(service);
      const generator = new CachedIdGenerator(bizType, service);
      const ids: bigint[] = [];
      for (let i = 0; i < count; i++) ids.push(await generator.nextId());
      return ids;
    };

    // Both tokens draw `test`, from one sequence: 1,000 IDs, none twice.
    const plain = [...(await draw(SAMPLE, 'test', 500)), ...(await draw(SHORT, 'test', 500))];
    assert.equal(new Set(plain).size, 1000);
    const odd = await draw(SAMPLE, 'test_odd', 300);
    assert.deepEqual(
      odd.filter((id) => id % 2n !== 1n),
      [],
    );

    // The short token has no row for test_odd; an unknown token none at all: TinyId's empty
    // answer on the Simple route, its token error on the JSON one.
    const simple = `${server.url}/tinyid/id/nextSegmentIdSimple`;
    assert.equal(await tinyIdPost(`${simple}?token=${SHORT}&bizType=test_odd`, agent), '');
    assert.equal(await tinyIdPost(`${simple}?token=q:7y&bizType=test`, agent), '');
    const json = await fetch(`${server.url}/tinyid/id/nextId?token=${SHORT}&bizType=test_odd`);
    assert.equal(await json.text(), '{"data":null,"code":5,"message":"token is error"}');

    // TinyId's tokens are not bearer tokens: idmint's routes refuse them, and are not open.
    for (const authorization of [`Bearer ${SAMPLE}`, undefined]) {
      const answer = await fetch(`${server.url}/v1/segment/test`, {
        headers: authorization === undefined ? {} : { authorization },
      });
      assert.equal(answer.status, 401, authorization ?? 'no token');
    }

    // One warning, for the short token only, naming it by digest; no log line holds either
    // token.
    const warnings = server.logs.filter((line) => /TinyId token/.test(String(line.msg)));
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.equal(warnings[0]?.token, tokenFingerprint(SHORT));
    assert.match(String(warnings[0]?.msg), /is weak: 4 characters/);
    const everything = JSON.stringify(server.logs) + server.stderr();
    assert.ok(!everything.includes(SAMPLE), 'the sample token is logged');
    assert.ok(!everything.includes(`"${SHORT}`), 'the short token is logged');
  });

  it('reloads a rewritten file: new tokens in, removed ones out, a broken file kept', async (t) => {
    const file = join(root, 'reloaded.json');
    // As an operator should: a new file renamed over the old, so no read sees half of it.
    const replace = (text: string) => {
      writeFileSync(`${file}.new`, text);
      renameSync(`${file}.new`, file);
    };
    const NEW = 'b7e1c0d2a9f84e6c8d3b5a7f9e1c2d4b';
    replace(JSON.stringify([{ token: SAMPLE, bizType: 'test' }]));
    const fixture = await SEGMENT_BACKENDS.sqlite.open();
    await fixture.store.createTag({ tag: 'test', step: 200 });
    const server = await startServe(
      ['--no-snowflake-enabled', '--segment-store', fixture.url, '--segment-table', fixture.table],
      {
        env: { ...clean(), IDMINT_TINYID_TOKEN_FILE: file, IDMINT_TINYID_TOKEN_RELOAD_MS: '100' },
        cwd: root,
      },
    );
    t.after(async () => {
      await server.stop('SIGTERM');
      await fixture.dispose();
    });
    const status = async (token: string) => {
      const answer = await fetch(`${server.url}/tinyid/id/nextId?token=${token}&bizType=test`);
      const body = (await answer.json()) as { code: number; message: string };
      if (body.message === 'token is error') return 'refused';
      assert.equal(body.code, 200, JSON.stringify(body));
      return 'accepted';
    };
    const until = async (what: string, ok: () => Promise<boolean>) => {
      for (let i = 0; i < 100; i++) {
        if (await ok()) return;
        await sleep(50);
      }
      assert.fail(`not seen within 5 s: ${what}`);
    };
    assert.equal(await status(SAMPLE), 'accepted');
    assert.equal(await status(NEW), 'refused');

    // The sample token removed, a new one and the short one added.
    replace(
      JSON.stringify([
        { token: NEW, bizType: 'test' },
        { token: SHORT, bizType: 'test' },
      ]),
    );
    await until('the new token accepted', async () => (await status(NEW)) === 'accepted');
    assert.equal(await status(SAMPLE), 'refused');
    assert.equal(await status(SHORT), 'accepted');
    const weak = server.logs.filter((line) => /TinyId token .* is weak/.test(String(line.msg)));
    assert.deepEqual(
      weak.map((line) => line.token),
      [tokenFingerprint(SHORT)],
    );

    // A broken file: the tokens read before stay, and one warning names the file and the cause,
    // however many reads fail the same way.
    replace('[{"token": "x" "bizType": "test"}]');
    const broken = (line: Record<string, unknown>) => /is not JSON/.test(String(line.msg));
    const warning = await server.logLine(broken);
    assert.equal(warning.level, 40);
    assert.ok(String(warning.msg).includes(JSON.stringify(file)), String(warning.msg));
    assert.match(String(warning.msg), /after property value in JSON at position 15/);
    await sleep(500);
    assert.equal(server.logs.filter(broken).length, 1);
    assert.equal(await status(NEW), 'accepted');
    assert.equal(await status(SAMPLE), 'refused');

    // A missing file is another cause: one more warning, the OS's code in it.
    rmSync(file);
    await server.logLine((line) => /cannot be read \(ENOENT\)/.test(String(line.msg)));
    await sleep(500);
    assert.equal(server.logs.filter((line) => /ENOENT/.test(String(line.msg))).length, 1);
    assert.equal(await status(NEW), 'accepted');

    // Fixed again: read as before; the short token, known already, is not warned about twice.
    replace(
      JSON.stringify([
        { token: SHORT, bizType: 'test' },
        { token: SAMPLE, bizType: 'test' },
      ]),
    );
    await until('the sample token back', async () => (await status(SAMPLE)) === 'accepted');
    assert.equal(await status(NEW), 'refused');
    assert.equal(
      server.logs.filter((line) => /TinyId token .* is weak/.test(String(line.msg))).length,
      1,
    );
  });

  it('refuses to start on a token file it cannot read, naming the key', async () => {
    const missing = join(root, 'missing.json');
    await assert.rejects(
      startServe(['--no-snowflake-enabled', '--segment-store', 'sqlite::memory:'], {
        env: { ...clean(), IDMINT_TINYID_TOKEN_FILE: missing },
        cwd: root,
      }),
      /auth\.tinyidTokenFile .*missing\.json.*cannot be read \(ENOENT\)/,
    );
  });
});
