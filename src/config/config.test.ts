import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isIdMintError } from '../core/errors.ts';
import { flagName } from './keys.ts';
import { defineConfig, loadConfig, showValue } from './load.ts';
import { compileKey, problemWith } from './read.ts';
import { ConfigSchema, configKeys } from './schema.ts';

const dir = mkdtempSync(join(tmpdir(), 'idmint-config-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** Asserts CONFIG_INVALID with a message matching every pattern. */
function rejects(load: () => unknown, ...patterns: RegExp[]): void {
  assert.throws(load, (error) => {
    assert.ok(isIdMintError(error, 'CONFIG_INVALID'), String(error));
    for (const pattern of patterns) assert.match(error.message, pattern);
    return true;
  });
}

const TOKEN_A = 'tok-aaaaaaaaaaaaaaaa';
const TOKEN_B = 'tok-bbbbbbbbbbbbbbbb';

describe('server configuration', () => {
  it('has the documented zero-setup defaults, deeply frozen', () => {
    const { config, origins } = loadConfig();
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.port, 8080);
    assert.equal(config.segment.store, 'sqlite:./data/idmint.db');
    assert.equal(config.snowflake.registry, 'static:0');
    assert.equal(config.snowflake.layout, 'idmint');
    assert.equal(config.api.maxBatch, 10_000);
    assert.deepEqual(config.auth.tokens, []);
    assert.equal(config.log.requests, false);
    assert.ok(
      Object.isFrozen(config) &&
        Object.isFrozen(config.snowflake.rollback) &&
        Object.isFrozen(config.auth.tokens),
    );
    assert.ok([...origins.values()].every((origin) => origin === 'default'));
  });

  it('every key has an IDMINT_ variable, a flag, a default that passes its check, docs', () => {
    const envs = new Set<string>();
    for (const key of configKeys()) {
      assert.match(key.spec.env, /^IDMINT_[A-Z0-9_]+$/, key.key);
      assert.equal(key.flag, flagName(key.spec.env));
      assert.ok(!envs.has(key.spec.env), `${key.spec.env} used twice`);
      envs.add(key.spec.env);
      assert.equal(
        problemWith(compileKey(key.schema), key.spec.default),
        undefined,
        `${key.key}: its default fails its own schema`,
      );
      assert.ok(key.spec.doc.length > 10 && key.spec.allowed.length > 5, key.key);
    }
    assert.ok(
      envs.has('IDMINT_SEGMENT_STORE') &&
        envs.has('IDMINT_WORKER_REGISTRY') &&
        envs.has('IDMINT_LAYOUT'),
    );
    assert.ok(
      envs.has('IDMINT_TOKENS') &&
        envs.has('IDMINT_ADMIN_TOKEN') &&
        envs.has('IDMINT_HOST') &&
        envs.has('IDMINT_PORT'),
    );
  });

  it('merges file < env < flags, and reports where each value came from', () => {
    const path = file(
      'precedence.json',
      JSON.stringify({
        port: 9001,
        host: '0.0.0.0',
        log: { level: 'debug' },
        segment: { store: 'sqlite::memory:' },
      }),
    );
    const { config, origins } = loadConfig({
      file: path,
      env: { IDMINT_PORT: '9002', IDMINT_LOG_LEVEL: 'warn', IDMINT_LAYOUT: 'leaf', UNRELATED: 'x' },
      flags: { port: '9003' },
    });
    assert.equal(config.port, 9003);
    assert.equal(config.log.level, 'warn');
    assert.equal(config.host, '0.0.0.0');
    assert.equal(config.segment.store, 'sqlite::memory:');
    assert.equal(config.snowflake.layout, 'leaf');
    assert.deepEqual(origins.get('port'), { flag: '--port' });
    assert.deepEqual(origins.get('log.level'), { env: 'IDMINT_LOG_LEVEL' });
    assert.deepEqual(origins.get('host'), { file: path });
    assert.equal(origins.get('api.maxBatch'), 'default');
  });

  it('reads YAML files, and an empty one means every default', () => {
    const yaml = file(
      'idmint.yaml',
      'port: 7000\nsnowflake:\n  registry: etcd://127.0.0.1:2379/ids\n  rollback:\n    ' +
        'policy: borrow\n',
    );
    const { config } = loadConfig({ file: yaml });
    assert.equal(config.port, 7000);
    assert.equal(config.snowflake.registry, 'etcd://127.0.0.1:2379/ids');
    assert.equal(config.snowflake.rollback.policy, 'borrow');
    assert.equal(loadConfig({ file: file('empty.yml', '') }).config.port, 8080);
  });

  it('treats an empty environment variable as unset, and checks only the winning value', () => {
    assert.equal(loadConfig({ env: { IDMINT_PORT: '' } }).config.port, 8080);
    const path = file('overridden.json', JSON.stringify({ port: 'not a port' }));
    assert.equal(loadConfig({ file: path, env: { IDMINT_PORT: '8081' } }).config.port, 8081);
  });

  it('names the key, the value, the source and what is allowed', () => {
    rejects(
      () => loadConfig({ env: { IDMINT_PORT: '80x' } }),
      /port = "80x" \(from IDMINT_PORT\): must be an integer from 0 to 65535/,
    );
    rejects(
      () => loadConfig({ flags: { 'max-batch': '0' } }),
      /api\.maxBatch = "0" \(from --max-batch\): must be an integer from 1 to 1000000/,
    );
    rejects(
      () => loadConfig({ env: { IDMINT_LAYOUT: 'snowflake' } }),
      /snowflake\.layout = "snowflake".*one of idmint, leaf, twitter, js-safe, baidu/,
    );
    rejects(
      () => loadConfig({ env: { IDMINT_SEGMENT_STORE: 'oracle://db' } }),
      /store = "oracle:\/\/db".*not a segment store URL; accepted forms: sqlite:.*postgres:\/\//,
    );
    rejects(
      () => loadConfig({ env: { IDMINT_WORKER_REGISTRY: 'consul://x' } }),
      new RegExp(
        'snowflake\\.registry.*accepted forms: sqlite:<file>, .*static:<worker id>, ' +
          'zookeeper://.*etcd://',
      ),
    );
    rejects(
      () => loadConfig({ env: { IDMINT_LOG_REQUESTS: 'maybe' } }),
      /log\.requests = "maybe".*true or false/,
    );
    rejects(
      () => loadConfig({ env: { IDMINT_ROLLBACK_POLICY: 'sleep' } }),
      /one of refuse, wait, borrow, history/,
    );
    rejects(() => loadConfig({ values: { port: 1.5 } }), /port = 1\.5 \(from config values\)/);
    rejects(() => loadConfig({ values: { port: true } }), /port = true/);
    rejects(
      () => loadConfig({ values: { segment: { prefetchThreshold: Number.NaN } } }),
      /segment\.prefetchThreshold = NaN \(from config values\): must be a number from 0 to 1/,
    );
    rejects(
      () => loadConfig({ file: file('infinite.yaml', 'port: .inf\n') }),
      /port = Infinity \(from .*infinite\.yaml\): must be an integer from 0 to 65535/,
    );
    rejects(
      () => loadConfig({ env: { IDMINT_SEGMENT_PREFETCH_THRESHOLD: '1e-1' } }),
      /prefetchThreshold = "1e-1".*must be a number from 0 to 1/,
    );
    rejects(() => loadConfig({ env: { IDMINT_MAX_BATCH: '0x10' } }), /api\.maxBatch = "0x10"/);
    rejects(
      () => loadConfig({ env: { IDMINT_HOST: 'bad host' } }),
      /host = "bad host".*IP address or host name/,
    );
  });

  it('refuses unknown keys in a file, naming the known ones', () => {
    rejects(
      () => loadConfig({ file: file('typo.json', JSON.stringify({ segmnt: {} })) }),
      /unknown key "segmnt"; known keys: host, port, processes, api, auth, segment/,
    );
    rejects(
      () => loadConfig({ values: { segment: { stor: 'x' } } }),
      /unknown key "segment\.stor"; known keys under "segment": enabled, store, table, timeoutMs,/,
    );
    rejects(
      () => loadConfig({ values: { segment: 'sqlite::memory:' } }),
      /"segment" must be an object of keys/,
    );
    rejects(() => loadConfig({ values: [] }), /the top level must be an object/);
  });

  it('refuses unreadable, misnamed and malformed files', () => {
    rejects(
      () => loadConfig({ file: join(dir, 'missing.json') }),
      /missing\.json: cannot be read \(ENOENT\)/,
    );
    rejects(
      () => loadConfig({ file: file('idmint.toml', 'port = 1') }),
      /must end in \.json, \.yaml or \.yml/,
    );
    rejects(
      () => loadConfig({ file: file('broken.json', '{ "port": ') }),
      /broken\.json: not valid JSON/,
    );
    rejects(
      () => loadConfig({ file: file('broken.yaml', 'port: [1,\n') }),
      /broken\.yaml: not valid YAML/,
    );
  });

  it('parses tokens from an env list and from file objects, each limited to tags or not', () => {
    const fromEnv = loadConfig({
      env: {
        IDMINT_TOKENS: `${TOKEN_A}, ${TOKEN_B}:order|invoice.*`,
        IDMINT_ADMIN_TOKEN: 'admin-cccccccccccccccc',
      },
    }).config;
    assert.deepEqual(fromEnv.auth.tokens, [
      { token: TOKEN_A, tags: ['*'] },
      { token: TOKEN_B, tags: ['order', 'invoice.*'] },
    ]);
    assert.equal(fromEnv.auth.adminToken, 'admin-cccccccccccccccc');
    const fromFile = defineConfig({
      auth: { tokens: [{ token: TOKEN_A, tags: ['a:b'] }, `${TOKEN_B}:*`] },
    });
    assert.deepEqual(fromFile.auth.tokens, [
      { token: TOKEN_A, tags: ['a:b'] },
      { token: TOKEN_B, tags: ['*'] },
    ]);
  });

  it('refuses weak, repeated or malformed tokens without printing them', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ IDMINT_TOKENS: 'short' }, /at least 16 characters/],
      [{ IDMINT_TOKENS: `${TOKEN_A},${TOKEN_A}` }, /listed twice/],
      [{ IDMINT_TOKENS: `${TOKEN_A}:bad tag` }, /tag "bad tag" must be a tag name/],
      [{ IDMINT_TOKENS: `${TOKEN_A}:` }, /must be a tag name/],
      [
        { IDMINT_ADMIN_TOKEN: 'has space in it, long enough' },
        /auth\.adminToken = \(hidden\).*must be empty, or at least 16 characters/,
      ],
      [
        { IDMINT_TOKENS: TOKEN_A, IDMINT_ADMIN_TOKEN: TOKEN_A },
        /auth\.adminToken.*must differ from every token/,
      ],
    ];
    for (const [env, pattern] of cases) {
      rejects(() => loadConfig({ env }), pattern, /\(hidden\)/);
      try {
        loadConfig({ env });
      } catch (error) {
        assert.ok(!(error as Error).message.includes(TOKEN_A), 'a token leaked into the message');
      }
    }
    rejects(
      () => defineConfig({ auth: { tokens: [{ token: TOKEN_A, scope: 'x' }] } }),
      /unknown field "scope" in a token entry/,
    );
  });

  it('checks keys against each other', () => {
    rejects(
      () => defineConfig({ segment: { enabled: false }, snowflake: { enabled: false } }),
      /cannot both be off/,
    );
    rejects(
      () => defineConfig({ snowflake: { layout: 'twitter', datacenterId: 32 } }),
      /layout "twitter" allows datacenter IDs from 0 to 31/,
    );
    rejects(
      () => defineConfig({ snowflake: { datacenterId: 1 } }),
      /layout "idmint" allows datacenter IDs from 0 to 0/,
    );
    rejects(
      () => defineConfig({ snowflake: { layout: 'js-safe', sequenceSpread: 33 } }),
      /allows a spread from 0 to 32/,
    );
    assert.equal(
      defineConfig({ snowflake: { layout: 'twitter', datacenterId: 31 } }).snowflake.datacenterId,
      31,
    );
  });

  it('accepts the usual spellings of on and off', () => {
    for (const [raw, value] of [
      ['true', true],
      ['1', true],
      ['YES', true],
      ['on', true],
      ['false', false],
      ['0', false],
      ['No', false],
      ['off', false],
    ] as const) {
      assert.equal(
        loadConfig({ env: { IDMINT_LOG_REQUESTS: raw } }).config.log.requests,
        value,
        raw,
      );
    }
    assert.equal(loadConfig({ flags: { metrics: false } }).config.metrics.enabled, false);
  });

  it('shows values for people with secrets hidden', () => {
    const keys = new Map(configKeys().map((k) => [k.key, k]));
    const tokens = keys.get('auth.tokens');
    const port = keys.get('port');
    assert.ok(tokens !== undefined && port !== undefined);
    assert.equal(showValue(tokens, [{ token: TOKEN_A, tags: ['*'] }]), '(1 hidden)');
    assert.equal(showValue(tokens, []), '(none)');
    assert.equal(showValue(port, 8080), '8080');
    assert.equal(
      Object.keys(ConfigSchema.properties).join(','),
      'host,port,processes,api,auth,segment,snowflake,metrics,log,opaque',
    );
  });
});

describe("PORT, the platforms' variable", () => {
  it('is read when IDMINT_PORT is unset, loses to IDMINT_PORT and --port, is checked', () => {
    const fromPort = loadConfig({ env: { PORT: '9000' } });
    assert.equal(fromPort.config.port, 9000);
    assert.deepEqual(fromPort.origins.get('port'), { env: 'PORT' });
    assert.equal(loadConfig({ env: { PORT: '9000', IDMINT_PORT: '9001' } }).config.port, 9001);
    assert.equal(loadConfig({ env: { PORT: '9000' }, flags: { port: '9002' } }).config.port, 9002);
    assert.equal(loadConfig({ env: { PORT: '' } }).config.port, 8080);
    // A file sets the port only when neither variable does.
    assert.equal(loadConfig({ values: { port: 7000 }, env: { PORT: '9000' } }).config.port, 9000);
    rejects(
      () => loadConfig({ env: { PORT: 'eighty' } }),
      /port = "eighty" \(from PORT\): must be an integer from 0 to 65535/,
    );
  });
});

describe('bounds checked where the value enters (issue 8)', () => {
  it('refuses a lease TTL every registry would refuse; 0 means the registry default', () => {
    for (const ttl of ['500', '999', '600001', '3600000']) {
      rejects(
        () => loadConfig({ env: { IDMINT_LEASE_TTL_MS: ttl } }),
        new RegExp(
          `snowflake\\.leaseTtlMs = "${ttl}" \\(from IDMINT_LEASE_TTL_MS\\): must be 0 ` +
            `\\(the registry's default: 10000; 3000 for static\\), or an integer from 1000 to ` +
            `600000`,
        ),
      );
    }
    assert.equal(loadConfig({ env: { IDMINT_LEASE_TTL_MS: '0' } }).config.snowflake.leaseTtlMs, 0);
    assert.equal(
      loadConfig({ env: { IDMINT_LEASE_TTL_MS: '600000' } }).config.snowflake.leaseTtlMs,
      600_000,
    );
  });

  it('refuses a lease TTL too short for the worker to renew it', () => {
    rejects(
      () => defineConfig({ snowflake: { leaseTtlMs: 1000 } }),
      /leaseTtlMs = 1000 \(from config values\): the lease TTL \(1000 ms\) minus safetyMarginMs/,
    );
    rejects(
      () => defineConfig({ snowflake: { leaseTtlMs: 1010 } }),
      /leaseTtlMs = 1010.*renewed every 3 ms, below the shortest renewal interval \(10 ms\)/,
    );
    assert.equal(defineConfig({ snowflake: { leaseTtlMs: 1030 } }).snowflake.leaseTtlMs, 1030);
    // A mode turned off has no lease to renew.
    assert.equal(
      defineConfig({ snowflake: { enabled: false, leaseTtlMs: 1010 } }).snowflake.leaseTtlMs,
      1010,
    );
  });

  it('refuses a borrow lead that a restart after a crash could not wait out', () => {
    // etcd's default 10 s lease: 9 s fence + the lead must fit the 600 s start-up wait.
    const etcd = { registry: 'etcd://127.0.0.1:2379/ids', rollback: { policy: 'borrow' } };
    assert.equal(
      defineConfig({ snowflake: { ...etcd, rollback: { policy: 'borrow', maxLeadMs: 591_000 } } })
        .snowflake.rollback.maxLeadMs,
      591_000,
    );
    rejects(
      () =>
        defineConfig({
          snowflake: { ...etcd, rollback: { policy: 'borrow', maxLeadMs: 591_001 } },
        }),
      /maxLeadMs = 591001.*with a 10000 ms lease it must be at most 591000 \(start-up waits/,
    );
    // The longest lease leaves room for the default lead only.
    rejects(
      () =>
        defineConfig({
          snowflake: {
            ...etcd,
            leaseTtlMs: 600_000,
            rollback: { policy: 'borrow', maxLeadMs: 1001 },
          },
        }),
      /must be at most 1000/,
    );
    // static's 3 s lease leaves more.
    assert.equal(
      defineConfig({ snowflake: { rollback: { policy: 'borrow', maxLeadMs: 598_000 } } }).snowflake
        .rollback.maxLeadMs,
      598_000,
    );
  });

  it('declares no duration a timer cannot honour (Node clamps 2^31 ms and above to 1 ms)', () => {
    const durations = configKeys().filter((k) => k.key.endsWith('Ms'));
    assert.ok(durations.length >= 15, `only ${durations.length} duration keys found`);
    for (const key of durations) {
      const bounds = [key.schema, ...((key.schema as { anyOf?: object[] }).anyOf ?? [])] as {
        maximum?: number;
      }[];
      const max = Math.max(...bounds.map((b) => b.maximum ?? 0));
      assert.ok(max > 0 && max < 2 ** 31, `${key.key}: maximum ${max}`);
      rejects(
        () => loadConfig({ env: { [key.spec.env]: String(2 ** 31) } }),
        new RegExp(`${key.key.replaceAll('.', '\\.')} = "2147483648"`),
      );
    }
  });
});

describe('the snowflake clock and the rollback policies (issue 8)', () => {
  const system = (rollback: object) => ({
    snowflake: { clock: 'system', registry: 'etcd://127.0.0.1:2379/ids', rollback },
  });

  it('defaults to the monotonic clock; IDMINT_CLOCK or --clock selects the system one', () => {
    assert.equal(defineConfig().snowflake.clock, 'monotonic');
    assert.equal(loadConfig({ env: { IDMINT_CLOCK: 'system' } }).config.snowflake.clock, 'system');
    assert.equal(loadConfig({ flags: { clock: 'system' } }).config.snowflake.clock, 'system');
    rejects(
      () => loadConfig({ env: { IDMINT_CLOCK: 'ntp' } }),
      /snowflake\.clock = "ntp" \(from IDMINT_CLOCK\): must be one of monotonic, system/,
    );
  });

  it('refuses refuse and history on the monotonic clock (they would act as wait)', () => {
    for (const policy of ['refuse', 'history']) {
      rejects(
        () => loadConfig({ env: { IDMINT_ROLLBACK_POLICY: policy } }),
        new RegExp(
          `rollback\\.policy = "${policy}" \\(from IDMINT_ROLLBACK_POLICY\\): "${policy}" ` +
            `never acts ` +
            'with snowflake\\.clock = monotonic: set snowflake\\.clock \\(IDMINT_CLOCK\\) ' +
            'to system',
        ),
      );
      assert.equal(
        loadConfig({ env: { IDMINT_ROLLBACK_POLICY: policy, IDMINT_CLOCK: 'system' } }).config
          .snowflake.rollback.policy,
        policy,
      );
    }
    for (const policy of ['wait', 'borrow'])
      assert.equal(
        loadConfig({ env: { IDMINT_ROLLBACK_POLICY: policy } }).config.snowflake.rollback.policy,
        policy,
      );
  });

  it('refuses a rollback bound set where it cannot take effect, naming where it applies', () => {
    rejects(
      () => loadConfig({ env: { IDMINT_ROLLBACK_MAX_BACKWARD_MS: '50' } }),
      new RegExp(
        'maxBackwardMs = 50 \\(from IDMINT_ROLLBACK_MAX_BACKWARD_MS\\): applies only to the ' +
          'wait and switch-worker policies with snowflake\\.clock = system ' +
          '\\(here: policy wait, clock monotonic\\)',
      ),
    );
    rejects(
      () => defineConfig(system({ policy: 'refuse', maxBackwardMs: 50 })),
      /maxBackwardMs = 50.*here: policy refuse, clock system/,
    );
    rejects(
      () => defineConfig(system({ policy: 'wait', maxLeadMs: 50 })),
      /maxLeadMs = 50.*applies only to the borrow policy/,
    );
    rejects(
      () => defineConfig(system({ policy: 'borrow', historyMs: 50 })),
      /historyMs = 50.*applies only to the history policy/,
    );
    rejects(
      () => loadConfig({ env: { IDMINT_PEER_CLOCK_CHECK: 'off', IDMINT_MAX_PEER_SKEW_MS: '100' } }),
      /snowflake\.maxPeerSkewMs = 100.*no effect with snowflake\.peerClockCheck = off/,
    );
    // Where each applies, each is taken.
    assert.equal(
      defineConfig(system({ policy: 'wait', maxBackwardMs: 50 })).snowflake.rollback.maxBackwardMs,
      50,
    );
    assert.equal(
      defineConfig(system({ policy: 'switch-worker', maxBackwardMs: 50 })).snowflake.rollback
        .maxBackwardMs,
      50,
    );
    assert.equal(
      defineConfig({ snowflake: { rollback: { policy: 'borrow', maxLeadMs: 50, maxWaitMs: 5 } } })
        .snowflake.rollback.maxLeadMs,
      50,
    );
    assert.equal(
      defineConfig(system({ policy: 'history', historyMs: 50 })).snowflake.rollback.historyMs,
      50,
    );
    // maxWaitMs acts under every policy (the wait for the next time unit when one is used up).
    assert.equal(
      defineConfig({ snowflake: { rollback: { maxWaitMs: 20 } } }).snowflake.rollback.maxWaitMs,
      20,
    );
    // Left at their defaults, the bounds of other policies are no mistake.
    assert.equal(defineConfig(system({ policy: 'refuse' })).snowflake.rollback.maxBackwardMs, 5);
  });

  it('refuses switch-worker with a static registry (no other worker ID)', () => {
    rejects(
      () => defineConfig({ snowflake: { clock: 'system', rollback: { policy: 'switch-worker' } } }),
      /rollback\.policy = "switch-worker".*needs a coordinated registry: a static one has a/,
    );
    assert.equal(
      defineConfig(system({ policy: 'switch-worker' })).snowflake.rollback.policy,
      'switch-worker',
    );
  });

  it('does not judge the keys of snowflake mode when it is off', () => {
    assert.equal(
      defineConfig({
        snowflake: { enabled: false, rollback: { policy: 'history', historyMs: 10 } },
      }).snowflake.rollback.policy,
      'history',
    );
  });
});
