import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { IdMintError } from '../core/errors.ts';
import { MIN_TOKEN_LENGTH } from './auth.ts';

/**
 * TinyId's tokens, as its `tiny_id_token` table holds them: one row per token and biz_type (one
 * token may have several rows), the token free text (`varchar(255)`). They live in a JSON file
 * (`auth.tinyidTokenFile`, written by `idmint db import --from-tinyid`), not in idmint's token
 * list, because they are TinyId's and not idmint's: any text, short ones too, valid only on the
 * TinyId routes and only for their biz_types, as TinyId's TinyIdTokenServiceImpl.canVisit allows.
 */

/** One row of TinyId's `tiny_id_token`: this token may draw from this biz_type. */
export interface TinyIdTokenRow {
  readonly token: string;
  readonly bizType: string;
}

/** `tiny_id_token.token` is `varchar(255)`: longer text cannot have come from TinyId. */
export const TINYID_TOKEN_MAX_LENGTH = 255;

/**
 * Below this many bits of guessing (length times the bits of the alphabet it draws from) a token
 * is called weak: idmint's own shortest token, 16 characters of RFC 6750's 66, has about 96.
 */
const WEAK_BITS = 80;

/** The key that names the file, for messages. */
const KEY = 'auth.tinyidTokenFile';

function invalid(path: string, problem: string): IdMintError {
  return new IdMintError('CONFIG_INVALID', `${KEY} ${JSON.stringify(path)}: ${problem}`);
}

/**
 * The rows of a TinyId token file: a JSON array of `{ "token": ..., "bizType": ... }` (extra
 * fields such as TinyId's `remark` are ignored). CONFIG_INVALID names the file and the row,
 * never a token.
 */
export function readTinyIdTokenFile(path: string): TinyIdTokenRow[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw invalid(path, `cannot be read (${reason})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw invalid(
      path,
      `is not JSON${syntaxWhere(error)} (a list of { "token": ..., "bizType": ... })`,
    );
  }
  return parseTinyIdTokenRows(parsed, path);
}

/**
 * Why the JSON parser stopped, as it said, when it said so by position (or that the text ended
 * early); never its other messages, which quote the text (and so could quote a token).
 */
function syntaxWhere(error: unknown): string {
  const message = error instanceof Error ? error.message : '';
  if (/^[^"]* in JSON at position \d+/.test(message)) return `: ${message}`;
  if (/end of JSON input/.test(message)) return ': unexpected end of JSON input';
  return '';
}

/** {@link readTinyIdTokenFile}'s check of parsed rows. */
export function parseTinyIdTokenRows(parsed: unknown, path: string): TinyIdTokenRow[] {
  if (!Array.isArray(parsed))
    throw invalid(path, 'must hold a list of { "token": ..., "bizType": ... }');
  return parsed.map((row: unknown, index) => {
    const where = `row ${index + 1}`;
    if (row === null || typeof row !== 'object' || Array.isArray(row))
      throw invalid(path, `${where} is not an object { "token": ..., "bizType": ... }`);
    const { token, bizType } = row as Record<string, unknown>;
    if (typeof token !== 'string' || token === '')
      throw invalid(path, `${where} has no token (TinyId answers an empty one "token is error")`);
    if ([...token].length > TINYID_TOKEN_MAX_LENGTH)
      throw invalid(path, `${where}'s token is longer than TinyId's ${TINYID_TOKEN_MAX_LENGTH}`);
    if (typeof bizType !== 'string' || bizType === '')
      throw invalid(path, `${where} has no bizType`);
    return { token, bizType };
  });
}

/** Each token with every biz_type its rows allow, in the order first seen. */
export function tokensByToken(rows: readonly TinyIdTokenRow[]): Map<string, Set<string>> {
  const byToken = new Map<string, Set<string>>();
  for (const row of rows) {
    const types = byToken.get(row.token) ?? new Set<string>();
    types.add(row.bizType);
    byToken.set(row.token, types);
  }
  return byToken;
}

/**
 * A name for a token in logs: the start of its SHA-256, never any of its characters (four
 * characters of a four-character token would be the token).
 */
export function tokenFingerprint(token: string): string {
  return `sha256:${createHash('sha256').update(token).digest('hex').slice(0, 12)}`;
}

/**
 * Why `token` is weak, or undefined: shorter than idmint's own tokens, or too few bits of
 * guessing for its alphabet (all digits, say). The reason names the length and the alphabet, not
 * the token.
 */
export function tokenWeakness(token: string): string | undefined {
  const chars = [...token];
  const classes: [RegExp, number, string][] = [
    [/[0-9]/, 10, 'digits'],
    [/[a-z]/, 26, 'lower-case letters'],
    [/[A-Z]/, 26, 'upper-case letters'],
    [/[^0-9a-zA-Z]/, 33, 'other characters'],
  ];
  const present = classes.filter(([pattern]) => chars.some((c) => pattern.test(c)));
  const alphabet = present.reduce((sum, [, size]) => sum + size, 0);
  const bits = Math.floor(chars.length * Math.log2(Math.max(alphabet, 2)));
  const short = chars.length < MIN_TOKEN_LENGTH;
  if (!short && bits >= WEAK_BITS) return undefined;
  const drawn = present.map(([, , name]) => name).join(', ');
  const length = `${chars.length} character${chars.length === 1 ? '' : 's'}`;
  const why = short ? `${length} (idmint's own tokens need ${MIN_TOKEN_LENGTH} or more)` : length;
  return `${why} of ${drawn}: about ${bits} bits, guessable below ${WEAK_BITS}`;
}
