import Type, { type Static } from 'typebox';
import { isIdMintError } from '../core/errors.ts';
import { OPAQUE_SEGMENT_DOMAIN, parseOpaqueKeys } from '../core/opaque.ts';
import { text } from './keys.ts';
import type { ConfigRule, Frozen } from './rules.ts';

/**
 * Opaque IDs (docs/formats.md, Opaque IDs): the secret AES keys that turn dense IDs into opaque
 * ones and back. A secret: never printed, logged, or put in an error, the OpenAPI document or
 * `config check` output.
 */

// Key IDs 1 to 8: an opaque segment ID's first digit is its key ID, and a 9 in front of 18 more
// digits would pass 2^63 - 1 (OPAQUE_SEGMENT_DOMAIN.maxKeyId). One key ID rule for both domains.
const MAX_KEY_ID = OPAQUE_SEGMENT_DOMAIN.maxKeyId;
const HEX_KEY = '(?:[0-9a-fA-F]{64}|[0-9a-fA-F]{48}|[0-9a-fA-F]{32})';
const ENTRY = `(?:[1-${MAX_KEY_ID}]\\s*:\\s*)?${HEX_KEY}`;

export const OpaqueConfig = Type.Object(
  {
    keys: text({
      env: 'IDMINT_OPAQUE_KEYS',
      default: '',
      doc:
        'Secret AES keys of opaque IDs, each with its key ID (the first digit of every opaque ' +
        'ID it makes); the highest ID makes new IDs, the others still decode. Empty: no ' +
        'opaque IDs. Set it in the environment or a file, not as a flag (flags show in ps).',
      pattern: new RegExp(`^$|^${ENTRY}(?:\\s*,\\s*${ENTRY})*$`),
      allowed:
        `empty, or a comma-separated list of <key ID ${1} to ${MAX_KEY_ID}>:<32, 48 or 64 hex ` +
        `digits> (AES-128, -192, -256); a single key may omit "1:"`,
      secret: true,
    }),
  },
  { additionalProperties: false },
);

/** Rules of the opaque keys: each key ID once, and every entry of a list with its ID. */
export const OPAQUE_RULES: readonly ConfigRule<Frozen<Static<typeof OpaqueConfig>>>[] = [
  (opaque, check) => {
    if (opaque.keys === '') return;
    let ids: number[];
    try {
      ids = parseOpaqueKeys(opaque.keys).map((key) => key.id);
    } catch (error) {
      // parseOpaqueKeys names the entry and what is wrong, never the key itself.
      if (isIdMintError(error)) check.fail('opaque.keys', error.message);
      throw error;
    }
    const twice = ids.find((id, index) => ids.indexOf(id) !== index);
    if (twice !== undefined)
      check.fail(
        'opaque.keys',
        `key ID ${twice} is given twice; each key needs an ID of its own, and an ID once ` +
          `given to a key must never name another`,
      );
  },
];
