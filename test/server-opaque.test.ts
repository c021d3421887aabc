import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { getLayout, composeId } from '../src/core/layout.ts';
import {
  OPAQUE_SEGMENT_DOMAIN,
  OPAQUE_SNOWFLAKE_DOMAIN,
  OpaqueCodec,
  parseOpaqueKeys,
} from '../src/core/opaque.ts';
import { OPAQUE_SNOWFLAKE_TWEAK } from '../src/service/opaque-ids.ts';
import { assertError } from './support/http.ts';
import { testServer } from './support/server.ts';

// Opaque IDs wired into the server: opaque tags on every ID route, opaque snowflake IDs, decoding
// with the admin token against the tag's max_id, servers without keys, and key rotation across
// restarts over one store.

const K1 = '2b7e151628aed2a6abf7158809cf4f3c';
const K2 = '2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f';
const K3 = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
const ADMIN = 'admin-token-0123456789';
const admin = { authorization: `Bearer ${ADMIN}` };

const root = mkdtempSync(join(tmpdir(), 'idmint-opaque-'));
after(() => rmSync(root, { recursive: true, force: true }));
let files = 0;
/** A SQLite file of this test's own, shared by the servers a test starts one after another. */
const storeFile = () => `sqlite:${join(root, `store-${++files}.db`)}`;

type Server = Awaited<ReturnType<typeof testServer>>;

/**
 * A GET with the admin token: auth is on in these servers (the admin token may use every route).
 */
function get(server: Server, url: string) {
  return server.app.inject({ url, headers: admin });
}
async function post(server: Server, body: Record<string, unknown>) {
  return server.app.inject({ method: 'POST', url: '/v1/tags', payload: body, headers: admin });
}
async function patch(server: Server, tag: string, body: Record<string, unknown>) {
  return server.app.inject({
    method: 'PATCH',
    url: `/v1/tags/${tag}`,
    payload: body,
    headers: admin,
  });
}
async function leaf(server: Server, tag: string): Promise<string> {
  const response = await get(server, `/api/segment/get/${tag}`);
  assert.equal(response.statusCode, 200, response.body);
  return response.body;
}
async function batch(server: Server, tag: string, count: number): Promise<string[]> {
  const response = await get(server, `/v1/segment/${tag}?count=${count}`);
  assert.equal(response.statusCode, 200, response.body);
  return (response.json() as { ids: string[] }).ids;
}
async function dense(
  server: Server,
  tag: string,
  id: string,
): Promise<{ dense: string; keyId: number }> {
  const response = await server.app.inject({
    url: `/v1/opaque/segment/${tag}/${id}`,
    headers: admin,
  });
  assert.equal(response.statusCode, 200, `${id}: ${response.body}`);
  return response.json() as { dense: string; keyId: number };
}

describe('opaque tags over HTTP', () => {
  it('answer 19-digit IDs that show no order and decode to the dense IDs', async () => {
    const server = await testServer({ auth: { adminToken: ADMIN }, opaque: { keys: `1:${K1}` } });
    try {
      const created = await post(server, { tag: 'orders', step: 1000, opaque: true });
      assert.equal(created.statusCode, 201);
      assert.equal((created.json() as { opaque: boolean }).opaque, true);
      const ids = [await leaf(server, 'orders'), ...(await batch(server, 'orders', 2999))];
      for (const id of ids) {
        assert.match(id, /^1[0-9]{18}$/, id);
        assert.ok(BigInt(id) <= 2n ** 63n - 1n);
      }
      assert.equal(new Set(ids).size, 3000, 'a repeat');
      const increasing =
        ids.filter((id, i) => i > 0 && BigInt(id) > BigInt(ids[i - 1] as string)).length /
        (ids.length - 1);
      assert.ok(increasing > 0.45 && increasing < 0.55, `increasing neighbours: ${increasing}`);
      // The admin route turns them back into the dense IDs 1, 2, 3, ... in the order issued.
      const codec = new OpaqueCodec({ keys: parseOpaqueKeys(`1:${K1}`) });
      for (const [i, id] of ids.entries())
        assert.equal(codec.decode(id, 'orders').dense, BigInt(i + 1));
      for (const i of [0, 1, 1500, 2999])
        assert.deepEqual(await dense(server, 'orders', ids[i] as string), {
          tag: 'orders',
          id: ids[i],
          dense: String(i + 1),
          keyId: 1,
        });
      // Accept: application/json gets the same bare digits, as for any Leaf answer.
      const json = await server.app.inject({
        url: '/api/segment/get/orders',
        headers: { ...admin, accept: 'application/json' },
      });
      assert.match(json.body, /^1[0-9]{18}$/);
      assert.equal(codec.decode(json.body, 'orders').dense, 3001n);
      // A plain tag beside it is untouched.
      await post(server, { tag: 'plain', step: 10 });
      assert.deepEqual(await batch(server, 'plain', 3), ['1', '2', '3']);
    } finally {
      await server.close();
    }
  });

  it('a tag made opaque by PATCH answers opaque IDs from then on, for good', async () => {
    const server = await testServer({ auth: { adminToken: ADMIN }, opaque: { keys: `1:${K1}` } });
    try {
      await post(server, { tag: 'users', step: 100 });
      const before = await batch(server, 'users', 5);
      assert.deepEqual(before, ['1', '2', '3', '4', '5']);
      const changed = await patch(server, 'users', { opaque: true });
      assert.equal(changed.statusCode, 200, changed.body);
      assert.equal((changed.json() as { opaque: boolean }).opaque, true);
      const afterIds = [await leaf(server, 'users'), ...(await batch(server, 'users', 200))];
      assert.ok(afterIds.every((id) => /^1[0-9]{18}$/.test(id)));
      // Dense IDs are below 10^15, opaque ones at 10^18 and above: the two can never meet.
      assert.equal(new Set([...before, ...afterIds]).size, before.length + afterIds.length);
      const codec = new OpaqueCodec({ keys: parseOpaqueKeys(`1:${K1}`) });
      assert.deepEqual(
        afterIds.slice(0, 3).map((id) => codec.decode(id, 'users').dense),
        [6n, 7n, 8n],
      );
      const back = assertError(
        await patch(server, 'users', { opaque: false }),
        400,
        'INVALID_ARGUMENT',
      );
      assert.match(back, /tag "users" is opaque and stays opaque/);
      assert.equal(
        (await patch(server, 'users', { opaque: true, step: 50 })).statusCode,
        200,
        'marking an opaque tag again is no change',
      );
      assert.equal(
        ((await get(server, '/v1/tags/users')).json() as { opaque: boolean; step: number }).opaque,
        true,
      );
      // false on a plain tag changes nothing.
      await post(server, { tag: 'plain', step: 10 });
      const plain = await patch(server, 'plain', { opaque: false, description: 'still plain' });
      assert.equal((plain.json() as { opaque: boolean }).opaque, false);
    } finally {
      await server.close();
    }
  });

  it('past 10^15: cannot be made opaque; an opaque tag stops, never wraps', async () => {
    const server = await testServer({ auth: { adminToken: ADMIN }, opaque: { keys: `1:${K1}` } });
    try {
      const limit = OPAQUE_SEGMENT_DOMAIN.denseLimit;
      assert.match(
        assertError(
          await post(server, { tag: 'late', step: 10, startId: String(limit), opaque: true }),
          400,
          'INVALID_ARGUMENT',
        ),
        new RegExp(
          'cannot be opaque from ID 1000000000000000: opaque segment IDs encode dense IDs ' +
            'below 1000000000000000',
        ),
      );
      await post(server, { tag: 'big', step: 10, startId: String(limit) });
      assert.match(
        assertError(await patch(server, 'big', { opaque: true }), 400, 'INVALID_ARGUMENT'),
        /cannot be opaque from ID 1000000000000000/,
      );
      assert.equal(
        ((await get(server, '/v1/tags/big')).json() as { opaque: boolean }).opaque,
        false,
      );

      const created = await post(server, {
        tag: 'edge',
        step: 10,
        startId: String(limit - 3n),
        opaque: true,
      });
      assert.equal(created.statusCode, 201, created.body);
      const codec = new OpaqueCodec({ keys: parseOpaqueKeys(`1:${K1}`) });
      const last = await batch(server, 'edge', 3);
      assert.deepEqual(
        last.map((id) => codec.decode(id, 'edge').dense),
        [limit - 3n, limit - 2n, limit - 1n],
      );
      for (const url of [
        '/api/segment/get/edge',
        '/v1/segment/edge?count=1',
        '/v1/segment/edge?count=5',
      ]) {
        const message = assertError(await get(server, url), 503, 'OPAQUE_DOMAIN_EXHAUSTED', false);
        assert.match(
          message,
          /^tag "edge": the tag's IDs have outgrown the space of its opaque IDs; none is issued/,
        );
      }
    } finally {
      await server.close();
    }
  });

  it('without keys: refuses to mark, answers OPAQUE_UNAVAILABLE, never dense', async () => {
    const store = storeFile();
    const keyed = await testServer({
      segment: { store },
      auth: { adminToken: ADMIN },
      opaque: { keys: `1:${K1}` },
    });
    try {
      assert.equal((await post(keyed, { tag: 'secret', step: 100, opaque: true })).statusCode, 201);
      assert.equal((await post(keyed, { tag: 'open', step: 100 })).statusCode, 201);
    } finally {
      await keyed.close();
    }
    const keyless = await testServer({ segment: { store }, auth: { adminToken: ADMIN } });
    try {
      for (const url of ['/api/segment/get/secret', '/v1/segment/secret?count=3']) {
        for (let i = 0; i < 3; i++) {
          const message = assertError(await get(keyless, url), 503, 'OPAQUE_UNAVAILABLE', false);
          assert.match(message, /^tag "secret": opaque IDs are not set up on this server/);
        }
      }
      assert.deepEqual(
        await batch(keyless, 'open', 2),
        ['1', '2'],
        'plain tags are served as ever',
      );
      assertError(
        await post(keyless, { tag: 'another', step: 100, opaque: true }),
        503,
        'OPAQUE_UNAVAILABLE',
        false,
      );
      assertError(await patch(keyless, 'open', { opaque: true }), 503, 'OPAQUE_UNAVAILABLE', false);
      assert.equal(
        ((await get(keyless, '/v1/tags/open')).json() as { opaque: boolean }).opaque,
        false,
      );
      assert.equal((await get(keyless, '/v1/tags/another')).statusCode, 404, 'nothing was created');
      assertError(await get(keyless, '/v1/opaque/snowflake'), 503, 'OPAQUE_UNAVAILABLE', false);
      assertError(
        await keyless.app.inject({
          url: '/v1/opaque/segment/secret/1000000000000000000',
          headers: admin,
        }),
        503,
        'OPAQUE_UNAVAILABLE',
        false,
      );
      // The keyless node drew nothing for the opaque tag (no range was even allocated for it),
      // and the log has why, with the tag.
      assert.equal(
        ((await get(keyless, '/v1/tags/secret')).json() as { maxId: string }).maxId,
        '1',
      );
      const line = keyless.logs.find((entry) => entry['code'] === 'OPAQUE_UNAVAILABLE');
      assert.match(
        String((line?.['err'] as { message?: string } | undefined)?.message),
        new RegExp(
          'tag "secret" is opaque: its IDs needs opaque keys, and none are configured ' +
            '\\(IDMINT_OPAQUE_KEYS\\)',
        ),
      );
    } finally {
      await keyless.close();
    }
  });
});

describe('opaque tags made on another node', () => {
  it('are served opaque from the first ID, on demand and after a refresh', async () => {
    const store = storeFile();
    const keys = { keys: `1:${K1}` };
    const a = await testServer({
      segment: { store, tagRefreshMs: 0 },
      auth: { adminToken: ADMIN },
      opaque: keys,
    });
    const b = await testServer({
      segment: { store, tagRefreshMs: 0 },
      auth: { adminToken: ADMIN },
      opaque: keys,
    });
    try {
      // Created on a after b started: b has never seen it, and looks it up on the first request.
      assert.equal((await post(a, { tag: 'late', step: 10, opaque: true })).statusCode, 201);
      const first = await leaf(b, 'late');
      assert.match(first, /^1[0-9]{18}$/, 'the first ID of a looked-up opaque tag is opaque');
      assert.match((await batch(b, 'late', 3))[0] as string, /^1[0-9]{18}$/);
      // A tag b already serves plain, made opaque on a: b answers plain until it reads the tag
      // again (a refresh: segment.tagRefreshMs), then opaque; the two kinds never meet.
      assert.equal((await post(a, { tag: 'users', step: 10 })).statusCode, 201);
      assert.deepEqual(await batch(b, 'users', 2), ['1', '2']);
      assert.equal((await patch(a, 'users', { opaque: true })).statusCode, 200);
      assert.equal(await leaf(b, 'users'), '3', 'b has not read the change yet');
      await b.app.inject({
        method: 'PATCH',
        url: '/v1/tags/users',
        payload: { description: 'read again' },
        headers: admin,
      });
      const next = await leaf(b, 'users');
      assert.match(next, /^1[0-9]{18}$/);
      assert.equal((await dense(b, 'users', next)).dense, '4');
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('decoding opaque IDs (admin token)', () => {
  it('refuses tampered, foreign, plain-tag and unknown IDs, each clearly', async () => {
    const server = await testServer({ auth: { adminToken: ADMIN }, opaque: { keys: `1:${K1}` } });
    const other = await testServer({ auth: { adminToken: ADMIN }, opaque: { keys: `1:${K3}` } });
    try {
      await post(server, { tag: 'a', step: 1000, opaque: true });
      await post(server, { tag: 'b', step: 1000, opaque: true });
      await post(server, { tag: 'plain', step: 10 });
      await post(other, { tag: 'a', step: 1000, opaque: true });
      const idsA = await batch(server, 'a', 500);
      const idsB = await batch(server, 'b', 500);
      const foreign = await batch(other, 'a', 500);
      const refused = async (tag: string, id: string) =>
        assertError(
          await server.app.inject({ url: `/v1/opaque/segment/${tag}/${id}`, headers: admin }),
          400,
          'INVALID_ID',
        );
      for (const id of idsA.slice(0, 50)) {
        const digit = (Number(id[10]) + 1) % 10;
        assert.match(
          await refused('a', `${id.slice(0, 10)}${digit}${id.slice(11)}`),
          new RegExp(
            'is not an ID of "a" under key 1: it was altered, belongs to another tag, or was ' +
              'made with another key',
          ),
        );
      }
      for (const id of idsB) await refused('a', id);
      for (const id of foreign) await refused('a', id);
      assert.match(await refused('plain', idsA[0] as string), /tag "plain" is not opaque/);
      for (const malformed of [
        '0123456789012345678',
        '12345678901234567890',
        '123456789012345678',
      ]) {
        assert.match(
          await refused('a', malformed),
          new RegExp(
            'not an opaque segment ID: expected 19 decimal digits, the first \\(the key ' +
              'ID\\) from 1 to 8',
          ),
        );
      }
      assert.match(
        await refused('a', '9000000000000000000'),
        /made under key 9, which is not configured \(configured: 1\)/,
      );
      assert.match(
        await refused('a', '3000000000000000000'),
        /made under key 3, which is not configured \(configured: 1\)/,
      );
      assertError(
        await server.app.inject({ url: `/v1/opaque/segment/nope/${idsA[0]}`, headers: admin }),
        404,
        'TAG_NOT_FOUND',
      );
    } finally {
      await server.close();
      await other.close();
    }
  });

  it('refuses a well-formed ID of a dense ID not yet allocated (max_id)', async () => {
    const server = await testServer({ auth: { adminToken: ADMIN }, opaque: { keys: `1:${K1}` } });
    try {
      await post(server, { tag: 'orders', step: 100, opaque: true });
      await batch(server, 'orders', 3);
      const maxId = BigInt(
        ((await get(server, '/v1/tags/orders')).json() as { maxId: string }).maxId,
      );
      const codec = new OpaqueCodec({ keys: parseOpaqueKeys(`1:${K1}`) });
      // IDs below max_id decode (allocated, though not all issued yet); max_id and above do not.
      assert.equal(
        (await dense(server, 'orders', codec.encode(maxId - 1n, 'orders'))).dense,
        String(maxId - 1n),
      );
      for (const forged of [maxId, maxId + 1n, 10n ** 12n]) {
        const id = codec.encode(forged, 'orders');
        assert.equal(codec.decode(id, 'orders').dense, forged, 'the codec alone accepts it');
        assert.match(
          assertError(
            await server.app.inject({ url: `/v1/opaque/segment/orders/${id}`, headers: admin }),
            400,
            'INVALID_ID',
          ),
          /is not an ID of "orders" under key 1/,
        );
      }
    } finally {
      await server.close();
    }
  });
});

describe('key rotation over one store, across restarts', () => {
  it('IDs under an old key decode while it is configured; new key, no repeat', async () => {
    const store = storeFile();
    const first = await testServer({
      segment: { store },
      auth: { adminToken: ADMIN },
      opaque: { keys: K1 },
    });
    let old: string[];
    try {
      await post(first, { tag: 'orders', step: 10, opaque: true });
      old = [await leaf(first, 'orders'), ...(await batch(first, 'orders', 24))];
      assert.ok(old.every((id) => id.startsWith('1')));
    } finally {
      await first.close();
    }
    const second = await testServer({
      segment: { store },
      auth: { adminToken: ADMIN },
      opaque: { keys: `1:${K1}, 2:${K2}` },
    });
    let fresh: string[];
    try {
      fresh = [await leaf(second, 'orders'), ...(await batch(second, 'orders', 24))];
      assert.ok(
        fresh.every((id) => /^2[0-9]{18}$/.test(id)),
        'the highest key makes new IDs',
      );
      const all = [...old, ...fresh];
      const decoded = [];
      for (const id of all) decoded.push(await dense(second, 'orders', id));
      assert.deepEqual(
        decoded.map((d) => d.keyId),
        [...old.map(() => 1), ...fresh.map(() => 2)],
      );
      const values = decoded.map((d) => BigInt(d.dense));
      assert.equal(new Set(values).size, values.length, 'a dense ID was issued twice');
      assert.ok(
        values.every((v, i) => i === 0 || v > (values[i - 1] as bigint)),
        'dense IDs go on increasing across the restart',
      );
    } finally {
      await second.close();
    }
    const third = await testServer({
      segment: { store },
      auth: { adminToken: ADMIN },
      opaque: { keys: `2:${K2}` },
    });
    try {
      assert.equal((await dense(third, 'orders', fresh[0] as string)).keyId, 2);
      const message = assertError(
        await third.app.inject({ url: `/v1/opaque/segment/orders/${old[0]}`, headers: admin }),
        400,
        'INVALID_ID',
      );
      assert.match(
        message,
        new RegExp(
          'was made under key 1, which is not configured \\(configured: 2\\); add that key ' +
            'to decode it',
        ),
      );
      assert.ok((await leaf(third, 'orders')).startsWith('2'));
    } finally {
      await third.close();
    }
  });
});

describe('opaque snowflake IDs', () => {
  it("are 25-digit strings that decode (admin) to this worker's IDs", async () => {
    const server = await testServer({
      snowflake: { registry: 'static:12' },
      auth: { adminToken: ADMIN },
      opaque: { keys: `1:${K1},2:${K2}` },
    });
    try {
      const response = await server.app.inject({
        url: '/v1/opaque/snowflake?count=2000',
        headers: admin,
      });
      assert.equal(response.statusCode, 200, response.body);
      const ids = (response.json() as { ids: string[] }).ids;
      assert.equal(ids.length, 2000);
      assert.ok(ids.every((id) => /^2[0-9]{24}$/.test(id)));
      assert.equal(new Set(ids).size, 2000);
      const increasing =
        ids.filter((id, i) => i > 0 && id > (ids[i - 1] as string)).length / (ids.length - 1);
      assert.ok(increasing > 0.45 && increasing < 0.55, `increasing neighbours: ${increasing}`);
      const codec = new OpaqueCodec({
        keys: parseOpaqueKeys(`1:${K1},2:${K2}`),
        domain: OPAQUE_SNOWFLAKE_DOMAIN,
      });
      const snowflakes = ids.map((id) => codec.decode(id, OPAQUE_SNOWFLAKE_TWEAK).dense);
      assert.ok(
        snowflakes.every((v, i) => i === 0 || v > (snowflakes[i - 1] as bigint)),
        "the snowflake IDs behind them are the worker's, strictly increasing",
      );
      const parts = (
        await server.app.inject({ url: `/v1/opaque/snowflake/${ids[0]}`, headers: admin })
      ).json() as { dense: string; keyId: number; workerId: number; layout: string };
      assert.deepEqual(
        [parts.dense, parts.keyId, parts.workerId, parts.layout],
        [String(snowflakes[0]), 2, 12, 'idmint'],
      );
      // A snowflake ID of a time two days ahead cannot have been issued: refused.
      const future = composeId(getLayout('idmint'), {
        timestamp: Date.now() + 2 * 86_400_000,
        workerId: 12,
        sequence: 0,
      });
      const forged = codec.encode(future, OPAQUE_SNOWFLAKE_TWEAK);
      assert.match(
        assertError(
          await server.app.inject({ url: `/v1/opaque/snowflake/${forged}`, headers: admin }),
          400,
          'INVALID_ID',
        ),
        /is not an ID of "snowflake" under key 2/,
      );
      assert.match(
        assertError(
          await server.app.inject({
            url: `/v1/opaque/snowflake/${ids[0]?.slice(0, 20)}00000`,
            headers: admin,
          }),
          400,
          'INVALID_ID',
        ),
        /is not an ID of "snowflake"/,
      );
    } finally {
      await server.close();
    }
  });

  it('are MODE_DISABLED when snowflake mode is off, as /v1/snowflake', async () => {
    const server = await testServer({ snowflake: { enabled: false }, opaque: { keys: K1 } });
    try {
      assertError(await get(server, '/v1/opaque/snowflake'), 404, 'MODE_DISABLED');
    } finally {
      await server.close();
    }
  });
});

describe('the opaque keys stay secret', () => {
  it('appear in no log, OpenAPI document or error body', async () => {
    const server = await testServer({
      auth: { adminToken: ADMIN },
      opaque: { keys: `1:${K1},2:${K3}` },
    });
    const seen: string[] = [];
    try {
      await post(server, { tag: 'orders', step: 10, opaque: true });
      for (const url of [
        '/openapi.json',
        '/v1/segment/orders?count=3',
        '/v1/opaque/segment/orders/1234567890123456789',
        '/v1/opaque/snowflake/1234567890123456789012345',
        '/v1/tags',
        '/metrics',
      ]) {
        seen.push((await server.app.inject({ url, headers: admin })).body);
      }
      seen.push(
        assertError(
          await post(server, { tag: 'orders', step: 10, opaque: true }),
          409,
          'TAG_EXISTS',
        ),
      );
    } finally {
      await server.close();
    }
    seen.push(JSON.stringify(server.logs));
    for (const text of seen) {
      for (const key of [K1, K3, K1.toUpperCase()])
        assert.ok(
          !text.toLowerCase().includes(key.toLowerCase().slice(0, 16)),
          'key material in an answer or a log line',
        );
    }
    const { loadConfig } = await import('../src/config/load.ts');
    for (const keys of [
      `1:${K1.slice(2)}`,
      `1:${K1},1:${K3}`,
      `9:${K1}`,
      `${K1},${K3}`,
      `1:${K1}zz`,
    ]) {
      assert.throws(
        () => loadConfig({ env: { IDMINT_OPAQUE_KEYS: keys } }),
        (error: Error) => {
          assert.match(
            error.message,
            /^invalid configuration: opaque\.keys = \(hidden\) \(from IDMINT_OPAQUE_KEYS\): /,
          );
          assert.ok(
            !error.message.includes(K1.slice(2, 18)) && !error.message.includes(K3.slice(0, 16)),
            error.message,
          );
          return true;
        },
        keys,
      );
    }
  });
});
