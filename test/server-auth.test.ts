import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertError } from './support/http.ts';
import { testServer } from './support/server.ts';

const USER = 'user-token-0123456789';
const ORDERS = 'orders-token-0123456789';
const ADMIN = 'admin-token-0123456789';

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

describe('bearer auth (in-process)', () => {
  it('is off by default: ID routes answer without a token', async () => {
    const server = await testServer();
    try {
      assert.equal((await server.app.inject('/api/snowflake/get/a')).statusCode, 200);
    } finally {
      await server.close();
    }
  });

  it('with tokens configured, ID routes need one: 401 with WWW-Authenticate', async () => {
    const server = await testServer({ auth: { tokens: [USER] } });
    try {
      const cases: [Record<string, string>, RegExp][] = [
        [{}, /requires a bearer token/],
        [{ authorization: USER }, /requires a bearer token/],
        [{ authorization: `Basic ${USER}` }, /requires a bearer token/],
        [{ authorization: 'Bearer ' }, /requires a bearer token/],
        [auth('user-token-0123456780'), /not valid/],
        [auth(`${USER}x`), /not valid/],
        [auth(USER.slice(0, -1)), /not valid/],
      ];
      for (const [headers, message] of cases) {
        const response = await server.app.inject({ url: '/api/snowflake/get/a', headers });
        assert.equal(response.statusCode, 401, JSON.stringify(headers));
        assert.equal(response.headers['www-authenticate'], 'Bearer realm="idmint"');
        const body = response.json() as { error: { code: string; message: string } };
        assert.equal(body.error.code, 'UNAUTHORIZED');
        assert.match(body.error.message, message);
      }
      const ok = await server.app.inject({
        url: '/api/snowflake/get/a',
        headers: { authorization: `bearer   ${USER}` },
      });
      assert.equal(ok.statusCode, 200);
      for (const url of [
        '/v1/snowflake?count=2',
        '/v1/snowflake/decode/1',
        '/decodeSnowflakeId?snowflakeId=1',
      ]) {
        assert.equal((await server.app.inject(url)).statusCode, 401, url);
        assert.equal((await server.app.inject({ url, headers: auth(USER) })).statusCode, 200, url);
      }
    } finally {
      await server.close();
    }
  });

  it('leaves health, readiness, metrics and the OpenAPI document open', async () => {
    const server = await testServer({ auth: { tokens: [USER], adminToken: ADMIN } });
    try {
      for (const url of ['/healthz', '/readyz', '/metrics', '/openapi.json']) {
        assert.equal((await server.app.inject(url)).statusCode, 200, url);
      }
      const doc = (await server.app.inject('/openapi.json')).json() as {
        paths: Record<string, Record<string, { security?: unknown }>>;
      };
      assert.deepEqual(doc.paths['/api/snowflake/get/{tag}']?.['get']?.security, [{ bearer: [] }]);
      // Open routes say so explicitly (an operation without `security` would inherit a default).
      assert.deepEqual(doc.paths['/healthz']?.['get']?.security, []);
    } finally {
      await server.close();
    }
  });

  it('limits a token to its tags on segment routes, and filters the tag list to them', async () => {
    const server = await testServer({
      auth: { tokens: [`${ORDERS}:order|order.*`, USER], adminToken: ADMIN },
    });
    try {
      for (const tag of ['order', 'order.eu', 'orders', 'user']) {
        const created = await server.app.inject({
          method: 'POST',
          url: '/v1/tags',
          headers: auth(ADMIN),
          payload: { tag, step: 10 },
        });
        assert.equal(created.statusCode, 201);
      }
      for (const url of [
        '/api/segment/get/order',
        '/api/segment/get/order.eu',
        '/v1/segment/order?count=3',
        '/v1/tags/order',
      ]) {
        assert.equal(
          (await server.app.inject({ url, headers: auth(ORDERS) })).statusCode,
          200,
          url,
        );
      }
      for (const url of [
        '/api/segment/get/orders',
        '/api/segment/get/user',
        '/v1/segment/user?count=3',
        '/v1/tags/user',
        '/api/segment/get/bad%20tag',
      ]) {
        const message = assertError(
          await server.app.inject({ url, headers: auth(ORDERS) }),
          403,
          'FORBIDDEN',
        );
        assert.match(message, /may not use tag/, url);
      }
      // A token limited to tags still draws snowflake IDs, and an unlimited one every tag.
      assert.equal(
        (await server.app.inject({ url: '/api/snowflake/get/x', headers: auth(ORDERS) }))
          .statusCode,
        200,
      );
      assert.equal(
        (await server.app.inject({ url: '/api/segment/get/user', headers: auth(USER) })).statusCode,
        200,
      );
      const listed = (token: string) =>
        server.app
          .inject({ url: '/v1/tags', headers: auth(token) })
          .then((r) => (r.json() as { tags: { tag: string }[] }).tags.map((t) => t.tag));
      assert.deepEqual(await listed(ORDERS), ['order', 'order.eu']);
      assert.deepEqual(await listed(USER), ['order', 'order.eu', 'orders', 'user']);
      assert.deepEqual(await listed(ADMIN), ['order', 'order.eu', 'orders', 'user']);
    } finally {
      await server.close();
    }
  });

  it('admin routes need the admin token; none configured: nobody may', async () => {
    const server = await testServer({ auth: { tokens: [USER], adminToken: ADMIN } });
    try {
      const create = (headers: Record<string, string>) =>
        server.app.inject({
          method: 'POST',
          url: '/v1/tags',
          headers,
          payload: { tag: 'a', step: 1 },
        });
      assertError(await create({}), 401, 'UNAUTHORIZED');
      assert.match(
        assertError(await create(auth(USER)), 403, 'FORBIDDEN'),
        /needs the admin token/,
      );
      assert.equal((await create(auth(ADMIN))).statusCode, 201);
      assertError(
        await server.app.inject({
          method: 'PATCH',
          url: '/v1/tags/a',
          headers: auth(USER),
          payload: { step: 2 },
        }),
        403,
        'FORBIDDEN',
      );
      assert.equal(
        (
          await server.app.inject({
            method: 'PATCH',
            url: '/v1/tags/a',
            headers: auth(ADMIN),
            payload: { step: 2 },
          })
        ).statusCode,
        200,
      );
      // Auth runs before the body is even looked at: a bad body from a stranger is a 401.
      assertError(
        await server.app.inject({
          method: 'POST',
          url: '/v1/tags',
          payload: 'garbage',
          headers: { 'content-type': 'application/json' },
        }),
        401,
        'UNAUTHORIZED',
      );
    } finally {
      await server.close();
    }
    const noAdmin = await testServer({ auth: { tokens: [USER] } });
    try {
      assertError(
        await noAdmin.app.inject({
          method: 'POST',
          url: '/v1/tags',
          headers: auth(USER),
          payload: { tag: 'a', step: 1 },
        }),
        403,
        'FORBIDDEN',
      );
    } finally {
      await noAdmin.close();
    }
  });
});
