import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ObjectId } from 'bson';
import { decodeTime } from 'ulid';
import { validate as uuidValidate, version as uuidVersion } from 'uuid';
import { OPAQUE_SNOWFLAKE_DOMAIN, OpaqueCodec, parseOpaqueKeys } from '../src/core/opaque.ts';
import { OPAQUE_SNOWFLAKE_TWEAK } from '../src/service/opaque-ids.ts';
import { runIdmint } from './support/cli.ts';
import { startServe } from './support/serve-process.ts';

// The ID families and opaque IDs from the command line, as real processes: `idmint next
// --format`, `idmint decode` (detecting the format, and decoding opaque IDs with the keys), and an
// opaque tag served by `idmint serve` across restarts, graceful and killed.

const K1 = '2b7e151628aed2a6abf7158809cf4f3c';
const K2 = 'feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308';

const root = mkdtempSync(join(tmpdir(), 'idmint-cli-families-'));
after(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const workdir = () => mkdtempSync(join(root, `w${++dirs}-`));

/** An environment without any IDMINT_ configuration the test runner may carry, plus `extra`. */
const clean = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return { ...env, ...extra };
};

const lines = (stdout: string) => stdout.trimEnd().split('\n');
const increasing = (list: readonly string[]) =>
  list.every((id, i) => i === 0 || (list[i - 1] as string) < id);

describe('idmint next --format', () => {
  it('prints each family, valid by uuid, ulid and bson; uuid7, ulid increasing', async () => {
    const before = Date.now();
    const results = await Promise.all(
      ['uuid7', 'uuid4', 'ulid', 'objectid'].map((format) =>
        runIdmint(['next', '--format', format, '-n', '20000'], { env: clean() }),
      ),
    );
    const after = Date.now();
    const [uuid7, uuid4, ulid, objectid] = results.map((result) => {
      assert.equal(result.code, 0, result.stderr);
      const list = lines(result.stdout);
      assert.equal(list.length, 20_000);
      assert.equal(new Set(list).size, 20_000);
      return list;
    }) as [string[], string[], string[], string[]];
    assert.ok(uuid7.every((id) => uuidValidate(id) && uuidVersion(id) === 7));
    assert.ok(increasing(uuid7));
    assert.ok(uuid4.every((id) => uuidValidate(id) && uuidVersion(id) === 4));
    assert.ok(ulid.every((id) => decodeTime(id) >= before && decodeTime(id) <= after));
    assert.ok(increasing(ulid));
    assert.ok(
      objectid.every((id) => ObjectId.isValid(id) && new ObjectId(id).toHexString() === id),
    );
    const snowflake = await runIdmint(['next', '-f', 'snowflake', '-n', '3', '-w', '4'], {
      env: clean(),
    });
    assert.equal(snowflake.code, 0);
    assert.ok(lines(snowflake.stdout).every((id) => /^[1-9][0-9]{17,18}$/.test(id)));
  });

  it("--format opaque prints opaque IDs that decode to the worker's; needs keys", async () => {
    const result = await runIdmint(['next', '--format', 'opaque', '-n', '5000', '--worker', '9'], {
      env: clean({ IDMINT_OPAQUE_KEYS: `1:${K1},2:${K2}` }),
    });
    assert.equal(result.code, 0, result.stderr);
    const ids = lines(result.stdout);
    assert.equal(new Set(ids).size, 5000);
    assert.ok(
      ids.every((id) => /^2[0-9]{24}$/.test(id)),
      'the highest key encodes',
    );
    const codec = new OpaqueCodec({
      keys: parseOpaqueKeys(`1:${K1},2:${K2}`),
      domain: OPAQUE_SNOWFLAKE_DOMAIN,
    });
    const dense = ids.map((id) => codec.decode(id, OPAQUE_SNOWFLAKE_TWEAK).dense);
    assert.ok(
      dense.every((d, i) => i === 0 || d > (dense[i - 1] as bigint)),
      'the snowflake IDs behind them are strictly increasing',
    );

    const decoded = await runIdmint(['decode', ids[0] as string, '--json'], {
      env: clean({ IDMINT_OPAQUE_KEYS: `1:${K1},2:${K2}` }),
    });
    assert.equal(decoded.code, 0, decoded.stderr);
    const parts = JSON.parse(decoded.stdout) as {
      format: string;
      dense: string;
      keyId: number;
      workerId: number;
    };
    assert.deepEqual(
      [parts.format, parts.dense, parts.keyId, parts.workerId],
      ['opaque-snowflake', String(dense[0]), 2, 9],
    );

    const keyless = await runIdmint(['next', '--format', 'opaque'], { env: clean() });
    assert.equal(keyless.code, 1);
    assert.match(
      keyless.stderr,
      new RegExp(
        '^idmint next: --format opaque needs opaque keys, and none are configured ' +
          '\\(IDMINT_OPAQUE_KEYS\\)',
      ),
    );
    assert.equal(keyless.stdout, '');
  });

  it('refuses an unknown format, and snowflake flags with another family', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['next', '--format', 'uuid1'],
        new RegExp(
          '^idmint next: --format must be one of snowflake, uuid7, uuid4, ulid, objectid, ' +
            'opaque, got "uuid1"\\n$',
        ),
      ],
      [
        ['next', '--format', 'ulid', '--worker', '3'],
        /--worker belongs to --format snowflake or opaque, not ulid/,
      ],
      [
        ['next', '-f', 'uuid7', '--layout', 'leaf'],
        /--layout belongs to --format snowflake or opaque, not uuid7/,
      ],
      [
        ['next', '-f', 'objectid', '-n', '0'],
        /--count must be an integer from 1 to 10000000, got "0"/,
      ],
    ];
    for (const [args, message] of cases) {
      const result = await runIdmint(args, { env: clean() });
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message);
    }
  });
});

describe('idmint decode', () => {
  it('detects the format of each family and prints its parts, as lines or JSON', async () => {
    const uuid = lines(
      (await runIdmint(['next', '-f', 'uuid7'], { env: clean() })).stdout,
    )[0] as string;
    const cases: [string, string, RegExp][] = [
      [
        uuid,
        'uuid',
        new RegExp(
          '^format\\s+uuid\\nid\\s+[0-9a-f-]{36}\\nversion\\s+7\\nvariant\\s+rfc9562\\ntimest' +
            'amp\\s+\\d+\\ndate\\s+\\d{4}-',
        ),
      ],
      [
        '01K7ZJ3F2V0Q8X3N6W1T5R9B4M',
        'ulid',
        new RegExp(
          '^format\\s+ulid\\nid\\s+01K7ZJ3F2V0Q8X3N6W1T5R9B4M\\ntimestamp\\s+1760922025051\\n' +
            'date\\s+2025-10-20T01:00:25\\.051Z\\nrandom\\s+05d1d1d4dc0e8b84ac94\\n$',
        ),
      ],
      [
        '6a1f0c2b9e4d7f3a1c2b0e9d',
        'objectid',
        /^format\s+objectid\n.*\ntimestamp\s+1780419627000\n/,
      ],
      [
        '3b241101-e2bb-4255-8caf-4136c566a962',
        'uuid',
        new RegExp(
          '^format\\s+uuid\\nid\\s+3b241101-e2bb-4255-8caf-4136c566a962\\nversion\\s+4\\nvari' +
            'ant\\s+rfc9562\\n$',
        ),
      ],
    ];
    for (const [id, format, text] of cases) {
      const plain = await runIdmint(['decode', id], { env: clean() });
      assert.equal(plain.code, 0, plain.stderr);
      assert.match(plain.stdout, text, id);
      const json = JSON.parse(
        (await runIdmint(['decode', id, '--json'], { env: clean() })).stdout,
      ) as { format: string };
      assert.equal(json.format, format);
    }
    const bad = await runIdmint(['decode', 'hello'], { env: clean() });
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      /^idmint decode: "hello" is not an ID idmint can decode: expected a UUID/,
    );
  });
});

describe('an opaque tag served by idmint serve (real processes, SQLite file)', () => {
  it('opaque IDs stay unique across restarts, decode, refuse tampering', {
    timeout: 120_000,
  }, async () => {
    const cwd = workdir();
    const store = `sqlite:${join(cwd, 'idmint.db')}`;
    const env = clean({ IDMINT_SEGMENT_STORE: store, IDMINT_OPAQUE_KEYS: `1:${K1}` });
    const created = await runIdmint(
      ['tags', 'create', 'orders', '--step', '100', '--opaque', '--json'],
      { env, cwd },
    );
    assert.equal(created.code, 0, created.stderr);
    assert.equal((JSON.parse(created.stdout) as { opaque: boolean }).opaque, true);

    const issued: string[] = [];
    const draw = async (url: string) => {
      for (let i = 0; i < 5; i++)
        issued.push(await (await fetch(`${url}/api/segment/get/orders`)).text());
      issued.push(
        ...((await (await fetch(`${url}/v1/segment/orders?count=150`)).json()) as { ids: string[] })
          .ids,
      );
    };
    for (const ending of ['SIGTERM', 'SIGKILL'] as const) {
      const server = await startServe([], { cwd, env });
      try {
        await draw(server.url);
      } finally {
        await server.stop(ending);
      }
    }
    const last = await startServe([], { cwd, env });
    try {
      await draw(last.url);
    } finally {
      await last.stop();
    }
    assert.equal(issued.length, 3 * 155);
    assert.ok(
      issued.every((id) => /^1[0-9]{18}$/.test(id)),
      'every answer is opaque',
    );
    assert.equal(new Set(issued).size, issued.length, 'an opaque ID was issued twice');
    for (const log of [last.logs, last.stderr()])
      assert.ok(!JSON.stringify(log).includes(K1.slice(0, 16)), "the key in the server's output");

    // The dense IDs behind them: unique, increasing across the restarts (the killed server's
    // unissued range is skipped, never reissued).
    const codec = new OpaqueCodec({ keys: parseOpaqueKeys(`1:${K1}`) });
    const dense = issued.map((id) => codec.decode(id, 'orders').dense);
    assert.ok(
      dense.every((d, i) => i === 0 || d > (dense[i - 1] as bigint)),
      'dense IDs go on increasing',
    );

    const first = await runIdmint(['decode', issued[0] as string, '--tag', 'orders', '--json'], {
      env,
      cwd,
    });
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(JSON.parse(first.stdout), {
      format: 'opaque-segment',
      tag: 'orders',
      id: issued[0],
      dense: '1',
      keyId: 1,
    });
    const lastId = issued.at(-1) as string;
    const text = await runIdmint(['decode', lastId, '--tag', 'orders', '--store', store], {
      env: clean({ IDMINT_OPAQUE_KEYS: `1:${K1}` }),
      cwd,
    });
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      new RegExp(
        `^format\\s+opaque-segment\\ntag\\s+orders\\nid\\s+${lastId}\\n` +
          `dense\\s+${dense.at(-1)}\\nkeyId\\s+1\\n$`,
      ),
    );

    const tampered = `${lastId.slice(0, 12)}${(Number(lastId[12]) + 5) % 10}${lastId.slice(13)}`;
    const failures: [string, NodeJS.ProcessEnv, number, RegExp][] = [
      [
        tampered,
        env,
        2,
        new RegExp(
          '^idmint decode: opaque ID \\d{19} is not an ID of "orders" under key 1: it was ' +
            'altered, belongs to another tag, or was made with another key',
        ),
      ],
      [
        lastId,
        clean({ IDMINT_SEGMENT_STORE: store, IDMINT_OPAQUE_KEYS: `1:${K2}` }),
        2,
        /is not an ID of "orders" under key 1/,
      ],
      [
        lastId,
        clean({ IDMINT_SEGMENT_STORE: store, IDMINT_OPAQUE_KEYS: `2:${K2}` }),
        2,
        new RegExp(
          'was made under key 1, which is not configured \\(configured: 2\\); add that key ' +
            'to decode it',
        ),
      ],
      [
        lastId,
        clean({ IDMINT_SEGMENT_STORE: store }),
        1,
        new RegExp(
          '^idmint decode: decoding an opaque ID needs opaque keys, and none are configured ' +
            '\\(IDMINT_OPAQUE_KEYS\\)',
        ),
      ],
    ];
    for (const [id, failEnv, code, message] of failures) {
      const result = await runIdmint(['decode', id, '--tag', 'orders'], { env: failEnv, cwd });
      assert.equal(result.code, code, result.stderr);
      assert.match(result.stderr, message);
      assert.ok(
        !result.stderr.includes(K2.slice(0, 16)) && !result.stderr.includes(K1.slice(0, 16)),
        'key material in an error',
      );
    }
    const unknown = await runIdmint(['decode', lastId, '--tag', 'ghost'], { env, cwd });
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /tag "ghost" does not exist/);
  });

  it('config check hides the keys, and refuses a bad one without printing it', async () => {
    const cwd = workdir();
    const check = await runIdmint(['config', 'check'], {
      env: clean({ IDMINT_OPAQUE_KEYS: `1:${K1},2:${K2}` }),
      cwd,
    });
    assert.equal(check.code, 0, check.stderr);
    assert.match(check.stdout, /^opaque\.keys\s+\(hidden\)\s+from IDMINT_OPAQUE_KEYS$/m);
    const json = await runIdmint(['config', 'check', '--json'], {
      env: clean({ IDMINT_OPAQUE_KEYS: `1:${K1}` }),
      cwd,
    });
    assert.deepEqual(
      (JSON.parse(json.stdout) as { keys: Record<string, unknown> }).keys['opaque.keys'],
      { value: '(hidden)', origin: 'from IDMINT_OPAQUE_KEYS' },
    );
    const bad = await runIdmint(['config', 'check'], {
      env: clean({ IDMINT_OPAQUE_KEYS: `1:${K1},1:${K2}` }),
      cwd,
    });
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      new RegExp(
        '^idmint config: invalid configuration: opaque\\.keys = \\(hidden\\) \\(from ' +
          'IDMINT_OPAQUE_KEYS\\): key ID 1 is given twice',
      ),
    );
    for (const output of [check.stdout, json.stdout, bad.stderr]) {
      assert.ok(
        !output.includes(K1.slice(0, 16)) && !output.includes(K2.slice(0, 16)),
        'key material printed',
      );
    }
  });
});
