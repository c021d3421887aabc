import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { isIdMintError } from '../core/errors.ts';
import { CONFIG_SCHEMA, configKeys, defineConfig, flagName, loadConfig, showValue } from './config.ts';

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
    assert.ok(Object.isFrozen(config) && Object.isFrozen(config.snowflake.rollback) && Object.isFrozen(config.auth.tokens));
    assert.ok([...origins.values()].every((origin) => origin === 'default'));
  });

  it('every key has an IDMINT_ variable, a flag derived from it, a default that passes its own check, and docs', () => {
    const envs = new Set<string>();
    for (const key of configKeys()) {
      assert.match(key.spec.env, /^IDMINT_[A-Z0-9_]+$/, key.key);
      assert.equal(key.flag, flagName(key.spec.env));
      assert.ok(!envs.has(key.spec.env), `${key.spec.env} used twice`);
      envs.add(key.spec.env);
      assert.deepEqual(key.spec.parse(key.spec.default), key.spec.default, key.key);
      assert.ok(key.spec.doc.length > 10 && key.spec.allowed.length > 5, key.key);
    }
    assert.ok(envs.has('IDMINT_SEGMENT_STORE') && envs.has('IDMINT_WORKER_REGISTRY') && envs.has('IDMINT_LAYOUT'));
    assert.ok(envs.has('IDMINT_TOKENS') && envs.has('IDMINT_ADMIN_TOKEN') && envs.has('IDMINT_HOST') && envs.has('IDMINT_PORT'));
  });

  it('merges file < env < flags, and reports where each value came from', () => {
    const path = file('precedence.json', JSON.stringify({ port: 9001, host: '0.0.0.0', log: { level: 'debug' }, segment: { store: 'sqlite::memory:' } }));
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
    const yaml = file('idmint.yaml', 'port: 7000\nsnowflake:\n  registry: etcd://127.0.0.1:2379/ids\n  rollback:\n    policy: borrow\n');
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
    rejects(() => loadConfig({ env: { IDMINT_PORT: '80x' } }), /port = "80x" \(from IDMINT_PORT\): must be an integer from 0 to 65535/);
    rejects(() => loadConfig({ flags: { 'max-batch': '0' } }), /api\.maxBatch = "0" \(from --max-batch\): must be an integer from 1 to 1000000/);
    rejects(() => loadConfig({ env: { IDMINT_LAYOUT: 'snowflake' } }), /snowflake\.layout = "snowflake".*one of idmint, leaf, twitter, js-safe, baidu/);
    rejects(() => loadConfig({ env: { IDMINT_SEGMENT_STORE: 'oracle://db' } }), /segment\.store = "oracle:\/\/db".*sqlite:, postgres:/);
    rejects(() => loadConfig({ env: { IDMINT_WORKER_REGISTRY: 'consul://x' } }), /snowflake\.registry.*static:, zookeeper:, etcd:/);
    rejects(() => loadConfig({ env: { IDMINT_LOG_REQUESTS: 'maybe' } }), /log\.requests = "maybe".*true or false/);
    rejects(() => loadConfig({ env: { IDMINT_ROLLBACK_POLICY: 'sleep' } }), /one of refuse, wait, borrow, history/);
    rejects(() => loadConfig({ values: { port: 1.5 } }), /port = 1\.5 \(from config values\)/);
    rejects(() => loadConfig({ values: { port: true } }), /port = true/);
    rejects(() => loadConfig({ env: { IDMINT_HOST: 'bad host' } }), /host = "bad host".*IP address or host name/);
  });

  it('refuses unknown keys in a file, naming the known ones', () => {
    rejects(() => loadConfig({ file: file('typo.json', JSON.stringify({ segmnt: {} })) }), /unknown key "segmnt"; known keys: host, port, api, auth, segment/);
    rejects(() => loadConfig({ values: { segment: { stor: 'x' } } }), /unknown key "segment\.stor"; known keys under "segment": enabled, store, table, timeoutMs, poolSize, prefetchThreshold/);
    rejects(() => loadConfig({ values: { segment: 'sqlite::memory:' } }), /"segment" must be an object of keys/);
    rejects(() => loadConfig({ values: [] }), /the top level must be an object/);
  });

  it('refuses unreadable, misnamed and malformed files', () => {
    rejects(() => loadConfig({ file: join(dir, 'missing.json') }), /missing\.json: cannot be read \(ENOENT\)/);
    rejects(() => loadConfig({ file: file('idmint.toml', 'port = 1') }), /must end in \.json, \.yaml or \.yml/);
    rejects(() => loadConfig({ file: file('broken.json', '{ "port": ') }), /broken\.json: not valid JSON/);
    rejects(() => loadConfig({ file: file('broken.yaml', 'port: [1,\n') }), /broken\.yaml: not valid YAML/);
  });

  it('parses tokens from an env list and from file objects, each limited to tags or not', () => {
    const fromEnv = loadConfig({ env: { IDMINT_TOKENS: `${TOKEN_A}, ${TOKEN_B}:order|invoice.*`, IDMINT_ADMIN_TOKEN: 'admin-cccccccccccccccc' } }).config;
    assert.deepEqual(fromEnv.auth.tokens, [
      { token: TOKEN_A, tags: ['*'] },
      { token: TOKEN_B, tags: ['order', 'invoice.*'] },
    ]);
    assert.equal(fromEnv.auth.adminToken, 'admin-cccccccccccccccc');
    const fromFile = defineConfig({ auth: { tokens: [{ token: TOKEN_A, tags: ['a:b'] }, `${TOKEN_B}:*`] } });
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
      [{ IDMINT_ADMIN_TOKEN: 'has space in it, long enough' }, /admin token must be at least 16/],
      [{ IDMINT_TOKENS: TOKEN_A, IDMINT_ADMIN_TOKEN: TOKEN_A }, /auth\.adminToken.*must differ from every token/],
    ];
    for (const [env, pattern] of cases) {
      rejects(() => loadConfig({ env }), pattern, /\(hidden\)/);
      try {
        loadConfig({ env });
      } catch (error) {
        assert.ok(!(error as Error).message.includes(TOKEN_A), 'a token leaked into the message');
      }
    }
    rejects(() => defineConfig({ auth: { tokens: [{ token: TOKEN_A, scope: 'x' }] } }), /unknown field "scope" in a token entry/);
  });

  it('checks keys against each other', () => {
    rejects(() => defineConfig({ segment: { enabled: false }, snowflake: { enabled: false } }), /cannot both be off/);
    rejects(() => defineConfig({ snowflake: { layout: 'twitter', datacenterId: 32 } }), /layout "twitter" allows datacenter IDs from 0 to 31/);
    rejects(() => defineConfig({ snowflake: { datacenterId: 1 } }), /layout "idmint" allows datacenter IDs from 0 to 0/);
    rejects(() => defineConfig({ snowflake: { layout: 'js-safe', sequenceSpread: 33 } }), /allows a spread from 0 to 32/);
    assert.equal(defineConfig({ snowflake: { layout: 'twitter', datacenterId: 31 } }).snowflake.datacenterId, 31);
  });

  it('accepts the usual spellings of on and off', () => {
    for (const [raw, value] of [['true', true], ['1', true], ['YES', true], ['on', true], ['false', false], ['0', false], ['No', false], ['off', false]] as const) {
      assert.equal(loadConfig({ env: { IDMINT_LOG_REQUESTS: raw } }).config.log.requests, value, raw);
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
    assert.equal(Object.keys(CONFIG_SCHEMA).join(','), 'host,port,api,auth,segment,snowflake,metrics,log');
  });
});
