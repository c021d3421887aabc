import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import type { TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import { parse as parseYaml } from 'yaml';
import { IdMintError } from '../core/errors.ts';
import { backendUrlProblem } from '../backends/catalog.ts';
import { redactUrl } from '../shared/connection-url.ts';
import { compileKey, problemWith, readValue } from './read.ts';
import type { RuleCheck } from './rules.ts';
import {
  CONFIG_RULES,
  ConfigSchema,
  configKeys,
  propertiesOf,
  type ConfigKey,
  type ServerConfig,
} from './schema.ts';

/**
 * Loading the configuration: three sources, later ones winning (a config file, environment
 * variables, CLI flags), each key's winning value read and checked against its schema, then the
 * rules between keys, then frozen. Nothing is read from the process unless it is passed in.
 */

/** Where a value came from, for messages and `idmint config check`. */
export type ConfigOrigin =
  | 'default'
  | { readonly file: string }
  | { readonly env: string }
  | { readonly flag: string };

/** What {@link loadConfig} reads. */
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

/** One source's value for a key, if it has one. */
type Layer = (key: ConfigKey) => { raw: unknown; origin: ConfigOrigin } | undefined;

/**
 * Reads, merges (file < env < flags) and validates the configuration. Throws CONFIG_INVALID
 * naming the key, the value, where it came from and what is allowed.
 */
export function loadConfig(sources: ConfigSources = {}): LoadedConfig {
  // Lowest precedence first.
  const layers: Layer[] = [];
  const fromObject = (values: unknown, where: string) => {
    checkKnownKeys(values, ConfigSchema, '', where);
    layers.push((k) => {
      const raw = lookup(values, k.key);
      return raw === undefined ? undefined : { raw, origin: { file: where } };
    });
  };
  if (sources.file !== undefined) fromObject(readConfigFile(sources.file), sources.file);
  if (sources.values !== undefined) fromObject(sources.values, 'config values');
  const env = sources.env;
  if (env !== undefined) {
    // An empty variable counts as unset, the way shells and container platforms pass them. The
    // key's own variable wins over a platform's (IDMINT_PORT over PORT).
    layers.push((k) => {
      for (const name of [k.spec.env, k.spec.fallbackEnv]) {
        const raw = name === undefined ? undefined : env[name];
        if (name !== undefined && raw !== undefined && raw !== '')
          return { raw, origin: { env: name } };
      }
      return undefined;
    });
  }
  const flags = sources.flags;
  if (flags !== undefined) {
    layers.push((k) => {
      const raw = flags[k.flag];
      return raw === undefined ? undefined : { raw, origin: { flag: `--${k.flag}` } };
    });
  }

  const keys = configKeys();
  const flat = new Map<string, unknown>();
  const origins = new Map<string, ConfigOrigin>();
  for (const key of keys) {
    // Only the winning value is checked: a file value overridden by an env var does not matter.
    const found = layers.reduceRight<ReturnType<Layer>>(
      (winner, layer) => winner ?? layer(key),
      undefined,
    );
    if (found === undefined) {
      flat.set(key.key, key.spec.default);
      origins.set(key.key, 'default');
      continue;
    }
    const value = readValue(key.schema['x-idmint'].text, found.raw);
    const problem = problemWith(compileKey(key.schema), value) ?? urlProblem(key, value);
    if (problem !== undefined) throw invalid(key, found.raw, found.origin, problem);
    flat.set(key.key, value);
    origins.set(key.key, found.origin);
  }
  const config = nest(flat);
  // Each key passed its own schema; the whole must then pass the composed one. A failure here is
  // a defect in the schema's composition, not in the input.
  const whole = Compile(ConfigSchema);
  if (!whole.Check(config))
    throw new Error(`configuration schema defect: ${JSON.stringify(whole.Errors(config)[0])}`);
  const frozen = deepFreeze(config) as ServerConfig;
  checkRules(frozen, new Map(keys.map((k) => [k.key, k])), origins);
  return { config: frozen, origins };
}

/**
 * A configuration from an object shaped like a config file, defaults for the rest (tests,
 * embedding).
 */
export function defineConfig(values: unknown = {}): ServerConfig {
  return loadConfig({ values }).config;
}

function checkRules(
  config: ServerConfig,
  keys: ReadonlyMap<string, ConfigKey>,
  origins: ReadonlyMap<string, ConfigOrigin>,
): void {
  const known = (key: string): ConfigKey => {
    const found = keys.get(key);
    if (found === undefined) throw new Error(`a configuration rule names no key: ${key}`);
    return found;
  };
  const check: RuleCheck = {
    fail(key, problem) {
      const value = key
        .split('.')
        .reduce<unknown>((node, part) => (node as Record<string, unknown>)[part], config);
      throw invalid(known(key), value, origins.get(key) ?? 'default', problem);
    },
    isSet(key) {
      known(key);
      return (origins.get(key) ?? 'default') !== 'default';
    },
  };
  for (const rule of CONFIG_RULES) rule(config, check);
}

function readConfigFile(file: string): unknown {
  const ext = extname(file).toLowerCase();
  if (ext !== '.json' && ext !== '.yaml' && ext !== '.yml') {
    throw new IdMintError(
      'CONFIG_INVALID',
      `config file ${file}: must end in .json, .yaml or .yml`,
    );
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new IdMintError(
      'CONFIG_INVALID',
      `config file ${file}: cannot be read ` +
        `(${(error as NodeJS.ErrnoException).code ?? String(error)})`,
      { cause: error },
    );
  }
  let values: unknown;
  try {
    values = ext === '.json' ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new IdMintError(
      'CONFIG_INVALID',
      `config file ${file}: not valid ${ext === '.json' ? 'JSON' : 'YAML'}: ${firstLine(error)}`,
      { cause: error },
    );
  }
  // An empty YAML file is a config with every default.
  return values ?? {};
}

/**
 * A typo in a file is an error, not a silently ignored setting: the message lists the known keys.
 */
function checkKnownKeys(values: unknown, schema: TSchema, prefix: string, where: string): void {
  if (values === null || typeof values !== 'object' || Array.isArray(values)) {
    throw new IdMintError(
      'CONFIG_INVALID',
      `${where}: ${prefix === '' ? 'the top level' : `"${prefix}"`} must be an object of ` +
        `keys, got ${describe(values)}`,
    );
  }
  const properties = propertiesOf(schema) ?? {};
  for (const [name, value] of Object.entries(values)) {
    const key = prefix === '' ? name : `${prefix}.${name}`;
    const node = Object.hasOwn(properties, name) ? properties[name] : undefined;
    if (node === undefined) {
      throw new IdMintError(
        'CONFIG_INVALID',
        `${where}: unknown key "${key}"; known ` +
          `keys${prefix === '' ? '' : ` under "${prefix}"`}: ` +
          `${Object.keys(properties).join(', ')}`,
      );
    }
    if (propertiesOf(node) !== undefined) checkKnownKeys(value, node, key, where);
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
    for (const part of parts.slice(0, -1)) {
      node[part] ??= {};
      node = node[part] as Record<string, unknown>;
    }
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

/**
 * What is wrong with a backend URL beyond its scheme (hosts, ports, a Redis database number...); in
 * a list, which one.
 */
function urlProblem(key: ConfigKey, value: unknown): string | undefined {
  const role = key.schema['x-idmint'].url;
  if (role === undefined) return undefined;
  if (!Array.isArray(value)) return backendUrlProblem(value, role);
  for (const [index, url] of value.entries()) {
    const problem = backendUrlProblem(url, role);
    if (problem !== undefined)
      return (
        `URL ${index} (${JSON.stringify(typeof url === 'string' ? redactUrl(url) : url)}) ` +
        `${problem}`
      );
    if (value.indexOf(url) !== index)
      return (
        `URL ${index} (${JSON.stringify(redactUrl(url))}) is listed twice; each database of a ` +
        `set is listed once`
      );
  }
  return undefined;
}

function invalid(key: ConfigKey, raw: unknown, origin: ConfigOrigin, problem: string): IdMintError {
  // A URL's password is never shown, in whatever key it is.
  const shown = key.spec.secret === true ? '(hidden)' : describe(redacted(raw));
  return new IdMintError(
    'CONFIG_INVALID',
    `invalid configuration: ${key.key} = ${shown} (${originText(origin)}): ${problem}`,
    {
      details: { key: key.key, env: key.spec.env },
    },
  );
}

/** A value with the password of every URL in it hidden (a URL, or a list of them). */
export function redacted(value: unknown): unknown {
  if (typeof value === 'string') return redactUrl(value);
  return Array.isArray(value)
    ? value.map((item: unknown) => (typeof item === 'string' ? redactUrl(item) : item))
    : value;
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
  if (typeof value === 'string')
    return JSON.stringify(value.length > 200 ? `${value.slice(0, 200)}...` : value);
  if (value === undefined) return 'nothing';
  // JSON would print NaN and Infinity (which YAML can hold) as null.
  if (typeof value === 'number') return String(value);
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
