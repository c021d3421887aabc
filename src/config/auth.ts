import Type, { type Static } from 'typebox';
import { TAG_PATTERN } from '../core/segment-limits.ts';
import { duration, KEY, part, text, type KeyInfo } from './keys.ts';
import type { ConfigRule, Frozen } from './rules.ts';

/**
 * The auth component: bearer tokens for the ID and tag routes, each limited to some tags or not,
 * and the admin token for changing tags. Neither is ever printed.
 */

/** Long enough that guessing is hopeless; short tokens are a configuration mistake. */
export const MIN_TOKEN_LENGTH = 16;
// RFC 6750's b64token, so a token can be sent in an Authorization header as is.
const TOKEN_PATTERN = /^[A-Za-z0-9\-._~+/]+=*$/;
const TOKEN_RULE =
  `at least ${MIN_TOKEN_LENGTH} characters of A-Z a-z 0-9 - . _ ~ + / ` +
  '(optionally ending in =)';

// A tag name, or a prefix of one ending in `*`, or `*` alone: TAG_PATTERN's body with an optional
// star.
const TAG_BODY = TAG_PATTERN.source.replace(/^\^/, '').replace(/\$$/, '');
const TAG_OR_PREFIX = new RegExp(`^(?:\\*|${TAG_BODY}\\*?)$`);

const token = part(Type.String({ minLength: MIN_TOKEN_LENGTH, pattern: TOKEN_PATTERN.source }), {
  problem: `a token must be ${TOKEN_RULE}`,
});
const tag = part(Type.String({ pattern: TAG_OR_PREFIX.source }), {
  problem: `tag %s must be a tag name (${TAG_PATTERN.source}), a prefix ending in *, or *`,
});
const tags = part(Type.Array(tag, { minItems: 1 }), {
  problem: "a token's tags must be a non-empty list",
});
/**
 * A bearer token and the segment tags it may use: exact names, prefixes ending in `*`
 * (`order.*`), or `*` for every tag. Snowflake routes need only a valid token.
 */
const tokenEntry = part(Type.Object({ token, tags }, { additionalProperties: false }), {
  problem: 'each token must be a string or { token, tags }',
  name: 'a token entry',
});

const TOKENS_INFO: KeyInfo = {
  env: 'IDMINT_TOKENS',
  allowed:
    `a comma-separated list of TOKEN or TOKEN:tag1|tag2|prefix* (in a file also a list of { ` +
    `token, tags }); tokens are at least ${MIN_TOKEN_LENGTH} characters`,
  text: 'token-list',
  secret: true,
};

export const AuthConfig = Type.Object(
  {
    tokens: Type.Array(tokenEntry, {
      description:
        'Bearer tokens for the ID and tag routes; a token may be limited to some tags. ' +
        'None: auth off.',
      default: [],
      [KEY]: TOKENS_INFO,
    }),
    adminToken: text({
      env: 'IDMINT_ADMIN_TOKEN',
      default: '',
      doc:
        'Bearer token for creating and changing tags over HTTP; it may also use every other ' +
        'route. Empty: with auth on, nobody may.',
      pattern: new RegExp(`^$|^(?=.{${MIN_TOKEN_LENGTH},})${TOKEN_PATTERN.source.slice(1)}`),
      allowed: `empty, or ${TOKEN_RULE}`,
      secret: true,
    }),
    tinyidTokenFile: text({
      env: 'IDMINT_TINYID_TOKEN_FILE',
      default: '',
      doc:
        "TinyId's tokens (its tiny_id_token rows, as idmint db import --from-tinyid writes " +
        'them): each accepted as stored, any text, on the TinyId routes only (and the batches ' +
        'another node forwards for them) and only for its biz types; a weak one is named in a ' +
        'warning. Read again every auth.tinyidTokenReloadMs. Any token at start-up turns auth on.',
      pattern: /^.*$/,
      allowed: 'empty, or the path of a JSON file holding a list of { token, bizType }',
    }),
    tinyidTokenReloadMs: duration({
      env: 'IDMINT_TINYID_TOKEN_RELOAD_MS',
      default: 60_000,
      min: 100,
      max: 3_600_000,
      doc:
        'How often auth.tinyidTokenFile is read again while the server runs, as TinyId reloads ' +
        'its tiny_id_token table each minute; a file that cannot be read or parsed keeps the ' +
        'tokens of the last good one.',
    }),
  },
  { additionalProperties: false },
);

/**
 * `auth.tokens` as written: `TOKEN` or `TOKEN:tag1|tag2|prefix*`, comma-separated in a variable;
 * in a file a list of such strings or `{ token, tags }` (tags a list, or `a|b`; absent: every tag).
 * Anything else is passed on unchanged for the schema to refuse.
 */
export function readTokenList(raw: unknown): unknown {
  const entries =
    typeof raw === 'string'
      ? raw
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== '')
      : raw;
  if (!Array.isArray(entries)) return raw;
  return entries.map((entry: unknown) => {
    if (typeof entry === 'string') {
      const colon = entry.indexOf(':');
      if (colon < 0) return { token: entry.trim(), tags: ['*'] };
      return {
        token: entry.slice(0, colon).trim(),
        tags: entry
          .slice(colon + 1)
          .trim()
          .split('|'),
      };
    }
    if (entry !== null && typeof entry === 'object' && !Array.isArray(entry)) {
      const { tags: given, ...rest } = entry as Record<string, unknown>;
      return {
        ...rest,
        tags: given === undefined ? ['*'] : typeof given === 'string' ? given.split('|') : given,
      };
    }
    return entry;
  });
}

/** Rules between the auth keys. */
export const AUTH_RULES: readonly ConfigRule<Frozen<Static<typeof AuthConfig>>>[] = [
  (auth, check) => {
    const seen = new Set<string>();
    for (const rule of auth.tokens) {
      if (seen.has(rule.token)) check.fail('auth.tokens', 'the same token is listed twice');
      seen.add(rule.token);
    }
  },
  (auth, check) => {
    const admin = auth.adminToken;
    if (admin !== '' && auth.tokens.some((rule) => rule.token === admin))
      check.fail('auth.adminToken', 'must differ from every token in auth.tokens');
  },
];
