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
  /** TinyId's tokens (auth.tinyidTokenFile): valid only in TinyId's `token` parameter. */
  readonly #tinyId: readonly { digest: Buffer; bizTypes: ReadonlySet<string> }[];

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
    this.#tinyId = [...tokensByToken(tinyIdTokens)].map(([token, bizTypes]) => ({
      digest: digest(token),
      bizTypes,
    }));
    this.enabled = entries.length > 0 || this.#tinyId.length > 0;
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

/**
 * The rows of auth.tinyidTokenFile (none when it is empty), read once at start-up, and one warning
 * per weak token saying why it is weak: its SHA-256 prefix and biz types name it, never its text.
 */
export function loadTinyIdTokens(
  auth: ServerConfig['auth'],
  warn: (fields: Record<string, unknown>, message: string) => void,
): TinyIdTokenRow[] {
  if (auth.tinyidTokenFile === '') return [];
  const rows = readTinyIdTokenFile(auth.tinyidTokenFile);
  for (const [token, bizTypes] of tokensByToken(rows)) {
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
  return rows;
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
