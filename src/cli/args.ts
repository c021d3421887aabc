import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { IdMintError } from '../core/errors.ts';

/** Flag values as parsed: strings for string flags, booleans for boolean ones; absent when not given. */
export type FlagValues<T extends ParseArgsOptionsConfig> = { [K in keyof T]?: T[K]['type'] extends 'boolean' ? boolean : string } & { help?: boolean };

/** Strict flag parsing: unknown flags, missing values and extra positionals are one-line errors. */
export function parseCommandArgs<T extends ParseArgsOptionsConfig>(
  argv: readonly string[],
  options: T,
  positionals: { readonly min: number; readonly max: number; readonly name?: string },
): { values: FlagValues<T>; positionals: string[] } {
  // A token like "-5" is a (negative) value, not a flag: pass it through as a positional so the
  // command can say what is wrong with it instead of "unknown option".
  const numeric = argv.filter((arg) => /^-[0-9]/.test(arg));
  const args = argv.filter((arg) => !/^-[0-9]/.test(arg));
  let parsed: { values: FlagValues<T>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...args, ...(numeric.length > 0 && !args.includes('--') ? ['--'] : []), ...numeric], options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, allowNegative: true, strict: true }) as typeof parsed;
  } catch (error) {
    // node:util's messages are multi-line and mention internals; keep the first sentence.
    const message = error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error);
    throw new IdMintError('INVALID_ARGUMENT', message.replace(/\. To specify a positional argument.*$/, ''));
  }
  if (parsed.values.help !== true) {
    const count = parsed.positionals.length;
    if (count < positionals.min) throw new IdMintError('INVALID_ARGUMENT', `missing argument <${positionals.name ?? 'arg'}>`);
    if (count > positionals.max) throw new IdMintError('INVALID_ARGUMENT', `unexpected argument "${parsed.positionals[positionals.max]}"`);
  }
  return parsed;
}

/** Parses an integer flag strictly (digits only) within [min, max]. */
export function integerFlag(flag: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  const value = /^[0-9]{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new IdMintError('INVALID_ARGUMENT', `--${flag} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}
