import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify';
import {
  ACCESS_LEVELS,
  needsBearer,
  type Access,
  type BearerAccess,
} from '../../contract/route.ts';
import { IdMintError } from '../../core/errors.ts';
import type { ServerConfig } from '../../config/schema.ts';
import { TAG_PATTERN } from '../../core/segment-limits.ts';
import {
  readTinyIdTokenFile,
  tokenFingerprint,
  tokensByToken,
  tokenWeakness,
  type TinyIdTokenRow,
} from '../../config/tinyid-tokens.ts';
import { FORWARDED_HEADER, TINYID_TOKEN_HEADER } from '../forwarding.ts';

/** Who is calling, once the token has been checked. */
export interface Principal {
  readonly admin: boolean;
  /** True when this caller may draw from / read `tag`. */
  allows(tag: string): boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Who may call the route (src/contract/route.ts). Every route must say: one that does not
     * is refused when it is registered, so the server does not start.
     */
    access?: Access;
    /**
     * The route takes forwarded TinyId draws: a request marked forwarded, without an
     * Authorization header, may instead carry TinyId's token in TINYID_TOKEN_HEADER, valid for
     * the tag in the path as on TinyId's routes. No other route reads that header.
     */
    tinyIdForwarding?: boolean;
  }
  interface FastifyRequest {
    /** The authenticated caller; undefined when auth is off. */
    principal: Principal | undefined;
  }
}

const EVERYONE: Principal = { admin: true, allows: () => true };

/**
 * Bearer-token auth, on when any token is configured. Tokens are compared as SHA-256 digests with
 * `timingSafeEqual`, against every configured token without stopping at a match, so neither the
 * comparison nor the search leaks how much of a guess was right.
 */
export class Authorizer {
  readonly enabled: boolean;
  readonly #entries: readonly { digest: Buffer; principal: Principal }[];
  /**
   * TinyId's tokens (auth.tinyidTokenFile): valid only in TinyId's `token` parameter. Replaced
   * whole by {@link replaceTinyIdTokens}, so a check sees the old set or the new, never a mix.
   */
  #tinyId: readonly { digest: Buffer; bizTypes: ReadonlySet<string> }[];

  /**
   * `tinyIdTokens`: the rows of auth.tinyidTokenFile ({@link loadTinyIdTokens}). Any token, of
   * either kind, turns auth on for every route: a deployment that configured only TinyId's tokens
   * must not find its idmint routes open.
   */
  constructor(
    auth: Pick<ServerConfig['auth'], 'tokens' | 'adminToken'>,
    tinyIdTokens: readonly TinyIdTokenRow[] = [],
  ) {
    const entries = auth.tokens.map((rule) => ({
      digest: digest(rule.token),
      principal: limitedTo(rule.tags),
    }));
    if (auth.adminToken !== '')
      entries.push({ digest: digest(auth.adminToken), principal: EVERYONE });
    this.#entries = entries;
    this.#tinyId = tinyIdEntries(tinyIdTokens);
    this.enabled = entries.length > 0 || this.#tinyId.length > 0;
  }

  /**
   * TinyId's tokens from now on (the file read again). Whether auth is on stays as decided at
   * start-up: a server started without tokens does not turn it on, nor off when the file empties.
   */
  replaceTinyIdTokens(rows: readonly TinyIdTokenRow[]): void {
    this.#tinyId = tinyIdEntries(rows);
  }

  /** The caller behind an `Authorization` header; UNAUTHORIZED when missing or unknown. */
  authenticate(header: string | undefined): Principal {
    const match = header === undefined ? null : /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header);
    if (match === null) {
      throw new IdMintError(
        'UNAUTHORIZED',
        'this server requires a bearer token: send Authorization: Bearer <token>',
      );
    }
    const presented = digest(match[1] ?? '');
    let found: Principal | undefined;
    for (const entry of this.#entries) {
      if (timingSafeEqual(presented, entry.digest)) found = entry.principal;
    }
    if (found === undefined)
      throw new IdMintError('UNAUTHORIZED', 'the bearer token is not valid on this server');
    return found;
  }

  /**
   * Why `token` (sent bare, as TinyId's clients send theirs in the query) may not draw from `tag`:
   * UNAUTHORIZED for no token or one this server does not know, FORBIDDEN for a token whose tags
   * do not allow it; undefined when it may (a configured token whose tags allow it, a TinyId token
   * with a row for the tag, or the admin token). Always undefined with auth off.
   */
  tokenRefusal(token: string | undefined, tag: string): 'UNAUTHORIZED' | 'FORBIDDEN' | undefined {
    if (!this.enabled) return undefined;
    if (token === undefined || token === '') return 'UNAUTHORIZED';
    const presented = digest(token);
    let found: Principal | undefined;
    for (const entry of this.#entries) {
      if (timingSafeEqual(presented, entry.digest)) found = entry.principal;
    }
    // TinyId's canVisit: the token's rows name the biz_type exactly. Every entry is compared,
    // as above, whatever matched before.
    let tinyIdKnown = false;
    let tinyIdAllows = false;
    for (const entry of this.#tinyId) {
      if (timingSafeEqual(presented, entry.digest)) {
        tinyIdKnown = true;
        tinyIdAllows = entry.bizTypes.has(tag);
      }
    }
    if (found?.allows(tag) === true || tinyIdAllows) return undefined;
    return found === undefined && !tinyIdKnown ? 'UNAUTHORIZED' : 'FORBIDDEN';
  }

  /**
   * A forwarded TinyId draw of the path's tag: `encoded` is TinyId's token (base64url) as the
   * forwarding node carried it, checked as TinyId's routes check their `token` parameter (the
   * nodes of a cluster share configuration). The caller may draw that one tag, as it could on
   * TinyId's routes; throws UNAUTHORIZED or FORBIDDEN.
   */
  authorizeTinyIdForward(request: FastifyRequest, encoded: string): Principal {
    const tag = (request.params as { tag?: string }).tag ?? '';
    const token = Buffer.from(encoded, 'base64url').toString('utf8');
    const refusal = this.tokenRefusal(token, tag);
    if (refusal === 'UNAUTHORIZED')
      throw new IdMintError(
        'UNAUTHORIZED',
        'the forwarded TinyId token is not valid on this server',
      );
    if (refusal === 'FORBIDDEN')
      throw new IdMintError(
        'FORBIDDEN',
        `the forwarded TinyId token may not use tag "${TAG_PATTERN.test(tag) ? tag : '(invalid)'}"`,
      );
    return { admin: false, allows: (other) => other === tag };
  }

  /** Checks a bearer-token `access` for the request; throws UNAUTHORIZED or FORBIDDEN. */
  authorize(request: FastifyRequest, access: BearerAccess): Principal {
    const principal = this.authenticate(request.headers.authorization);
    if (access === 'admin' && !principal.admin) {
      throw new IdMintError('FORBIDDEN', 'this route changes tags and needs the admin token');
    }
    if (access === 'tag') {
      const tag = (request.params as { tag?: string }).tag ?? '';
      if (!principal.allows(tag))
        throw new IdMintError(
          'FORBIDDEN',
          `this token may not use tag "${TAG_PATTERN.test(tag) ? tag : '(invalid)'}"`,
        );
    }
    return principal;
  }
}

/**
 * Access is denied by default: every route must declare `config.access` (see Access), and one
 * that does not, or names no known access, is refused as it is registered (an INTERNAL_ERROR
 * thrown by `app.route`, so the server does not start), with auth on or off, so a forgotten
 * declaration fails on a developer's machine rather than shipping a route open.
 *
 * With auth on, each route whose access needs the bearer token gets the check as its own
 * onRequest hook, run before the body is read; open routes (health, metrics) pay nothing, and
 * TinyId's routes check their `token` parameter themselves. Must run before the routes are
 * registered: the hook sees only routes added after it.
 */
export function installAuth(app: FastifyInstance, authorizer: Authorizer): void {
  if (authorizer.enabled) app.decorateRequest('principal', undefined);
  app.addHook('onRoute', (route) => {
    const access = route.config?.access;
    if (access === undefined || !(ACCESS_LEVELS as readonly string[]).includes(access)) {
      const methods = [route.method].flat().join(',');
      throw new IdMintError(
        'INTERNAL_ERROR',
        `route ${methods} ${route.url} declares no access: set config.access to one of ` +
          `${ACCESS_LEVELS.join(', ')} ` +
          `(open for none)`,
      );
    }
    if (!authorizer.enabled || !needsBearer(access)) return;
    const tinyIdForwarding = route.config?.tinyIdForwarding === true && access === 'tag';
    const hook: onRequestHookHandler = (request, _reply, done) => {
      try {
        const tinyIdToken = tinyIdForwarding ? forwardedTinyIdToken(request) : undefined;
        request.principal =
          tinyIdToken === undefined
            ? authorizer.authorize(request, access)
            : authorizer.authorizeTinyIdForward(request, tinyIdToken);
      } catch (error) {
        done(error as Error);
        return;
      }
      done();
    };
    route.onRequest = route.onRequest === undefined ? [hook] : [hook, ...[route.onRequest].flat()];
  });
}

/**
 * TinyId's token a forwarding node carried: only on a request marked forwarded that has no
 * Authorization header (a bearer token is always checked as one); undefined otherwise.
 */
function forwardedTinyIdToken(request: FastifyRequest): string | undefined {
  const { headers } = request;
  if (headers[FORWARDED_HEADER] === undefined || headers.authorization !== undefined) return;
  const token = headers[TINYID_TOKEN_HEADER];
  return typeof token === 'string' ? token : undefined;
}

type Warn = (fields: Record<string, unknown>, message: string) => void;

/**
 * The rows of auth.tinyidTokenFile (none when it is empty), read at start-up, and one warning
 * per weak token saying why it is weak: its SHA-256 prefix and biz types name it, never its text.
 */
export function loadTinyIdTokens(auth: ServerConfig['auth'], warn: Warn): TinyIdTokenRow[] {
  if (auth.tinyidTokenFile === '') return [];
  const rows = readTinyIdTokenFile(auth.tinyidTokenFile);
  warnWeak(rows, new Set(), warn);
  return rows;
}

/**
 * Reads auth.tinyidTokenFile again every auth.tinyidTokenReloadMs, as TinyId reloads its
 * tiny_id_token table, and hands each good read to the authorizer whole. A file that cannot be
 * read or parsed keeps the tokens of the last good one, with one warning per distinct failure
 * (not one per interval); weak tokens are warned about when they first appear. `loaded`: the rows
 * read at start-up. Returns the function that stops it; nothing runs when no file is configured.
 */
export function reloadTinyIdTokens(
  auth: ServerConfig['auth'],
  authorizer: Authorizer,
  loaded: readonly TinyIdTokenRow[],
  log: { info: Warn; warn: Warn },
): () => void {
  const file = auth.tinyidTokenFile;
  if (file === '') return () => {};
  let known = new Set(loaded.map((row) => row.token));
  let current = rowsKey(loaded);
  let failure: string | undefined;
  const timer = setInterval(() => {
    let rows: TinyIdTokenRow[];
    try {
      rows = readTinyIdTokenFile(file);
    } catch (error) {
      const message = (error as Error).message;
      if (message !== failure)
        log.warn(
          { file, code: (error as IdMintError).code },
          `${message}; the TinyId tokens read before stay in use`,
        );
      failure = message;
      return;
    }
    failure = undefined;
    const key = rowsKey(rows);
    if (key === current) return;
    warnWeak(rows, known, log.warn);
    authorizer.replaceTinyIdTokens(rows);
    known = new Set(rows.map((row) => row.token));
    current = key;
    log.info(
      { file, tokens: known.size, rows: rows.length },
      `TinyId tokens reloaded from ${JSON.stringify(file)}`,
    );
  }, auth.tinyidTokenReloadMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** The rows as one text, to tell a changed file from an unchanged one. */
function rowsKey(rows: readonly TinyIdTokenRow[]): string {
  return JSON.stringify(rows.map((row) => [row.token, row.bizType]));
}

/** One warning per weak token of `rows` not in `known`. */
function warnWeak(rows: readonly TinyIdTokenRow[], known: ReadonlySet<string>, warn: Warn): void {
  for (const [token, bizTypes] of tokensByToken(rows)) {
    if (known.has(token)) continue;
    const weakness = tokenWeakness(token);
    if (weakness === undefined) continue;
    const name = tokenFingerprint(token);
    const types = [...bizTypes].join(', ');
    warn(
      { token: name, bizTypes: [...bizTypes] },
      `TinyId token ${name} (biz types ${types}) is weak: ${weakness}; ` +
        'anyone who guesses it may draw those IDs, so give its clients a longer random one',
    );
  }
}

function tinyIdEntries(
  rows: readonly TinyIdTokenRow[],
): { digest: Buffer; bizTypes: ReadonlySet<string> }[] {
  return [...tokensByToken(rows)].map(([token, bizTypes]) => ({ digest: digest(token), bizTypes }));
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

function limitedTo(patterns: readonly string[]): Principal {
  if (patterns.includes('*')) return { admin: false, allows: () => true };
  const exact = new Set(patterns.filter((p) => !p.endsWith('*')));
  const prefixes = patterns.filter((p) => p.endsWith('*')).map((p) => p.slice(0, -1));
  return {
    admin: false,
    allows: (tag) => exact.has(tag) || prefixes.some((prefix) => tag.startsWith(prefix)),
  };
}
