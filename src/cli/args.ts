import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { IdMintError } from '../core/errors.ts';

/**
 * Flag values as parsed: strings for string flags, booleans for boolean ones; absent when not
 * given.
 */
export type FlagValues<T extends ParseArgsOptionsConfig> = {
  [K in keyof T]?: T[K]['type'] extends 'boolean' ? boolean : string;
} & { help?: boolean };

/** Strict flag parsing: unknown flags, missing values and extra positionals are one-line errors. */
export function parseCommandArgs<T extends ParseArgsOptionsConfig>(
  argv: readonly string[],
  options: T,
  positionals: { readonly min: number; readonly max: number; readonly name?: string },
): { values: FlagValues<T>; positionals: string[] } {
  // A token like "-5" is a (negative) value, not a flag. After a flag that takes a value it is
  // that flag's value (`--count -5` is `--count=-5`), so the command can say what the flag allows
  // instead of node:util's "argument is ambiguous"; anywhere else it is a positional, so the
  // command can say what is wrong with it instead of "unknown option".
  const joined = joinNegativeValues(argv, options);
  const numeric = joined.filter((arg) => NEGATIVE.test(arg));
  const args = joined.filter((arg) => !NEGATIVE.test(arg));
  let parsed: { values: FlagValues<T>; positionals: string[] };
  try {
    parsed = parseArgs({
      args: [...args, ...(numeric.length > 0 && !args.includes('--') ? ['--'] : []), ...numeric],
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      allowNegative: true,
      strict: true,
    }) as typeof parsed;
  } catch (error) {
    // node:util's messages are multi-line and mention internals; keep the first sentence.
    const message =
      error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error);
    throw new IdMintError(
      'INVALID_ARGUMENT',
      message.replace(/\. To specify a positional argument.*$/, ''),
    );
  }
  if (parsed.values.help !== true) {
    const count = parsed.positionals.length;
    if (count < positionals.min)
      throw new IdMintError('INVALID_ARGUMENT', `missing argument <${positionals.name ?? 'arg'}>`);
    if (count > positionals.max)
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `unexpected argument "${parsed.positionals[positionals.max]}"`,
      );
  }
  return parsed;
}

/** A token that reads as a negative number (or starts like one): a value, never a flag. */
const NEGATIVE = /^-[0-9.]/;

/** `--flag -5` and `-f -5` as `--flag=-5`, for the flags that take a value. */
function joinNegativeValues(argv: readonly string[], options: ParseArgsOptionsConfig): string[] {
  const takesValue = (arg: string): string | undefined => {
    if (arg === '--') return undefined;
    const long = /^--([^=]+)$/.exec(arg)?.[1];
    if (long !== undefined) return options[long]?.type === 'string' ? long : undefined;
    const short = /^-([^-])$/.exec(arg)?.[1];
    return short === undefined
      ? undefined
      : Object.entries(options).find(
          ([, option]) => option.short === short && option.type === 'string',
        )?.[0];
  };
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const flag = takesValue(arg);
    const next = argv[i + 1];
    if (flag !== undefined && next !== undefined && NEGATIVE.test(next)) {
      out.push(`--${flag}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** Parses an integer flag strictly (digits only) within [min, max]. */
export function integerFlag(
  flag: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  if (raw === undefined) return fallback;
  const value = /^[0-9]{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `--${flag} must be an integer from ${min} to ${max}, got "${raw}"`,
    );
  }
  return value;
}
