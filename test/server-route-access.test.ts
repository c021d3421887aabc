import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { ID_FAMILIES } from '../src/contract/families.ts';
import type { Access } from '../src/contract/route.ts';
import { isIdMintError } from '../src/core/errors.ts';
import { Authorizer, installAuth } from '../src/server/plugins/auth.ts';
import { registeredRoutes } from './support/routes.ts';
import { testServer } from './support/server.ts';

// Auth denies by default: every route declares who may call it, a route that declares nothing
// keeps the server from starting, and this walk holds every route Fastify registered (read from
// its router, so a new route cannot slip past) to the access the docs give it (docs/api.md,
// docs/operations.md#auth), with no token, a token limited to some tags, and the admin token.

const LIMITED = 'orders-token-0123456789';
const ADMIN = 'admin-token-0123456789';
/** A tag LIMITED may use, and one it may not. */
const ALLOWED_TAG = 'order';
const OTHER_TAG = 'user';

type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';

/** Leaf's and TinyId's routes answer every method as GET; OPTIONS says which, and is open. */
const everyMethod = (access: Access): Partial<Record<Method, Access>> => ({
  GET: access,
  HEAD: access,
  POST: access,
  PUT: access,
  PATCH: access,
  DELETE: access,
  OPTIONS: 'open',
});

/**
 * Who may call each route, as the docs say, written out here rather than read from the code it
 * checks. A path missing here fails the walk: a new route is added to this table on purpose.
 * Methods a path lacks answer 405, open (the walk checks that too).
 */
const EXPECTED: Readonly<Record<string, Partial<Record<Method, Access>>>> = {
  '/': { GET: 'open' },
  '/dashboard': { GET: 'open' },
  '/dashboard/:file': { GET: 'open' },
  '/openapi.json': { GET: 'open' },
  '/healthz': { GET: 'open', HEAD: 'open' },
  '/readyz': { GET: 'open', HEAD: 'open' },
  '/metrics': { GET: 'open' },
  '/api/segment/get/:tag': everyMethod('tag'),
  '/api/snowflake/get/:tag': everyMethod('any'),
  '/decodeSnowflakeId': everyMethod('any'),
  '/tinyid/id/nextId': everyMethod('tinyid-token'),
  '/tinyid/id/nextIdSimple': everyMethod('tinyid-token'),
  '/tinyid/id/nextSegmentId': everyMethod('tinyid-token'),
  '/tinyid/id/nextSegmentIdSimple': everyMethod('tinyid-token'),
  '/v1/segment/:tag': { GET: 'tag' },
  '/v1/segment/:tag/range': { GET: 'tag' },
  '/v1/snowflake': { GET: 'any' },
  '/v1/snowflake/decode/:id': { GET: 'any' },
  '/v1/tags': { GET: 'any', POST: 'admin' },
  '/v1/tags/:tag': { GET: 'tag', PATCH: 'admin' },
  ...Object.fromEntries(ID_FAMILIES.map((family) => [`/v1/${family}`, { GET: 'any' }])),
  '/v1/decode/:id': { GET: 'any' },
  '/v1/opaque/snowflake': { GET: 'any' },
  '/v1/opaque/snowflake/:id': { GET: 'admin' },
  '/v1/opaque/segment/:tag/:id': { GET: 'admin' },
  '/v1/status': { GET: 'any' },
};

type Server = Awaited<ReturnType<typeof testServer>>;

interface Call {
  readonly method: string;
  readonly statusCode: number;
  readonly body: string;
  readonly code: string | undefined;
}

async function call(server: Server, method: string, url: string, token?: string): Promise<Call> {
  const response = await server.app.inject({
    method: method as Method,
    url,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  let code: string | undefined;
  try {
    code = (JSON.parse(response.body) as { error?: { code?: string } }).error?.code;
  } catch {
    code = undefined;
  }
  return { method, statusCode: response.statusCode, body: response.body, code };
}

/** The route's path with its parameters filled in. */
function urlOf(path: string, tag: string): string {
  return path.replace(':tag', tag).replace(':id', '1').replace(':file', 'app.js');
}

/** A refusal by the auth check (a HEAD answer has no body to show the code). */
function assertRefused(answer: Call, status: 401 | 403, what: string): void {
  assert.equal(answer.statusCode, status, `${what}: ${answer.body}`);
  if (answer.method !== 'HEAD')
    assert.equal(answer.code, status === 401 ? 'UNAUTHORIZED' : 'FORBIDDEN', what);
}

function assertLetThrough(answer: Call, what: string): void {
  assert.ok(
    answer.statusCode !== 401 && answer.statusCode !== 403,
    `${what}: ${answer.statusCode} ${answer.body}`,
  );
  assert.ok(
    answer.code !== 'UNAUTHORIZED' && answer.code !== 'FORBIDDEN',
    `${what}: ${answer.body}`,
  );
}

/**
 * A TinyId route's own token check: HTTP 200 either way; a refused token is TinyId's code 5 in
 * the JSON routes and an empty body in the Simple ones (HEAD has no body to tell).
 */
async function tinyId(
  server: Server,
  method: string,
  path: string,
  tag: string,
  token: string | undefined,
) {
  const query = `bizType=${tag}${token === undefined ? '' : `&token=${token}`}`;
  const answer = await call(server, method, `${path}?${query}`);
  assert.equal(answer.statusCode, 200, `${method} ${path}?${query}: ${answer.body}`);
  if (method === 'HEAD') return undefined;
  return path.endsWith('Simple') ? answer.body === '' : answer.body.includes('"code":5,');
}

describe('every route declares its access, and answers by it (auth on)', () => {
  it('walks every registered route with no, a tag-limited and the admin token', async () => {
    const limited = `${LIMITED}:${ALLOWED_TAG}|${ALLOWED_TAG}.*`;
    const server = await testServer({ auth: { tokens: [limited], adminToken: ADMIN } });
    try {
      for (const tag of [ALLOWED_TAG, OTHER_TAG]) {
        const created = await server.app.inject({
          method: 'POST',
          url: '/v1/tags',
          headers: { authorization: `Bearer ${ADMIN}` },
          payload: { tag, step: 10 },
        });
        assert.equal(created.statusCode, 201, created.body);
      }
      const routes = registeredRoutes(server.app);
      const unknown = [...routes.keys()].filter((path) => EXPECTED[path] === undefined);
      assert.deepEqual(unknown, [], 'routes missing from the table');
      assert.deepEqual(
        Object.keys(EXPECTED).filter((path) => !routes.has(path)),
        [],
        'documented, not registered',
      );
      let walked = 0;
      for (const [path, methods] of routes) {
        const expected = EXPECTED[path] ?? {};
        for (const method of methods) {
          assert.ok(server.app.hasRoute({ method, url: path }), `${method} ${path} is a route`);
          const access = expected[method as Method];
          const what = `${method} ${path}`;
          walked++;
          if (access === undefined) {
            // The hidden route that says which methods the path takes: open, and never more.
            const answer = await call(server, method, urlOf(path, ALLOWED_TAG));
            assert.equal(answer.statusCode, 405, `${what}: ${answer.body}`);
            assert.equal(
              method === 'HEAD' ? 'METHOD_NOT_ALLOWED' : answer.code,
              'METHOD_NOT_ALLOWED',
              what,
            );
            continue;
          }
          const allowed = urlOf(path, ALLOWED_TAG);
          const other = urlOf(path, OTHER_TAG);
          switch (access) {
            case 'open':
              for (const token of [undefined, LIMITED, ADMIN]) {
                assertLetThrough(
                  await call(server, method, allowed, token),
                  `${what} (${token ?? 'no token'})`,
                );
              }
              break;
            case 'any':
              assertRefused(await call(server, method, allowed), 401, `${what} without a token`);
              assertLetThrough(
                await call(server, method, other, LIMITED),
                `${what} with a tag-limited token`,
              );
              assertLetThrough(
                await call(server, method, other, ADMIN),
                `${what} with the admin token`,
              );
              break;
            case 'tag':
              assertRefused(await call(server, method, allowed), 401, `${what} without a token`);
              assertLetThrough(
                await call(server, method, allowed, LIMITED),
                `${what} with a token allowed the tag`,
              );
              assertRefused(
                await call(server, method, other, LIMITED),
                403,
                `${what} with a token not allowed it`,
              );
              assertLetThrough(
                await call(server, method, other, ADMIN),
                `${what} with the admin token`,
              );
              break;
            case 'admin':
              assertRefused(await call(server, method, allowed), 401, `${what} without a token`);
              assertRefused(
                await call(server, method, allowed, LIMITED),
                403,
                `${what} with a tag-limited token`,
              );
              assertLetThrough(
                await call(server, method, allowed, ADMIN),
                `${what} with the admin token`,
              );
              break;
            case 'tinyid-token': {
              // The header is not TinyId's way: without the token parameter, a bearer header
              // changes nothing.
              assertLetThrough(
                await call(server, method, `${path}?bizType=${ALLOWED_TAG}`, ADMIN),
                what,
              );
              const refused = [
                await tinyId(server, method, path, ALLOWED_TAG, undefined),
                await tinyId(server, method, path, OTHER_TAG, LIMITED),
                await tinyId(server, method, path, ALLOWED_TAG, LIMITED),
                await tinyId(server, method, path, OTHER_TAG, ADMIN),
              ];
              // No token, another tag, its tag, the admin token.
              if (method !== 'HEAD') assert.deepEqual(refused, [true, true, false, false], what);
              break;
            }
          }
        }
      }
      // Every path, each with the methods it takes and the 405s beside them.
      assert.ok(walked > 200, `walked ${walked} routes`);
    } finally {
      await server.close();
    }
  });

  it('the walk reads the router: a route added after start-up code is in it', async () => {
    const app = Fastify();
    installAuth(app, new Authorizer({ tokens: [], adminToken: '' }));
    app.get('/a/:tag', { config: { access: 'open' } }, () => 'a');
    await app.register(async (scope) => {
      scope.route({
        method: ['GET', 'POST'],
        url: '/b',
        config: { access: 'admin' },
        handler: () => 'b',
      });
    });
    await app.ready();
    try {
      assert.deepEqual(
        [...registeredRoutes(app)].map(([path, methods]) => [path, [...methods].sort()]),
        [
          ['/a/:tag', ['GET', 'HEAD']],
          ['/b', ['GET', 'HEAD', 'POST']],
        ],
      );
    } finally {
      await app.close();
    }
  });
});

describe('a route that declares no access is refused when it is registered', () => {
  for (const auth of [
    { name: 'auth off', config: { tokens: [], adminToken: '' } },
    { name: 'auth on', config: { tokens: [{ token: LIMITED, tags: ['*'] }], adminToken: ADMIN } },
  ]) {
    it(`${auth.name}: at the top level, inside a plugin, an unknown access`, async () => {
      const app = Fastify();
      installAuth(app, new Authorizer(auth.config));
      const refused = (error: unknown) =>
        isIdMintError(error, 'INTERNAL_ERROR') &&
        /GET \/\w+ declares no access/.test(error.message);
      assert.throws(() => app.get('/undeclared', () => 'open?'), refused);
      assert.throws(
        () => app.get('/misspelled', { config: { access: 'anyone' as Access } }, () => 'open?'),
        refused,
      );
      app.register(async (scope) => {
        scope.get('/nested', () => 'open?');
      });
      await assert.rejects(async () => {
        await app.ready();
      }, refused);
      await app.close();
    });
  }
});
