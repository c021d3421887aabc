import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ObjectId } from 'bson';
import { decodeTime } from 'ulid';
import { validate as uuidValidate, version as uuidVersion } from 'uuid';
import { IdMintClient } from '../src/client/client.ts';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import { decodeAny } from '../src/core/id-formats.ts';
import { getLayout } from '../src/core/layout.ts';
import { assertError } from './support/http.ts';
import { testServer } from './support/server.ts';

// The ID families over HTTP: /v1/uuid7, /v1/uuid4, /v1/ulid, /v1/objectid and /v1/decode/{id}.
// Every ID the server answers is checked by the libraries people use for each family (uuid, ulid,
// bson), which nobody here wrote.

const USER = 'user-token-0123456789';
const ADMIN = 'admin-token-0123456789';
const auth = (token: string) => ({ authorization: `Bearer ${token}` });

type Server = Awaited<ReturnType<typeof testServer>>;

async function ids(
  server: Server,
  url: string,
  headers: Record<string, string> = {},
): Promise<string[]> {
  const response = await server.app.inject({ url, headers });
  assert.equal(response.statusCode, 200, response.body);
  assert.match(String(response.headers['content-type']), /^application\/json/);
  const body = response.json() as { ids: string[] };
  // The family routes answer the IDs alone; /v1/snowflake adds its workerId.
  assert.deepEqual(
    Object.keys(body),
    url.startsWith('/v1/snowflake') ? ['workerId', 'ids'] : ['ids'],
  );
  return body.ids;
}

function strictlyIncreasing(list: readonly string[]): boolean {
  return list.every((id, i) => i === 0 || (list[i - 1] as string) < id);
}

const CHECKS: Record<string, (id: string, before: number, after: number) => void> = {
  uuid7(id, before, after) {
    assert.ok(uuidValidate(id), id);
    assert.equal(uuidVersion(id), 7, id);
    const ms = Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);
    assert.ok(ms >= before && ms <= after, `${id}: ${ms} not within [${before}, ${after}]`);
  },
  uuid4(id) {
    assert.ok(uuidValidate(id), id);
    assert.equal(uuidVersion(id), 4, id);
  },
  ulid(id, before, after) {
    const ms = decodeTime(id);
    assert.ok(ms >= before && ms <= after, `${id}: ${ms} not within [${before}, ${after}]`);
  },
  objectid(id, before, after) {
    assert.ok(ObjectId.isValid(id), id);
    const oid = new ObjectId(id);
    assert.equal(oid.toHexString(), id);
    const ms = oid.getTimestamp().getTime();
    assert.ok(
      ms >= Math.floor(before / 1000) * 1000 && ms <= after,
      `${id}: ${ms} not within [${before}, ${after}]`,
    );
  },
};

describe('ID family routes (in-process)', () => {
  it('answer `count` IDs of each family, valid and ordered across requests', async () => {
    const server = await testServer();
    try {
      for (const family of ['uuid7', 'uuid4', 'ulid', 'objectid']) {
        const before = Date.now();
        const one = await ids(server, `/v1/${family}`);
        const many = await ids(server, `/v1/${family}?count=500`);
        const after = Date.now();
        assert.equal(one.length, 1, family);
        assert.equal(many.length, 500, family);
        const all = [...one, ...many];
        for (const id of all) CHECKS[family]?.(id, before, after);
        assert.equal(new Set(all).size, all.length, `${family}: a repeat`);
        if (family === 'uuid7' || family === 'ulid')
          assert.ok(strictlyIncreasing(all), `${family}: not strictly increasing`);
      }
    } finally {
      await server.close();
    }
  });

  it('a batch larger than one slice (16,384) is whole and in order', async () => {
    const server = await testServer({ api: { maxBatch: 50_000 } });
    try {
      for (const family of ['uuid7', 'ulid']) {
        const list = await ids(server, `/v1/${family}?count=40000`);
        assert.equal(list.length, 40_000);
        assert.equal(new Set(list).size, 40_000);
        assert.ok(strictlyIncreasing(list), family);
      }
      const oids = await ids(server, '/v1/objectid?count=40000');
      assert.equal(new Set(oids).size, 40_000);
      assert.ok(oids.every((id) => ObjectId.isValid(id)));
    } finally {
      await server.close();
    }
  });

  it('take `count` as every batch route does: one bound, one message', async () => {
    const server = await testServer({ api: { maxBatch: 100 } });
    try {
      for (const family of ['uuid7', 'uuid4', 'ulid', 'objectid']) {
        for (const count of ['0', '101', '1e3', '0x10', ' 5', '5.0', '-1']) {
          const family_ = await server.app.inject(
            `/v1/${family}?count=${encodeURIComponent(count)}`,
          );
          const segment = await server.app.inject(
            `/v1/segment/x?count=${encodeURIComponent(count)}`,
          );
          const message = assertError(family_, 400, 'INVALID_ARGUMENT');
          assert.equal(message, `count must be an integer from 1 to 100, got "${count}"`);
          assert.equal(
            message,
            JSON.parse(segment.body).error.message,
            'the segment route says the same',
          );
        }
        assert.equal((await ids(server, `/v1/${family}?count=100`)).length, 100);
        assertError(
          await server.app.inject(`/v1/${family}?count=1&count=2`),
          400,
          'INVALID_ARGUMENT',
        );
        // Drawing an ID is not idempotent: POST and HEAD are refused, as on /v1/snowflake.
        const post = await server.app.inject({ method: 'POST', url: `/v1/${family}` });
        assertError(post, 405, 'METHOD_NOT_ALLOWED');
        assert.equal(post.headers['allow'], 'GET');
      }
    } finally {
      await server.close();
    }
  });

  it('need a token when auth is on; opaque decoding needs the admin token', async () => {
    const server = await testServer({
      auth: { tokens: [`${USER}:orders`], adminToken: ADMIN },
      opaque: { keys: '0123456789abcdef0123456789abcdef' },
    });
    try {
      for (const url of [
        '/v1/uuid7',
        '/v1/uuid4',
        '/v1/ulid',
        '/v1/objectid',
        '/v1/decode/1',
        '/v1/opaque/snowflake',
      ]) {
        assertError(await server.app.inject(url), 401, 'UNAUTHORIZED');
        assert.equal((await server.app.inject({ url, headers: auth(USER) })).statusCode, 200, url);
      }
      const opaque = (await ids(server, '/v1/opaque/snowflake', auth(USER)))[0] as string;
      const decode = `/v1/opaque/snowflake/${opaque}`;
      assertError(await server.app.inject(decode), 401, 'UNAUTHORIZED');
      assert.match(
        assertError(
          await server.app.inject({ url: decode, headers: auth(USER) }),
          403,
          'FORBIDDEN',
        ),
        /admin token/,
      );
      assert.equal(
        (await server.app.inject({ url: decode, headers: auth(ADMIN) })).statusCode,
        200,
      );
      assertError(
        await server.app.inject({
          url: `/v1/opaque/segment/orders/1000000000000000000`,
          headers: auth(USER),
        }),
        403,
        'FORBIDDEN',
      );
    } finally {
      await server.close();
    }
  });

  it('a clock step back never breaks the order of uuid7 and ulid (borrow)', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const server = await testServer({}, { clock });
    try {
      const first = [
        ...(await ids(server, '/v1/uuid7?count=3')),
        ...(await ids(server, '/v1/ulid?count=3')),
      ];
      clock.set(clock.now() - 500);
      const second = [
        ...(await ids(server, '/v1/uuid7?count=3')),
        ...(await ids(server, '/v1/ulid?count=3')),
      ];
      const uuids = [...first.slice(0, 3), ...second.slice(0, 3)];
      const ulids = [...first.slice(3), ...second.slice(3)];
      assert.ok(strictlyIncreasing(uuids), uuids.join(' '));
      assert.ok(strictlyIncreasing(ulids), ulids.join(' '));
      assert.equal(
        decodeTime(ulids[0] as string),
        Date.UTC(2026, 0, 1),
        "the ULIDs carry the injected clock's time",
      );
    } finally {
      await server.close();
    }
  });
});

describe('GET /v1/decode/{id}', () => {
  it('detects each format by its shape and answers what decodeAny does', async () => {
    const server = await testServer({ snowflake: { registry: 'static:7' } });
    try {
      const samples = [
        (await ids(server, '/v1/uuid7'))[0] as string,
        (await ids(server, '/v1/uuid4'))[0] as string,
        (await ids(server, '/v1/ulid'))[0] as string,
        (await ids(server, '/v1/objectid'))[0] as string,
        (await ids(server, '/v1/snowflake'))[0] as string,
        '019A0F6C-1D32-7A41-8B3C-5E0D2F7A9C11',
        '01k7zj3f2v0q8x3n6w1t5r9b4m',
      ];
      for (const id of samples) {
        const response = await server.app.inject(`/v1/decode/${id}`);
        assert.equal(response.statusCode, 200, response.body);
        const expected = JSON.parse(
          JSON.stringify(decodeAny(id, { layout: getLayout('idmint') })),
        ) as Record<string, unknown>;
        assert.deepEqual(response.json(), expected, id);
      }
      const snowflake = (await server.app.inject(`/v1/decode/${samples[4]}`)).json() as {
        format: string;
        workerId: number;
        layout: string;
      };
      assert.deepEqual(
        [snowflake.format, snowflake.workerId, snowflake.layout],
        ['snowflake', 7, 'idmint'],
      );
      const uuid = (await server.app.inject(`/v1/decode/${samples[0]}`)).json() as {
        version: number;
        date: string;
        timestamp: number;
      };
      assert.equal(uuid.version, 7);
      assert.equal(new Date(uuid.date).getTime(), uuid.timestamp);
    } finally {
      await server.close();
    }
  });

  it("decodes decimal IDs under the server's layout", async () => {
    const server = await testServer({
      snowflake: { layout: 'twitter', datacenterId: 3, registry: 'static:9' },
    });
    try {
      const id = (await ids(server, '/v1/snowflake'))[0] as string;
      const decoded = (await server.app.inject(`/v1/decode/${id}`)).json() as {
        layout: string;
        datacenterId: number;
        workerId: number;
      };
      assert.deepEqual([decoded.layout, decoded.datacenterId, decoded.workerId], ['twitter', 3, 9]);
    } finally {
      await server.close();
    }
  });

  it('refuses what it cannot decode (INVALID_ID), naming the shapes', async () => {
    const server = await testServer();
    try {
      for (const id of [
        'xyz',
        '01K7ZJ3F2V0Q8X3N6W1T5R9B4',
        '8ZZZZZZZZZZZZZZZZZZZZZZZZZ',
        '6a1f0c2b9e4d7f3a1c2b0e9g',
        '-5',
        '00012',
        'x'.repeat(200),
      ]) {
        const message = assertError(
          await server.app.inject(`/v1/decode/${encodeURIComponent(id)}`),
          400,
          'INVALID_ID',
        );
        assert.match(message, /not an ID idmint can decode: expected a UUID/, id);
        assert.ok(message.length < 400, 'a long input is cut short in the message');
      }
      assert.match(
        assertError(await server.app.inject('/v1/decode/9223372036854775808'), 400, 'INVALID_ID'),
        /above 9223372036854775807/,
      );
      assert.match(
        assertError(
          await server.app.inject('/v1/decode/1234567890123456789012345'),
          400,
          'INVALID_ID',
        ),
        new RegExp(
          'opaque snowflake ID \\(25 digits\\): only the keys can decode it, at ' +
            '/v1/opaque/snowflake/\\{id\\} with the admin token',
        ),
      );
    } finally {
      await server.close();
    }
  });
});

describe('OpenAPI document of the family and opaque routes', () => {
  it('lists each route with operationId, count bound and bearer security', async () => {
    const server = await testServer({
      auth: { tokens: [USER], adminToken: ADMIN },
      api: { maxBatch: 777 },
    });
    try {
      const doc = (await server.app.inject('/openapi.json')).json() as {
        paths: Record<
          string,
          {
            get?: {
              operationId?: string;
              security?: unknown;
              parameters?: { name: string; schema: { maximum?: number } }[];
            };
          }
        >;
      };
      const expected: Record<string, string> = {
        '/v1/uuid7': 'uuid7Ids',
        '/v1/uuid4': 'uuid4Ids',
        '/v1/ulid': 'ulids',
        '/v1/objectid': 'objectIds',
        '/v1/decode/{id}': 'decodeId',
        '/v1/opaque/snowflake': 'opaqueSnowflakeIds',
        '/v1/opaque/snowflake/{id}': 'decodeOpaqueSnowflakeId',
        '/v1/opaque/segment/{tag}/{id}': 'decodeOpaqueSegmentId',
      };
      for (const [path, operationId] of Object.entries(expected)) {
        const get = doc.paths[path]?.get;
        assert.equal(get?.operationId, operationId, path);
        assert.deepEqual(get?.security, [{ bearer: [] }], path);
      }
      assert.equal(
        doc.paths['/v1/uuid7']?.get?.parameters?.find((p) => p.name === 'count')?.schema.maximum,
        777,
      );
    } finally {
      await server.close();
    }
  });
});

describe('IdMintClient: families, decoding and opaque IDs over a real socket', () => {
  it('draws each family, decodes any ID, makes and decodes an opaque tag', async () => {
    const server = await testServer({
      port: 0,
      auth: { adminToken: ADMIN },
      opaque: { keys: '1:000102030405060708090a0b0c0d0e0f' },
    });
    const url = await server.listen();
    try {
      const client = new IdMintClient({ url, token: ADMIN });
      const before = Date.now();
      const families = {
        uuid7: await client.uuid7(5),
        uuid4: await client.uuid4(5),
        ulid: await client.ulid(5),
        objectid: await client.objectId(5),
      };
      const after = Date.now();
      for (const [family, list] of Object.entries(families)) {
        assert.equal(list.length, 5, family);
        for (const id of list) CHECKS[family]?.(id, before, after);
      }
      assert.deepEqual(await client.ids('ulid', 2).then((l) => l.length), 2);
      await assert.rejects(
        client.ids('nope' as 'ulid'),
        /family must be one of uuid7, uuid4, ulid, objectid/,
      );
      const decoded = await client.decodeAny(families.ulid[0] as string);
      assert.equal(decoded.format, 'ulid');
      assert.equal(decoded.timestamp, decodeTime(families.ulid[0] as string));
      await assert.rejects(
        client.decodeAny('nope'),
        (error: Error & { code?: string }) => error.code === 'INVALID_ID',
      );

      const tag = await client.createTag({ tag: 'invoice', step: 50, opaque: true });
      assert.equal(tag.opaque, true);
      const opaque = [
        await client.segment('invoice'),
        ...(await client.segmentBatch('invoice', 4)),
      ];
      assert.ok(
        opaque.every((id) => /^1[0-9]{18}$/.test(id)),
        opaque.join(' '),
      );
      const dense = await Promise.all(opaque.map((id) => client.decodeOpaque('invoice', id)));
      assert.deepEqual(
        dense.map((d) => d.dense),
        ['1', '2', '3', '4', '5'],
      );
      assert.deepEqual(dense[0], { tag: 'invoice', id: opaque[0], dense: '1', keyId: 1 });
      const snowflakes = await client.opaqueSnowflake(3);
      assert.ok(snowflakes.every((id) => /^1[0-9]{24}$/.test(id)));
      const back = await client.decodeOpaqueSnowflake(snowflakes[0] as string);
      assert.equal(back.id, snowflakes[0]);
      assert.equal(back.keyId, 1);
      assert.equal(back.workerId, 0);
      assert.equal((await client.decode(back.dense)).timestamp, back.timestamp);
      assert.equal((await client.updateTag('invoice', { description: 'x' })).opaque, true);
    } finally {
      await server.close();
    }
  });
});
