import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
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

  it('once tokens are configured, ID routes need one: 401 with WWW-Authenticate otherwise', async () => {
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
      const ok = await server.app.inject({ url: '/api/snowflake/get/a', headers: { authorization: `bearer   ${USER}` } });
      assert.equal(ok.statusCode, 200);
      for (const url of ['/v1/snowflake?count=2', '/v1/snowflake/decode/1', '/decodeSnowflakeId?snowflakeId=1']) {
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
      const doc = (await server.app.inject('/openapi.json')).json() as { paths: Record<string, Record<string, { security?: unknown }>> };
      assert.deepEqual(doc.paths['/api/snowflake/get/{tag}']?.['get']?.security, [{ bearer: [] }]);
      assert.equal(doc.paths['/healthz']?.['get']?.security, undefined);
    } finally {
      await server.close();
    }
  });

  it('the admin token may use every route', async () => {
    const server = await testServer({ auth: { tokens: [`${ORDERS}:order`], adminToken: ADMIN } });
    try {
      assert.equal((await server.app.inject({ url: '/v1/snowflake', headers: auth(ADMIN) })).statusCode, 200);
      assert.equal((await server.app.inject({ url: '/v1/snowflake', headers: auth(ORDERS) })).statusCode, 200);
    } finally {
      await server.close();
    }
  });
});
