import { IdMintError } from '../core/errors.ts';

/**
 * Input checks for path and query values, done by hand rather than by the JSON-schema validator:
 * they run on every ID request, where a regex test is all the budget allows, and they say exactly
 * what is wrong ("count must be an integer from 1 to 10000, got "1e3"") instead of a schema path.
 * The route contracts' schemas (src/contract/) document them in the OpenAPI document. Tags are
 * checked by core's checkTag, the one check every part of idmint shares.
 */

const DIGITS = /^[0-9]{1,16}$/;

/**
 * Parses `count` from a query string: absent means 1; otherwise plain digits in 1..max. "1e3",
 * "0x10", " 5" and "5.0" are refused rather than guessed at.
 */
export function parseCount(raw: unknown, max: number, name = 'count'): number {
  if (raw === undefined) return 1;
  const value = typeof raw === 'string' && DIGITS.test(raw) ? Number(raw) : Number.NaN;
  if (value >= 1 && value <= max) return value;
  const shown = Array.isArray(raw) ? 'more than one value' : `"${clip(String(raw))}"`;
  throw new IdMintError(
    'INVALID_ARGUMENT',
    `${name} must be an integer from 1 to ${max}, got ${shown}`,
  );
}

/** Shortens user input quoted back in a message, so a 10 kB tag does not become a 10 kB error. */
export function clip(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}...` : text;
}
