// The range route and TinyId's routes over a real socket: exact answer formats (TinyId's byte for
// byte), tokens, limits, opaque tags refused, strides from a set of databases, and no ID ever
// handed out twice between ranges, batches and TinyId's routes.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { openSegmentStores } from '../src/backends/open-segment-store.ts';
import { assertError, type Answer } from './support/http.ts';
import { metricSample } from './support/metrics-text.ts';
import { testServer } from './support/server.ts';

const ADMIN = 'admin-token-0123456789';
const ORDERS = 'orders-token-0123456789';
const K1 = '2b7e151628aed2a6abf7158809cf4f3c';

const root = mkdtempSync(join(tmpdir(), 'idmint-ranges-'));
after(() => rmSync(root, { recursive: true, force: true }));

type Server = Awaited<ReturnType<typeof testServer>>;

async function started(values: Record<string, unknown> = {}) {
  const server = await testServer({
    port: 0,
    auth: { adminToken: ADMIN, tokens: [{ token: ORDERS, tags: ['orders', 'orders2'] }] },
    ...values,
  });
  const url = await server.listen();
  return { server, url };
}

async function call(
  url: string,
  path: string,
  init: RequestInit & { token?: string } = {},
): Promise<Answer> {
  const headers = new Headers(init.headers);
  if (init.token !== undefined) headers.set('authorization', `Bearer ${init.token}`);
  const response = await fetch(`${url}${path}`, { ...init, headers });
  return {
    statusCode: response.status,
    headers: Object.fromEntries(response.headers),
    body: await response.text(),
  };
}

async function createTag(url: string, tag: Record<string, unknown>): Promise<void> {
  const answer = await call(url, '/v1/tags', {
    method: 'POST',
    token: ADMIN,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(tag),
  });
  assert.equal(answer.statusCode, 201, answer.body);
}

function idsOfRange(body: {
  start: string;
  end: string;
  stride: number;
  size: number;
  last: string;
}): bigint[] {
  const ids: bigint[] = [];
  for (let id = BigInt(body.start); id < BigInt(body.end); id += BigInt(body.stride)) ids.push(id);
  assert.equal(ids.length, body.size);
  assert.equal(String(ids.at(-1)), body.last);
  return ids;
}

/** A set of two SQLite databases, formed as `idmint db init --stores` forms it, with a tag. */
async function setOfTwo(name: string): Promise<string[]> {
  const stores = [1, 2].map((n) => `sqlite:${join(root, `${name}-${n}.db`)}`);
  const admin = await openSegmentStores(stores, { verify: false });
  await admin.join();
  await admin.createTag({ tag: 'orders', step: 10, startId: 100n });
  await admin.close();
  return stores;
}

async function close(server: Server) {
  await server.close();
}

describe('GET /v1/segment/{tag}/range', () => {
  it('answers { tag, start, end, last, stride, size }, never overlapping', async () => {
    const { server, url } = await started();
    try {
      await createTag(url, { tag: 'orders', step: 100, startId: '1000' });
      const first = await call(url, '/v1/segment/orders/range?size=30', { token: ORDERS });
      assert.equal(first.statusCode, 200, first.body);
      assert.match(String(first.headers['content-type']), /^application\/json/);
      assert.equal(
        first.body,
        '{"tag":"orders","start":"1000","end":"1030","last":"1029","stride":1,"size":30}',
      );
      const seen = new Set<bigint>(idsOfRange(JSON.parse(first.body)));
      const add = (id: bigint) => {
        assert.ok(!seen.has(id), `ID ${id} handed out twice`);
        seen.add(id);
      };
      for (let i = 0; i < 10; i++) {
        const batch = await call(url, '/v1/segment/orders?count=7', { token: ORDERS });
        for (const id of (JSON.parse(batch.body) as { ids: string[] }).ids) add(BigInt(id));
        const range = await call(url, '/v1/segment/orders/range?size=45', { token: ORDERS });
        assert.equal(range.statusCode, 200, range.body);
        const body = JSON.parse(range.body) as Parameters<typeof idsOfRange>[0];
        // Exactly the size asked, whether the buffered range held it or not.
        assert.equal(body.size, 45);
        idsOfRange(body).forEach(add);
      }
    } finally {
      await close(server);
    }
  });

  it('answers a range larger than the step whole, from one allocation, as a batch is', async () => {
    const { server, url } = await started();
    try {
      await createTag(url, { tag: 'orders', step: 1000, startId: '1' });
      const one = await call(url, '/v1/segment/orders?count=1', { token: ORDERS });
      assert.equal(JSON.parse(one.body).ids[0], '1');
      const range = await call(url, '/v1/segment/orders/range?size=5000', { token: ORDERS });
      assert.equal(range.statusCode, 200, range.body);
      const body = JSON.parse(range.body) as Parameters<typeof idsOfRange>[0];
      assert.equal(body.size, 5000);
      assert.equal(body.start, '1001');
      const tag = await call(url, '/v1/tags/orders', { token: ADMIN });
      assert.equal(JSON.parse(tag.body).maxId, '6001', 'one allocation of 5000 after [1, 1001)');
      const ids = new Set(idsOfRange(body));
      // The buffered IDs still go to the next callers.
      const after = await call(url, '/v1/segment/orders?count=999', { token: ORDERS });
      const rest = (JSON.parse(after.body) as { ids: string[] }).ids.map(BigInt);
      assert.deepEqual([rest[0], rest.at(-1)], [2n, 1000n]);
      for (const id of rest) assert.ok(!ids.has(id), `ID ${id} handed out twice`);
    } finally {
      await close(server);
    }
  });

  it('refuses a size above the largest range the tag may take', async () => {
    const { server, url } = await started({ segment: { maxStep: 300 } });
    try {
      await createTag(url, { tag: 'orders', step: 100 });
      assert.match(
        assertError(
          await call(url, '/v1/segment/orders/range?size=301', { token: ORDERS }),
          400,
          'INVALID_ARGUMENT',
        ),
        /size 301 is above the largest range tag "orders" may take, 300/,
      );
      const fits = await call(url, '/v1/segment/orders/range?size=300', { token: ORDERS });
      assert.equal(JSON.parse(fits.body).size, 300);
    } finally {
      await close(server);
    }
  });

  it('checks size, auth, the tag and opaque tags with stable codes', async () => {
    const { server, url } = await started({ opaque: { keys: `1:${K1}` } });
    try {
      await createTag(url, { tag: 'orders', step: 10 });
      await createTag(url, { tag: 'secret', step: 10, opaque: true });
      assert.match(
        assertError(
          await call(url, '/v1/segment/orders/range', { token: ORDERS }),
          400,
          'INVALID_ARGUMENT',
        ),
        /size is required/,
      );
      assert.match(
        assertError(
          await call(url, '/v1/segment/orders/range?size=10001', { token: ORDERS }),
          400,
          'INVALID_ARGUMENT',
        ),
        /size must be an integer from 1 to 10000, got "10001"/,
      );
      assert.match(
        assertError(
          await call(url, '/v1/segment/orders/range?size=0', { token: ORDERS }),
          400,
          'INVALID_ARGUMENT',
        ),
        /size must be/,
      );
      assert.match(
        assertError(
          await call(url, '/v1/segment/orders/range?size=1e3', { token: ORDERS }),
          400,
          'INVALID_ARGUMENT',
        ),
        /size must be/,
      );
      assertError(await call(url, '/v1/segment/orders/range?size=5'), 401, 'UNAUTHORIZED');
      assertError(
        await call(url, '/v1/segment/secret/range?size=5', { token: ORDERS }),
        403,
        'FORBIDDEN',
      );
      assertError(
        await call(url, '/v1/segment/ghost/range?size=5', { token: ADMIN }),
        404,
        'TAG_NOT_FOUND',
      );
      assert.match(
        assertError(
          await call(url, '/v1/segment/secret/range?size=5', { token: ADMIN }),
          409,
          'OPAQUE_RANGE_REFUSED',
        ),
        /tag "secret" is opaque/,
      );
      // The opaque tag's IDs still come from the batch route, in their opaque form.
      assert.equal(
        (await call(url, '/v1/segment/secret?count=2', { token: ADMIN })).statusCode,
        200,
      );
    } finally {
      await close(server);
    }
  });

  it('says the stride of a range from a set of databases', async () => {
    const stores = await setOfTwo('range');
    const { server, url } = await started({ segment: { store: undefined, stores } });
    try {
      const ids = new Set<bigint>();
      for (let i = 0; i < 6; i++) {
        const answer = await call(url, '/v1/segment/orders/range?size=4', { token: ORDERS });
        assert.equal(answer.statusCode, 200, answer.body);
        const body = JSON.parse(answer.body) as Parameters<typeof idsOfRange>[0];
        assert.equal(body.stride, 2);
        for (const id of idsOfRange(body)) {
          assert.equal(id % 2n, BigInt(body.start) % 2n);
          assert.ok(!ids.has(id));
          ids.add(id);
        }
      }
    } finally {
      await close(server);
    }
  });

  it('is in the OpenAPI document with its operationId', async () => {
    const { server, url } = await started();
    try {
      const doc = JSON.parse((await call(url, '/openapi.json')).body) as {
        paths: Record<
          string,
          Record<
            string,
            { operationId?: string; parameters?: { name: string; required?: boolean }[] }
          >
        >;
      };
      const op = doc.paths['/v1/segment/{tag}/range']?.['get'];
      assert.equal(op?.operationId, 'segmentRange');
      assert.ok(op?.parameters?.some((p) => p.name === 'size' && p.required === true));
      assert.equal(
        doc.paths['/tinyid/id/nextSegmentIdSimple']?.['get']?.operationId,
        'tinyIdNextSegmentIdSimple',
      );
      assert.deepEqual(
        Object.keys(doc.paths['/tinyid/id/nextId'] ?? {}),
        ['get'],
        'one method shown; the others hidden beside it',
      );
    } finally {
      await close(server);
    }
  });
});

describe("TinyId's routes", () => {
  it("answer in TinyId's formats: nextId, nextSegmentId and their Simple forms", async () => {
    const { server, url } = await started();
    try {
      await createTag(url, { tag: 'orders', step: 100, startId: '1' });
      const nextId = await call(
        url,
        `/tinyid/id/nextId?bizType=orders&token=${ORDERS}&batchSize=3`,
      );
      assert.equal(nextId.statusCode, 200);
      assert.match(String(nextId.headers['content-type']), /^application\/json/);
      assert.equal(nextId.body, '{"data":[1,2,3],"code":200,"message":""}');
      assert.equal(
        (await call(url, `/tinyid/id/nextId?bizType=orders&token=${ORDERS}`)).body,
        '{"data":[4],"code":200,"message":""}',
      );
      assert.equal(
        (await call(url, `/tinyid/id/nextIdSimple?bizType=orders&token=${ORDERS}`)).body,
        '5',
      );
      assert.equal(
        (await call(url, `/tinyid/id/nextIdSimple?bizType=orders&token=${ORDERS}&batchSize=3`))
          .body,
        '6,7,8',
      );
      // TinyId's client POSTs with the parameters in the query; a form body works as in Spring.
      const form = await call(url, '/tinyid/id/nextIdSimple', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `bizType=orders&token=${ORDERS}&batchSize=2`,
      });
      assert.equal(form.body, '9,10');
      // TinyId's own client: a POST of an empty form (HttpURLConnection's default type), parameters
      // in the query.
      const client = await call(url, `/tinyid/id/nextIdSimple?token=${ORDERS}&bizType=orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: '',
      });
      assert.equal(client.body, '11');
      // A segment of the tag's step (100), or the rest of the buffered range when fewer are left.
      const segment = await call(url, `/tinyid/id/nextSegmentId?bizType=orders&token=${ORDERS}`, {
        method: 'POST',
      });
      assert.equal(segment.statusCode, 200);
      // 89 left in [1, 101): IDs (11, 100], loading from 20% in.
      assert.equal(
        segment.body,
        '{"data":{"maxId":100,"loadingId":28,"currentId":11,"delta":1,"remainder":0},' +
          '"code":200,"message":""}',
      );
      const simple = await call(
        url,
        `/tinyid/id/nextSegmentIdSimple?bizType=orders&token=${ORDERS}`,
        { method: 'POST' },
      );
      assert.equal(simple.body, '100,120,200,1,0');
      assert.equal(
        (await call(url, `/tinyid/id/nextIdSimple?bizType=orders&token=${ORDERS}`)).body,
        '201',
      );
      // batchSize past TinyId's maximum (batch.size.max, 100,000, above api.maxBatch's default
      // 10,000) is lowered to it, as TinyId's checkBatchSize does; 0 asks for none.
      const full = JSON.parse(
        (await call(url, `/tinyid/id/nextId?bizType=orders&token=${ORDERS}&batchSize=20000`)).body,
      ) as { data: number[] };
      assert.equal(full.data.length, 20_000);
      const lowered = JSON.parse(
        (await call(url, `/tinyid/id/nextId?bizType=orders&token=${ORDERS}&batchSize=100001`)).body,
      ) as { data: number[] };
      assert.equal(lowered.data.length, 100_000);
      assert.equal(
        (await call(url, `/tinyid/id/nextId?bizType=orders&token=${ORDERS}&batchSize=0`)).body,
        '{"data":[],"code":200,"message":""}',
      );
      assert.equal(
        (await call(url, `/tinyid/id/nextIdSimple?bizType=orders&token=${ORDERS}&batchSize=0`))
          .body,
        '',
      );
    } finally {
      await close(server);
    }
  });

  it('answer a bad token, an unknown tag and an opaque tag as TinyId does', async () => {
    const { server, url } = await started({ opaque: { keys: `1:${K1}` } });
    try {
      await createTag(url, { tag: 'orders', step: 10 });
      await createTag(url, { tag: 'other', step: 10 });
      await createTag(url, { tag: 'secret', step: 10, opaque: true });
      const tokenError = '{"data":null,"code":5,"message":"token is error"}';
      for (const query of [
        'bizType=orders&token=wrong-token-0123456789',
        'bizType=orders',
        `bizType=other&token=${ORDERS}`,
        `token=${ORDERS}`,
        `bizType=&token=${ORDERS}`,
      ]) {
        for (const route of ['nextId', 'nextSegmentId']) {
          const answer = await call(url, `/tinyid/id/${route}?${query}`);
          assert.equal(answer.statusCode, 200);
          assert.equal(answer.body, tokenError, `${route}?${query}`);
        }
        for (const route of ['nextIdSimple', 'nextSegmentIdSimple']) {
          const answer = await call(url, `/tinyid/id/${route}?${query}`);
          assert.equal(answer.statusCode, 200);
          assert.equal(answer.body, '', `${route}?${query}`);
        }
      }
      assert.equal(
        (await call(url, `/tinyid/id/nextId?bizType=ghost&token=${ADMIN}`)).body,
        '{"data":null,"code":6,"message":"error query segmentId: can not find biztype:ghost"}',
      );
      // nextSegmentId is TinyId's segment service itself: its message unwrapped.
      assert.equal(
        (await call(url, `/tinyid/id/nextSegmentId?bizType=ghost&token=${ADMIN}`)).body,
        '{"data":null,"code":6,"message":"can not find biztype:ghost"}',
      );
      assert.equal(
        (await call(url, `/tinyid/id/nextSegmentIdSimple?bizType=ghost&token=${ADMIN}`)).body,
        '',
      );
      const opaque = JSON.parse(
        (await call(url, `/tinyid/id/nextSegmentId?bizType=secret&token=${ADMIN}`)).body,
      ) as { data: null; code: number; message: string };
      assert.equal(opaque.data, null);
      assert.equal(opaque.code, 6);
      assert.match(opaque.message, /^OPAQUE_RANGE_REFUSED: tag "secret" is opaque/);
      assert.match(
        (
          JSON.parse((await call(url, `/tinyid/id/nextId?bizType=secret&token=${ADMIN}`)).body) as {
            message: string;
          }
        ).message,
        /^error query segmentId: OPAQUE_RANGE_REFUSED/,
      );
      assert.equal(
        (await call(url, `/tinyid/id/nextIdSimple?bizType=secret&token=${ADMIN}`)).body,
        '',
      );
      // A batchSize Spring cannot bind is a 400, here idmint's.
      assertError(
        await call(url, `/tinyid/id/nextId?bizType=orders&token=${ORDERS}&batchSize=abc`),
        400,
        'INVALID_ARGUMENT',
      );
      // Every failure is counted by the code idmint's own routes would give it, though TinyId's
      // answers are HTTP 200: per query above, 4 routes; a wrong or missing token is UNAUTHORIZED,
      // a token without the tag FORBIDDEN, a missing bizType INVALID_ARGUMENT (plus the 400).
      const metrics = (await call(url, '/metrics')).body;
      const counted = (code: string) =>
        metricSample(metrics, `idmint_http_errors_total{code="${code}"}`) ?? 0;
      assert.deepEqual(
        [
          'UNAUTHORIZED',
          'FORBIDDEN',
          'INVALID_ARGUMENT',
          'TAG_NOT_FOUND',
          'OPAQUE_RANGE_REFUSED',
        ].map((code) => [code, counted(code)]),
        [
          ['UNAUTHORIZED', 8],
          ['FORBIDDEN', 4],
          ['INVALID_ARGUMENT', 9],
          ['TAG_NOT_FOUND', 3],
          ['OPAQUE_RANGE_REFUSED', 3],
        ],
      );
    } finally {
      await close(server);
    }
  });

  it('accept any token with auth off; delta and remainder from a set', async () => {
    const stores = await setOfTwo('tinyid');
    const server = await testServer({ port: 0, segment: { store: undefined, stores } });
    const url = await server.listen();
    try {
      const answer = JSON.parse(
        (await call(url, '/tinyid/id/nextSegmentId?bizType=orders&token=anything')).body,
      ) as {
        code: number;
        data: {
          currentId: number;
          maxId: number;
          delta: number;
          remainder: number;
          loadingId: number;
        };
      };
      assert.equal(answer.code, 200);
      const { currentId, maxId, delta, remainder } = answer.data;
      assert.equal(delta, 2);
      assert.equal(((currentId % delta) + delta) % delta, remainder);
      assert.equal(maxId % delta, remainder);
      // TinyId's client issues currentId + delta, ... up to maxId: 10 IDs, the tag's step.
      assert.equal((maxId - currentId) / delta, 10);
      const simple = (await call(url, '/tinyid/id/nextSegmentIdSimple?bizType=orders&token=x')).body
        .split(',')
        .map(Number);
      assert.equal(simple.length, 5);
      assert.equal(simple[3], 2);
    } finally {
      await server.close();
    }
  });
});
