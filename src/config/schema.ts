import Type, { type Static, type TSchema } from 'typebox';
import { AUTH_RULES, AuthConfig } from './auth.ts';
import { flagName, isKeySchema, type KeySchema } from './keys.ts';
import { LogConfig, MetricsConfig } from './logging.ts';
import { OPAQUE_RULES, OpaqueConfig } from './opaque.ts';
import type { ConfigRule, Frozen } from './rules.ts';
import { SEGMENT_RULES, SegmentConfig } from './segment.ts';
import { ApiConfig, LISTEN_KEYS } from './server.ts';
import { SNOWFLAKE_RULES, SnowflakeConfig } from './snowflake.ts';

/**
 * idmint's configuration: one TypeBox schema per component, composed here into the whole. The
 * nesting is the nesting of config files; the TypeScript type is derived from the schema, so the
 * two cannot disagree. Used by the server (buildServer), the composition root (openBackends) and
 * the CLI (flags, `config check`); docs/configuration.md lists every key and a test keeps it in
 * step.
 */
export const ConfigSchema = Type.Object(
  {
    ...LISTEN_KEYS,
    api: ApiConfig,
    auth: AuthConfig,
    segment: SegmentConfig,
    snowflake: SnowflakeConfig,
    metrics: MetricsConfig,
    log: LogConfig,
    opaque: OpaqueConfig,
  },
  { additionalProperties: false },
);

/** The validated, frozen configuration. */
export type ServerConfig = Frozen<Static<typeof ConfigSchema>>;

/** A bearer token and the segment tags it may use (see auth.ts). */
export type TokenRule = ServerConfig['auth']['tokens'][number];

/** Rules between keys, in the order they are checked; each component's own first. */
export const CONFIG_RULES: readonly ConfigRule<ServerConfig>[] = [
  (config, check) => {
    if (!config.segment.enabled && !config.snowflake.enabled)
      check.fail('snowflake.enabled', 'segment mode and snowflake mode cannot both be off');
  },
  ...AUTH_RULES.map(
    (rule): ConfigRule<ServerConfig> =>
      (config, check) =>
        rule(config.auth, check),
  ),
  ...SEGMENT_RULES.map(
    (rule): ConfigRule<ServerConfig> =>
      (config, check) =>
        rule(config.segment, check),
  ),
  ...SNOWFLAKE_RULES.map(
    (rule): ConfigRule<ServerConfig> =>
      (config, check) =>
        rule(config.snowflake, check),
  ),
  ...OPAQUE_RULES.map(
    (rule): ConfigRule<ServerConfig> =>
      (config, check) =>
        rule(config.opaque, check),
  ),
];

/** A configuration key, flattened: `segment.store`, with its flag and schema. */
export interface ConfigKey {
  /** Dotted path, as in files: `snowflake.rollback.policy`. */
  readonly key: string;
  /** CLI flag without dashes, derived from the variable: `rollback-policy`. */
  readonly flag: string;
  /** The key's JSON Schema (TypeBox), with its bounds. */
  readonly schema: KeySchema;
  /** What docs, `--help` and `config check` show. */
  readonly spec: {
    readonly env: string;
    readonly fallbackEnv?: string;
    readonly default: unknown;
    readonly doc: string;
    readonly allowed: string;
    /** On/off keys: the flag takes no value (`--log-requests`, `--no-log-requests`). */
    readonly boolean?: true;
    readonly secret?: true;
  };
}

/** Every key of a schema (the whole configuration by default), in schema order. */
export function configKeys(schema: TSchema = ConfigSchema): ConfigKey[] {
  const keys: ConfigKey[] = [];
  const walk = (node: TSchema, prefix: string) => {
    for (const [name, child] of Object.entries(propertiesOf(node) ?? {})) {
      const key = prefix === '' ? name : `${prefix}.${name}`;
      if (isKeySchema(child)) keys.push(describeKey(key, child));
      else walk(child, key);
    }
  };
  walk(schema, '');
  return keys;
}

/** The properties of a component (an object schema), or undefined for a key. */
export function propertiesOf(schema: TSchema): Readonly<Record<string, TSchema>> | undefined {
  if (isKeySchema(schema)) return undefined;
  return (schema as { properties?: Record<string, TSchema> }).properties;
}

function describeKey(key: string, schema: KeySchema): ConfigKey {
  const info = schema['x-idmint'];
  return {
    key,
    flag: flagName(info.env),
    schema,
    spec: {
      env: info.env,
      ...(info.fallbackEnv === undefined ? {} : { fallbackEnv: info.fallbackEnv }),
      default: schema.default,
      doc: schema.description,
      allowed: info.allowed,
      ...(info.text === 'on-off' ? { boolean: true as const } : {}),
      ...(info.secret === true ? { secret: true as const } : {}),
    },
  };
}
