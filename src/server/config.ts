import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ROLLBACK_POLICIES, resolveRollbackPolicy, type RollbackPolicyName } from '../core/clock-policy.ts';
import { IdMintError } from '../core/errors.ts';
import { DEFAULT_LAYOUT, LAYOUT_PRESETS, getLayout } from '../core/layout.ts';
import { TAG_PATTERN } from '../core/segment-limits.ts';
import type { PeerClockCheck } from '../service/snowflake-worker.ts';
import { SQL_IDENTIFIER, SQL_IDENTIFIER_RULE } from '../sql/sql-driver.ts';

/**
 * The server's configuration: one schema, defaults beside it, validated once and frozen.
 *
 * Three sources feed it, later ones winning: a config file (JSON or YAML, nested keys as below),
 * environment variables (`IDMINT_*`), and CLI flags (the variable's name without `IDMINT_`, in
 * kebab case: `IDMINT_SEGMENT_STORE` is `--segment-store`). docs/configuration.md lists every key;
 * a test keeps it in step with this schema.
 */

/** One configuration key: where it comes from, its default, and how a raw value is checked. */
export interface ConfigField<T> {
  readonly field: true;
  /** Environment variable; the CLI flag is derived from it. */
  readonly env: string;
  readonly default: T;
  /** One line for docs and `config check`. */
  readonly doc: string;
  /** What is allowed, for error messages and docs: "an integer from 0 to 65535". */
  readonly allowed: string;
  /** True for on/off keys: the flag takes no value (`--log-requests`, `--no-log-requests`). */
  readonly boolean?: true;
  /** True when the value must never be printed (tokens). */
  readonly secret?: true;
  /**
   * Checks and converts a value. Strings come from env vars and flags; files may also give
   * numbers, booleans, arrays and objects. Returns the value, or throws a {@link Problem}.
   */
  parse(raw: unknown): T;
}

/** A bearer token and the segment tags it may use. */
export interface TokenRule {
  readonly token: string;
  /**
   * Tags this token may draw from: exact names, prefixes ending in `*` (`order.*`), or `*` for
   * every tag. Snowflake routes need only a valid token.
   */
  readonly tags: readonly string[];
}

/** Thrown by a field's parser; becomes CONFIG_INVALID with the key, value and source. */
class Problem extends Error {}

type Schema = { readonly [key: string]: ConfigField<unknown> | Schema };

/** The validated configuration type, derived from the schema. */
export type ConfigOf<S> = { readonly [K in keyof S]: S[K] extends ConfigField<infer T> ? T : ConfigOf<S[K]> };

// RFC 6750's b64token, so a token can be sent in an Authorization header as is.
const TOKEN_PATTERN = /^[A-Za-z0-9\-._~+/]+=*$/;
/** Long enough that guessing is hopeless; short tokens are a configuration mistake. */
const MIN_TOKEN_LENGTH = 16;

function field<T>(spec: Omit<ConfigField<T>, 'field'>): ConfigField<T> {
  return Object.freeze({ field: true, ...spec });
}

/** A field whose raw value converts or does not: `convert` returns undefined for a bad one. */
function checked<T>(env: string, fallback: T, doc: string, allowed: string, convert: (raw: unknown) => T | undefined, extra: { boolean?: true } = {}): ConfigField<T> {
  return field({
    env,
    default: fallback,
    doc,
    allowed,
    ...extra,
    parse(raw) {
      const value = convert(raw);
      if (value === undefined) throw new Problem(`must be ${allowed}`);
      return value;
    },
  });
}

const trimmed = (raw: unknown): string | undefined => (typeof raw === 'string' && raw.trim() !== '' ? raw.trim() : undefined);

function text(env: string, fallback: string, doc: string, check: { pattern: RegExp; allowed: string }): ConfigField<string> {
  return checked(env, fallback, doc, check.allowed, (raw) => {
    const value = trimmed(raw);
    return value !== undefined && check.pattern.test(value) ? value : undefined;
  });
}

/** Numbers from files as they are; from strings only in plain decimal (no `1e3`, `0x10`). */
function numeric(raw: unknown, pattern: RegExp): number {
  return typeof raw === 'number' ? raw : typeof raw === 'string' && pattern.test(raw.trim()) ? Number(raw) : Number.NaN;
}

function integer(env: string, fallback: number, min: number, max: number, doc: string): ConfigField<number> {
  return checked(env, fallback, doc, `an integer from ${min} to ${max}`, (raw) => {
    const value = numeric(raw, /^[0-9]{1,16}$/);
    return Number.isSafeInteger(value) && value >= min && value <= max ? value : undefined;
  });
}

function fraction(env: string, fallback: number, doc: string): ConfigField<number> {
  return checked(env, fallback, doc, 'a number from 0 to 1', (raw) => {
    const value = numeric(raw, /^(0|1|0?\.[0-9]+|1\.0*)$/);
    return value >= 0 && value <= 1 ? value : undefined;
  });
}

/** `true`/`1`/`yes`/`on` and their opposites, any case; undefined for anything else. */
export function parseOnOff(raw: unknown): boolean | undefined {
  if (typeof raw === 'boolean') return raw;
  const value = trimmed(raw)?.toLowerCase() ?? '';
  return ['true', '1', 'yes', 'on'].includes(value) ? true : ['false', '0', 'no', 'off'].includes(value) ? false : undefined;
}

function flag(env: string, fallback: boolean, doc: string): ConfigField<boolean> {
  return checked(env, fallback, doc, 'true or false (also 1/0, yes/no, on/off)', parseOnOff, { boolean: true });
}

function oneOf<T extends string>(env: string, fallback: T, values: readonly T[], doc: string): ConfigField<T> {
  return checked(env, fallback, doc, `one of ${values.join(', ')}`, (raw) => values.find((v) => v === trimmed(raw)));
}

/** A backend URL: only the scheme is checked here; the store or registry checks the rest when it opens. */
function backendUrl(env: string, fallback: string, schemes: readonly string[], doc: string): ConfigField<string> {
  return checked(env, fallback, doc, `a URL starting with ${schemes.map((s) => `${s}:`).join(', ')}`, (raw) => {
    const value = trimmed(raw) ?? '';
    const scheme = /^([a-z][a-z0-9+.-]*):./i.exec(value)?.[1]?.toLowerCase();
    return scheme !== undefined && schemes.includes(scheme) ? value : undefined;
  });
}

function bearerToken(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length < MIN_TOKEN_LENGTH || !TOKEN_PATTERN.test(value)) {
    throw new Problem(`${what} must be at least ${MIN_TOKEN_LENGTH} characters of A-Z a-z 0-9 - . _ ~ + / (optionally ending in =)`);
  }
  return value;
}

function tagPatterns(value: unknown): string[] {
  const list = typeof value === 'string' ? value.split('|') : value;
  if (!Array.isArray(list) || list.length === 0) throw new Problem('a token\'s tags must be a non-empty list');
  return list.map((tag: unknown) => {
    const ok = typeof tag === 'string' && (tag === '*' || TAG_PATTERN.test(tag.endsWith('*') ? `${tag.slice(0, -1)}x` : tag));
    if (!ok) throw new Problem(`tag "${String(tag)}" must be a tag name (${TAG_PATTERN.source}), a prefix ending in *, or *`);
    return tag;
  });
}

/** One token entry: `TOKEN`, `TOKEN:tag1|tag2|prefix*`, or (in files) `{ token, tags }`. */
function tokenRule(entry: unknown): TokenRule {
  if (typeof entry === 'string') {
    const colon = entry.indexOf(':');
    if (colon < 0) return { token: bearerToken(entry.trim(), 'a token'), tags: ['*'] };
    return { token: bearerToken(entry.slice(0, colon).trim(), 'a token'), tags: tagPatterns(entry.slice(colon + 1).trim()) };
  }
  if (entry !== null && typeof entry === 'object' && !Array.isArray(entry)) {
    const { token, tags, ...rest } = entry as Record<string, unknown>;
    const extra = Object.keys(rest)[0];
    if (extra !== undefined) throw new Problem(`unknown field "${extra}" in a token entry (allowed: token, tags)`);
    return { token: bearerToken(token, 'a token'), tags: tags === undefined ? ['*'] : tagPatterns(tags) };
  }
  throw new Problem('each token must be a string or { token, tags }');
}

const TOKENS_ALLOWED = `a comma-separated list of TOKEN or TOKEN:tag1|tag2|prefix* (in a file also a list of { token, tags }); tokens are at least ${MIN_TOKEN_LENGTH} characters`;

const tokens = field<readonly TokenRule[]>({
  env: 'IDMINT_TOKENS',
  default: [],
  doc: 'Bearer tokens for the ID and tag routes; a token may be limited to some tags. None: auth off.',
  allowed: TOKENS_ALLOWED,
  secret: true,
  parse(raw) {
    const entries = typeof raw === 'string' ? raw.split(',').map((s) => s.trim()).filter((s) => s !== '') : raw;
    if (!Array.isArray(entries)) throw new Problem(`must be ${TOKENS_ALLOWED}`);
    const rules = entries.map(tokenRule);
    const seen = new Set<string>();
    for (const rule of rules) {
      if (seen.has(rule.token)) throw new Problem('the same token is listed twice');
      seen.add(rule.token);
    }
    return rules;
  },
});

const adminToken = field<string>({
  env: 'IDMINT_ADMIN_TOKEN',
  default: '',
  doc: 'Bearer token for creating and changing tags over HTTP; it may also use every other route. Empty: with auth on, nobody may.',
  allowed: `empty, or at least ${MIN_TOKEN_LENGTH} characters of A-Z a-z 0-9 - . _ ~ + /`,
  secret: true,
  parse(raw) {
    if (raw === '' || raw === undefined) return '';
    return bearerToken(typeof raw === 'string' ? raw.trim() : raw, 'the admin token');
  },
});

// The schemes the store and registry openers accept; they check the rest of the URL at start-up.
const SEGMENT_SCHEMES = ['sqlite', 'postgres', 'postgresql', 'mysql', 'redis'] as const;
const REGISTRY_SCHEMES = ['static', 'zookeeper', 'etcd', 'redis', 'rediss', 'sqlite', 'postgres', 'postgresql', 'mysql'] as const;
/** The generator's rollback policies, plus the worker's own `switch-worker`. */
type WorkerRollbackPolicy = RollbackPolicyName | 'switch-worker';
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** The configuration schema. Nesting is the nesting of config files. */
export const CONFIG_SCHEMA = {
  host: text('IDMINT_HOST', '127.0.0.1', 'Address to listen on; 0.0.0.0 or :: for every interface.', {
    pattern: /^[A-Za-z0-9.:%_-]+$/,
    allowed: 'an IP address or host name',
  }),
  port: integer('IDMINT_PORT', 8080, 0, 65535, 'TCP port to listen on; 0 picks a free one (logged at start).'),
  api: {
    maxBatch: integer('IDMINT_MAX_BATCH', 10_000, 1, 1_000_000, 'Largest `count` a batch request may ask for.'),
    bodyLimit: integer('IDMINT_BODY_LIMIT', 16_384, 256, 1_048_576, 'Largest request body, in bytes (only the tag routes take one).'),
    requestTimeoutMs: integer('IDMINT_REQUEST_TIMEOUT_MS', 10_000, 0, 3_600_000, 'Time to receive a whole request before the connection is closed (0: no limit).'),
    keepAliveTimeoutMs: integer('IDMINT_KEEP_ALIVE_TIMEOUT_MS', 72_000, 1, 3_600_000, 'How long an idle keep-alive connection stays open; keep it above your load balancer\'s idle timeout.'),
    shutdownTimeoutMs: integer('IDMINT_SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000, 'On SIGTERM/SIGINT, how long in-flight requests may take before connections are closed anyway.'),
  },
  auth: { tokens, adminToken },
  segment: {
    enabled: flag('IDMINT_SEGMENT_ENABLED', true, 'Serve segment mode (`/api/segment`, `/v1/segment`, `/v1/tags`).'),
    store: backendUrl('IDMINT_SEGMENT_STORE', 'sqlite:./data/idmint.db', SEGMENT_SCHEMES, 'Where tags and their ranges live: sqlite:FILE, sqlite::memory:, postgres://, mysql:// (MySQL and MariaDB), redis://.'),
    table: text('IDMINT_SEGMENT_TABLE', 'leaf_alloc', 'Table (SQL) or key prefix (Redis) of the tags; Leaf\'s own `leaf_alloc` by default, so a Leaf database works as is.', {
      pattern: SQL_IDENTIFIER,
      allowed: SQL_IDENTIFIER_RULE,
    }),
    timeoutMs: integer('IDMINT_SEGMENT_TIMEOUT_MS', 3000, 1, 600_000, 'Each store call is abandoned after this long (STORE_UNAVAILABLE); a range whose allocation timed out is skipped, never guessed.'),
    poolSize: integer('IDMINT_SEGMENT_POOL_SIZE', 10, 1, 1000, 'Database connections in the pool (PostgreSQL, MySQL).'),
    prefetchThreshold: fraction('IDMINT_SEGMENT_PREFETCH_THRESHOLD', 0.1, 'Share of a range issued before the next one is loaded in the background (Leaf: 10%).'),
    waitTimeoutMs: integer('IDMINT_SEGMENT_WAIT_TIMEOUT_MS', 2000, 1, 600_000, 'How long a request waits for a range being loaded before SEGMENTS_NOT_READY.'),
    retryAfterMs: integer('IDMINT_SEGMENT_RETRY_AFTER_MS', 1000, 0, 600_000, 'After a failed load, how long requests that find nothing buffered fail fast before the store is tried again.'),
    tagRefreshMs: integer('IDMINT_SEGMENT_TAG_REFRESH_MS', 60_000, 0, 86_400_000, 'How often the tag list is re-read (tags created elsewhere appear, deleted ones go); 0: never.'),
    maxStep: integer('IDMINT_SEGMENT_MAX_STEP', 1_000_000, 1, 2 ** 31 - 1, 'The dynamic step never grows past this, unless a tag\'s own step is larger (Leaf: 1,000,000).'),
    rangeDurationMs: integer('IDMINT_SEGMENT_RANGE_DURATION_MS', 900_000, 1, 86_400_000, 'Target lifetime of a range: one used up faster doubles the step, one lasting over twice as long halves it (Leaf: 15 min).'),
  },
  snowflake: {
    enabled: flag('IDMINT_SNOWFLAKE_ENABLED', true, 'Serve snowflake mode (`/api/snowflake`, `/v1/snowflake`).'),
    registry: backendUrl('IDMINT_WORKER_REGISTRY', 'static:0', REGISTRY_SCHEMES, 'Where the worker ID is leased: static:N, zookeeper://host:2181/name, etcd://host:2379/name, redis://host:6379/0, or a postgres://, mysql:// or sqlite: URL.'),
    cluster: text('IDMINT_WORKER_CLUSTER', 'idmint', 'Cluster name for the redis:// and SQL registries: worker IDs are unique within it. ZooKeeper and etcd take it from the URL path.', {
      pattern: /^[A-Za-z0-9_.-]{1,128}$/,
      allowed: '1 to 128 of A-Z a-z 0-9 _ . -',
    }),
    table: text('IDMINT_WORKER_TABLE', 'worker_node', 'Table of the SQL registry.', {
      pattern: SQL_IDENTIFIER,
      allowed: SQL_IDENTIFIER_RULE,
    }),
    stateDir: text('IDMINT_WORKER_STATE_DIR', './data', 'static: directory of the state file that keeps the worker\'s last timestamp across restarts.', {
      pattern: /^[^\0]+$/,
      allowed: 'a directory path',
    }),
    leaseTtlMs: integer('IDMINT_LEASE_TTL_MS', 0, 0, 3_600_000, 'Lease lifetime: a node that cannot renew stops issuing before it ends, and its worker ID is free after it. 0: the registry\'s default (10 s; 3 s for static).'),
    registryTimeoutMs: integer('IDMINT_REGISTRY_TIMEOUT_MS', 5000, 1, 600_000, 'Bound on connecting to the registry and on each round trip (REGISTRY_UNAVAILABLE).'),
    cacheFile: checked(
      'IDMINT_WORKER_CACHE_FILE',
      '',
      'Leaf\'s weak dependency: keep the worker ID in this local file so the node can restart while the coordinator is down (read docs/workers.md first). Empty: off.',
      'empty, or a file path',
      (raw) => (typeof raw === 'string' ? raw.trim() : undefined),
    ),
    peerClockCheck: oneOf<PeerClockCheck>('IDMINT_PEER_CLOCK_CHECK', 'refuse', ['refuse', 'warn', 'off'], 'At start-up, compare the clock with the live peers\' (Leaf\'s check): refuse to start, warn, or skip when it is off by more than maxPeerSkewMs.'),
    maxPeerSkewMs: integer('IDMINT_MAX_PEER_SKEW_MS', 5000, 0, 86_400_000, 'Largest distance allowed from the mean of the live peers\' clocks (Leaf: 5 s).'),
    layout: oneOf('IDMINT_LAYOUT', DEFAULT_LAYOUT, LAYOUT_PRESETS, 'Bit layout preset (docs/layouts.md); every node of a cluster must use the same.'),
    datacenterId: integer('IDMINT_DATACENTER_ID', 0, 0, 2 ** 31 - 1, 'Datacenter ID, for layouts with a datacenter field (`twitter`).'),
    sequenceSpread: integer('IDMINT_SEQUENCE_SPREAD', 0, 0, 2 ** 29, 'Start each millisecond\'s sequence at a random value below this (Leaf uses 100), so low-traffic IDs are not all even.'),
    rollback: {
      policy: oneOf<WorkerRollbackPolicy>('IDMINT_ROLLBACK_POLICY', 'wait', [...ROLLBACK_POLICIES, 'switch-worker'], 'What to do when the clock goes back (docs/layouts.md#clock-rollback); `switch-worker` waits out small rollbacks and moves to another worker ID on a larger one.'),
      maxBackwardMs: integer('IDMINT_ROLLBACK_MAX_BACKWARD_MS', 5, 0, 1000, '`wait`: the largest rollback that is waited out.'),
      maxLeadMs: integer('IDMINT_ROLLBACK_MAX_LEAD_MS', 1000, 0, 86_400_000, '`borrow`: how far issued time may run ahead of the clock.'),
      maxWaitMs: integer('IDMINT_ROLLBACK_MAX_WAIT_MS', 10, 0, 1000, '`borrow`: how long to wait for the clock once the lead is used up.'),
      historyMs: integer('IDMINT_ROLLBACK_HISTORY_MS', 2000, 0, 600_000, '`history`: the window of remembered sequences.'),
    },
  },
  metrics: {
    enabled: flag('IDMINT_METRICS', true, 'Serve Prometheus metrics at `/metrics`.'),
  },
  log: {
    level: oneOf('IDMINT_LOG_LEVEL', 'info', LOG_LEVELS, 'Least severe log level written (JSON lines on stdout).'),
    requests: flag('IDMINT_LOG_REQUESTS', false, 'Log one line per request. Off by default: at these request rates it costs throughput.'),
  },
} as const satisfies Schema;

/** The validated, frozen server configuration. */
export type ServerConfig = ConfigOf<typeof CONFIG_SCHEMA>;

/** A configuration key, flattened: `segment.store`, with its field. */
export interface ConfigKey {
  readonly key: string;
  readonly flag: string;
  readonly spec: ConfigField<unknown>;
}

/** Every key of the schema, in schema order. */
export function configKeys(schema: Schema = CONFIG_SCHEMA): ConfigKey[] {
  const keys: ConfigKey[] = [];
  const walk = (node: Schema, prefix: string) => {
    for (const [name, child] of Object.entries(node)) {
      const key = prefix === '' ? name : `${prefix}.${name}`;
      if (isField(child)) keys.push({ key, flag: flagName(child.env), spec: child });
      else walk(child, key);
    }
  };
  walk(schema, '');
  return keys;
}

function isField(node: ConfigField<unknown> | Schema): node is ConfigField<unknown> {
  return (node as { field?: unknown }).field === true;
}

/** `IDMINT_SEGMENT_STORE` -> `segment-store`. */
export function flagName(env: string): string {
  return env.replace(/^IDMINT_/, '').toLowerCase().replaceAll('_', '-');
}

/** Where a value came from, for messages and `idmint config check`. */
export type ConfigOrigin = 'default' | { readonly file: string } | { readonly env: string } | { readonly flag: string };

/** What {@link loadConfig} reads. Nothing is read from the process unless passed in. */
export interface ConfigSources {
  /** Path of a JSON or YAML config file. */
  readonly file?: string;
  /** An already parsed config object, as a file would hold it (tests, embedding). */
  readonly values?: unknown;
  /** Environment variables; pass `process.env` to use the process's. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** CLI flags by name without dashes (`segment-store`); booleans for on/off flags. */
  readonly flags?: Readonly<Record<string, string | boolean | undefined>>;
}

/** A loaded configuration and where each key's value came from. */
export interface LoadedConfig {
  readonly config: ServerConfig;
  readonly origins: ReadonlyMap<string, ConfigOrigin>;
}

/**
 * Reads, merges (file < env < flags) and validates the configuration. Throws CONFIG_INVALID
 * naming the key, the value, where it came from and what is allowed.
 */
export function loadConfig(sources: ConfigSources = {}): LoadedConfig {
  const keys = configKeys();
  // Lowest precedence first; each layer says where a key's value came from, or undefined.
  const layers: ((key: ConfigKey) => { raw: unknown; origin: ConfigOrigin } | undefined)[] = [];
  const fromObject = (values: unknown, where: string) => {
    checkKnownKeys(values, CONFIG_SCHEMA, '', where);
    layers.push((k) => {
      const raw = lookup(values, k.key);
      return raw === undefined ? undefined : { raw, origin: { file: where } };
    });
  };
  if (sources.file !== undefined) fromObject(readConfigFile(sources.file), sources.file);
  if (sources.values !== undefined) fromObject(sources.values, 'config values');
  const env = sources.env;
  if (env !== undefined) {
    // An empty variable counts as unset, the way shells and container platforms pass them.
    layers.push((k) => {
      const raw = env[k.spec.env];
      return raw === undefined || raw === '' ? undefined : { raw, origin: { env: k.spec.env } };
    });
  }
  const flags = sources.flags;
  if (flags !== undefined) {
    layers.push((k) => {
      const raw = flags[k.flag];
      return raw === undefined ? undefined : { raw, origin: { flag: `--${k.flag}` } };
    });
  }

  const flat = new Map<string, unknown>();
  const origins = new Map<string, ConfigOrigin>();
  for (const key of keys) {
    let value: unknown = key.spec.default;
    let origin: ConfigOrigin = 'default';
    // Only the winning value is checked: a file value overridden by an env var does not matter.
    for (let i = layers.length - 1; i >= 0; i--) {
      const found = layers[i]?.(key);
      if (found === undefined) continue;
      origin = found.origin;
      try {
        value = key.spec.parse(found.raw);
      } catch (error) {
        if (!(error instanceof Problem)) throw error;
        throw invalid(key, found.raw, origin, error.message);
      }
      break;
    }
    flat.set(key.key, value);
    origins.set(key.key, origin);
  }
  const config = deepFreeze(nest(flat)) as ServerConfig;
  checkCombination(config, origins);
  return { config, origins };
}

/** A configuration from an object shaped like a config file, defaults for the rest (tests, embedding). */
export function defineConfig(values: unknown = {}): ServerConfig {
  return loadConfig({ values }).config;
}

function readConfigFile(file: string): unknown {
  const ext = extname(file).toLowerCase();
  if (ext !== '.json' && ext !== '.yaml' && ext !== '.yml') {
    throw new IdMintError('CONFIG_INVALID', `config file ${file}: must end in .json, .yaml or .yml`);
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new IdMintError('CONFIG_INVALID', `config file ${file}: cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { cause: error });
  }
  let values: unknown;
  try {
    values = ext === '.json' ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new IdMintError('CONFIG_INVALID', `config file ${file}: not valid ${ext === '.json' ? 'JSON' : 'YAML'}: ${firstLine(error)}`, { cause: error });
  }
  // An empty YAML file is a config with every default.
  return values ?? {};
}

function checkKnownKeys(values: unknown, schema: Schema, prefix: string, where: string): void {
  if (values === null || typeof values !== 'object' || Array.isArray(values)) {
    throw new IdMintError('CONFIG_INVALID', `${where}: ${prefix === '' ? 'the top level' : `"${prefix}"`} must be an object of keys, got ${describe(values)}`);
  }
  for (const [name, value] of Object.entries(values)) {
    const key = prefix === '' ? name : `${prefix}.${name}`;
    const node = Object.hasOwn(schema, name) ? schema[name] : undefined;
    if (node === undefined) {
      throw new IdMintError('CONFIG_INVALID', `${where}: unknown key "${key}"; known keys${prefix === '' ? '' : ` under "${prefix}"`}: ${Object.keys(schema).join(', ')}`);
    }
    if (!isField(node)) checkKnownKeys(value, node, key, where);
  }
}

function lookup(values: unknown, key: string): unknown {
  let node = values;
  for (const part of key.split('.')) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node === null ? undefined : node;
}

function nest(flat: ReadonlyMap<string, unknown>): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [key, value] of flat) {
    const parts = key.split('.');
    let node = root;
    for (const part of parts.slice(0, -1)) node = (node[part] ??= {}) as Record<string, unknown>;
    node[parts[parts.length - 1] ?? key] = value;
  }
  return root;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/** Rules between keys, checked once every key is valid on its own. */
function checkCombination(config: ServerConfig, origins: ReadonlyMap<string, ConfigOrigin>): void {
  const keys = new Map(configKeys().map((k) => [k.key, k]));
  const fail = (key: string, value: unknown, message: string): never => {
    const spec = keys.get(key);
    if (spec === undefined) throw new Error(`no config key ${key}`);
    throw invalid(spec, value, origins.get(key) ?? 'default', message);
  };
  if (!config.segment.enabled && !config.snowflake.enabled) {
    fail('snowflake.enabled', false, 'segment mode and snowflake mode cannot both be off');
  }
  const layout = getLayout(config.snowflake.layout);
  if (config.snowflake.datacenterId > layout.maxDatacenterId) {
    fail('snowflake.datacenterId', config.snowflake.datacenterId, `layout "${layout.name}" allows datacenter IDs from 0 to ${layout.maxDatacenterId}`);
  }
  const maxSpread = Math.floor((layout.maxSequence + 1) / 2);
  if (config.snowflake.sequenceSpread > maxSpread) {
    fail('snowflake.sequenceSpread', config.snowflake.sequenceSpread, `layout "${layout.name}" allows a spread from 0 to ${maxSpread} (half its sequence space)`);
  }
  if (config.auth.adminToken !== '' && config.auth.tokens.some((rule) => rule.token === config.auth.adminToken)) {
    fail('auth.adminToken', config.auth.adminToken, 'must differ from every token in auth.tokens');
  }
  // The core validates the policy's bounds once more; a failure there is still a config error.
  try {
    const { policy, ...bounds } = config.snowflake.rollback;
    resolveRollbackPolicy({ ...bounds, policy: policy === 'switch-worker' ? 'wait' : policy });
  } catch (error) {
    fail('snowflake.rollback.policy', config.snowflake.rollback.policy, firstLine(error));
  }
}

function invalid(key: ConfigKey, raw: unknown, origin: ConfigOrigin, problem: string): IdMintError {
  const shown = key.spec.secret === true ? '(hidden)' : describe(raw);
  return new IdMintError('CONFIG_INVALID', `invalid configuration: ${key.key} = ${shown} (${originText(origin)}): ${problem}`, {
    details: { key: key.key, env: key.spec.env },
  });
}

/** "from IDMINT_PORT", "from --port", "from idmint.yaml", "default". */
export function originText(origin: ConfigOrigin): string {
  if (origin === 'default') return 'default';
  if ('env' in origin) return `from ${origin.env}`;
  if ('flag' in origin) return `from ${origin.flag}`;
  return `from ${origin.file}`;
}

/** A value as shown in messages and `config check`; secrets are hidden. */
export function showValue(key: ConfigKey, value: unknown): string {
  if (key.spec.secret === true) {
    if (Array.isArray(value)) return value.length === 0 ? '(none)' : `(${value.length} hidden)`;
    return value === '' ? '(none)' : '(hidden)';
  }
  return describe(value);
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 200 ? `${value.slice(0, 200)}...` : value);
  if (value === undefined) return 'nothing';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0] ?? message;
}
