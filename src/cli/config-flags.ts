import type { ParseArgsOptionsConfig } from 'node:util';
import { configKeys, loadConfig, parseOnOff, type LoadedConfig } from '../server/config.ts';

/**
 * Every configuration key as a CLI flag (`IDMINT_SEGMENT_STORE` is `--segment-store`), plus
 * `--config FILE`, for the commands that read the server configuration (serve, config check, tags).
 */
export function configFlagOptions(): ParseArgsOptionsConfig {
  const options: ParseArgsOptionsConfig = { config: { type: 'string', short: 'c' } };
  for (const key of configKeys()) options[key.flag] = { type: key.spec.boolean === true ? 'boolean' : 'string' };
  return options;
}

/**
 * Lets on/off flags also be written with a value, `--log-requests=false`, the way env vars are:
 * node:util's parser knows only `--log-requests` and `--no-log-requests`.
 */
export function normalizeBooleanFlags(argv: readonly string[]): string[] {
  const booleans = new Set(configKeys().filter((k) => k.spec.boolean === true).map((k) => k.flag));
  return argv.map((arg) => {
    const match = /^--([a-z-]+)=(.*)$/.exec(arg);
    if (match === null || !booleans.has(match[1] ?? '')) return arg;
    const value = parseOnOff(match[2]);
    return value === undefined ? arg : value ? `--${match[1]}` : `--no-${match[1]}`;
  });
}

/** The help lines for the configuration flags, generated from the schema so they cannot drift. */
export function configFlagHelp(): string {
  const rows = configKeys().map((key) => {
    const name = key.spec.boolean === true ? `--[no-]${key.flag}` : `--${key.flag} V`;
    const fallback = key.spec.secret === true ? '' : ` (default ${JSON.stringify(key.spec.default)})`;
    return `      ${name.padEnd(34)}${key.spec.env}${fallback}`;
  });
  return [
    '  -c, --config FILE                     config file, JSON or YAML (also IDMINT_CONFIG)',
    ...rows,
    '',
    'Precedence: config file < environment variables < flags. docs/configuration.md describes',
    'every key, its default and what it allows.',
  ].join('\n');
}

/** Loads the configuration from `--config`/IDMINT_CONFIG, the process environment and the flags given. */
export function configFromFlags(values: Readonly<Record<string, string | boolean | undefined>>): LoadedConfig {
  const file = typeof values['config'] === 'string' ? values['config'] : process.env['IDMINT_CONFIG'] || undefined;
  const flags: Record<string, string | boolean> = {};
  for (const key of configKeys()) {
    const value = values[key.flag];
    if (value !== undefined) flags[key.flag] = value;
  }
  return loadConfig({ ...(file === undefined ? {} : { file }), env: process.env, flags });
}
