import type { ParseArgsOptionsConfig } from 'node:util';
import { loadConfig, type LoadedConfig } from '../config/load.ts';
import { parseOnOff } from '../config/read.ts';
import { configKeys, type ConfigKey } from '../config/schema.ts';

/**
 * Every configuration key as a CLI flag (`IDMINT_SEGMENT_STORE` is `--segment-store`), plus
 * `--config FILE`, for the commands that read the server configuration (serve, config check, tags).
 */
export function configFlagOptions(): ParseArgsOptionsConfig {
  const options: ParseArgsOptionsConfig = { config: { type: 'string', short: 'c' } };
  for (const key of configKeys())
    options[key.flag] = { type: key.spec.boolean === true ? 'boolean' : 'string' };
  return options;
}

/**
 * Lets on/off flags also be written with a value, `--log-requests=false`, the way env vars are:
 * node:util's parser knows only `--log-requests` and `--no-log-requests`.
 */
export function normalizeBooleanFlags(argv: readonly string[]): string[] {
  const booleans = new Set(
    configKeys()
      .filter((k) => k.spec.boolean === true)
      .map((k) => k.flag),
  );
  return argv.map((arg) => {
    const match = /^--([a-z-]+)=(.*)$/.exec(arg);
    if (match === null || !booleans.has(match[1] ?? '')) return arg;
    const value = parseOnOff(match[2]);
    return value === undefined ? arg : value ? `--${match[1]}` : `--no-${match[1]}`;
  });
}

/**
 * The help lines for the configuration flags, generated from the schema so they cannot drift.
 * With `section` (`segment`), only that part's keys are listed, and a line says the rest are
 * accepted too: a command that uses only the store need not list the server's every key.
 */
export function configFlagHelp(section?: string): string {
  const rows = configFlagRows(
    configKeys().filter((key) => section === undefined || key.key.startsWith(`${section}.`)),
  );
  return [
    '  -c, --config FILE                     config file, JSON or YAML (also IDMINT_CONFIG)',
    ...rows,
    ...(section === undefined
      ? []
      : ['      (every other configuration flag of "idmint serve --help" is accepted too)']),
    '',
    'Precedence: config file < environment variables < flags (IDMINT_PORT before PORT).',
    'docs/configuration.md describes every key, its default and what it allows.',
  ].join('\n');
}

/** One help line per key: its flag, its variable and its default. */
export function configFlagRows(keys: readonly ConfigKey[]): string[] {
  return keys.map((key) => {
    const name = key.spec.boolean === true ? `--[no-]${key.flag}` : `--${key.flag} V`;
    const fallback =
      key.spec.secret === true ? '' : ` (default ${JSON.stringify(key.spec.default)})`;
    const variables =
      key.spec.fallbackEnv === undefined
        ? key.spec.env
        : `${key.spec.env} or ${key.spec.fallbackEnv}`;
    return `      ${name.padEnd(34)}${variables}${fallback}`;
  });
}

/**
 * Loads the configuration from `--config`/IDMINT_CONFIG, the process environment and the flags
 * given.
 */
export function configFromFlags(
  values: Readonly<Record<string, string | boolean | undefined>>,
): LoadedConfig {
  const file =
    typeof values['config'] === 'string'
      ? values['config']
      : process.env['IDMINT_CONFIG'] || undefined;
  const flags: Record<string, string | boolean> = {};
  for (const key of configKeys()) {
    const value = values[key.flag];
    if (value !== undefined) flags[key.flag] = value;
  }
  return loadConfig({ ...(file === undefined ? {} : { file }), env: process.env, flags });
}
