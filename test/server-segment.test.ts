import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, describe, it } from 'node:test';
import { JSON_SLICE, idsJson, runsJson } from '../src/server/routes/shared.ts';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { assertError } from './support/http.ts';
import { turnsDuring } from './support/event-loop.ts';
import { testServer, type TestServer } from './support/server.ts';

async function createTag(
  server: TestServer,
  tag: string,
  step: number,
  startId?: string,
): Promise<void> {
  const response = await server.app.inject({
    method: 'POST',
    url: '/v1/tags',
    payload: { tag, step, ...(startId === undefined ? {} : { startId }) },
  });
  assert.equal(response.statusCode, 201, response.body);
}

async function leafId(server: TestServer, tag: string): Promise<bigint> {
  const response = await server.app.inject(`/api/segment/get/${tag}`);
  assert.equal(response.statusCode, 200, response.body);
  assert.equal(response.headers['content-type'], 'text/plain;charset=UTF-8');
  assert.match(response.body, /^(0|[1-9][0-9]*)$/);
  return BigInt(response.body);
}

async function batch(server: TestServer, tag: string, count: number): Promise<bigint[]> {
  const response = await server.app.inject(`/v1/segment/${tag}?count=${count}`);
  assert.equal(response.statusCode, 200, response.body);
  const body = response.json() as { tag: string; ids: string[] };
  assert.deepEqual(Object.keys(body), ['tag', 'ids']);
  assert.equal(body.tag, tag);
  assert.equal(body.ids.length, count);
  return body.ids.map((id) => {
    assert.equal(typeof id, 'string');
    return BigInt(id);
  });
}

const dir = mkdtempSync(join(tmpdir(), 'idmint-server-segment-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('segment routes (in-process, SQLite)', () => {
  it('GET /api/segment/get/{tag} answers the next ID as text/plain, like Leaf', async () => {
    const server = await testServer();
    try {
      await createTag(server, 'order', 5, '1000');
      await createTag(server, 'user', 3);
      const orders: bigint[] = [];
      for (let i = 0; i < 23; i++) orders.push(await leafId(server, 'order'));
      assert.deepEqual(
        orders,
        Array.from({ length: 23 }, (_, i) => 1000n + BigInt(i)),
      );
      assert.equal(await leafId(server, 'user'), 1n);
      assert.equal(await leafId(server, 'user'), 2n);
    } finally {
      await server.close();
    }
  });

  it('GET /v1/segment/{tag}?count=N answers N increasing IDs, no overlap', async () => {
    const server = await testServer();
    try {
      await createTag(server, 'invoice', 100);
      const seen = new Set<bigint>();
      const add = (id: bigint) => {
        assert.ok(!seen.has(id), `duplicate ${id}`);
        seen.add(id);
      };
      add(await leafId(server, 'invoice'));
      const big = await batch(server, 'invoice', 10_000);
      for (let i = 1; i < big.length; i++) assert.ok((big[i] as bigint) > (big[i - 1] as bigint));
      big.forEach(add);
      for (let i = 0; i < 50; i++) add(await leafId(server, 'invoice'));
      (await batch(server, 'invoice', 1)).forEach(add);
      assert.equal(seen.size, 10_052);
      // A single server on a fresh tag has no reason to skip: the IDs are exactly 1..10052.
      assert.equal(
        [...seen].reduce((max, id) => (id > max ? id : max), 0n),
        10_052n,
      );
    } finally {
      await server.close();
    }
  });

  it('a JSON batch of 100,000 is exact across ranges, yielding meanwhile', async () => {
    const server = await testServer({ api: { maxBatch: 100_000 } });
    try {
      await createTag(server, 'bulk', 30_000, '9007199254000000');
      await leafId(server, 'bulk');
      // Counts the event loop's turns while the batch is answered: one slice of IDs per turn at
      // most.
      const { value: ids, turns } = await turnsDuring(() => batch(server, 'bulk', 100_000));
      // Four ranges of 30,000 (the first one drawn from), dense, and near 2^53, where a double
      // still holds every ID exactly.
      assert.deepEqual(
        ids,
        Array.from({ length: 100_000 }, (_, i) => 9_007_199_254_000_001n + BigInt(i)),
      );
      assert.ok(
        turns >= Math.floor(100_000 / JSON_SLICE),
        `the event loop turned ${turns} times during the batch`,
      );
    } finally {
      await server.close();
    }
  });

  it('runsJson writes runs as idsJson writes their IDs, up to 2^63', async () => {
    const runs = [
      { start: 0n, stride: 1, count: 12 },
      { start: 95n, stride: 3, count: 5 },
      { start: 999n, stride: 1, count: 2 },
      { start: 9_999_999_999n, stride: 7, count: 3 },
      { start: 2n ** 53n - 4n, stride: 3, count: 4 },
      { start: 2n ** 63n - 100n, stride: 33, count: 3 },
      { start: 1000n, stride: 1, count: JSON_SLICE + 5 },
    ];
    const ids = runs.flatMap((run) =>
      Array.from({ length: run.count }, (_, i) => run.start + BigInt(i * run.stride)),
    );
    const head = `{"tag":${JSON.stringify('naïve "tag" ✓')},`;
    const json = await runsJson(head, runs);
    assert.equal(json.toString('utf8'), idsJson(head, ids));
    assert.equal((await runsJson('{"tag":"x",', [])).toString('utf8'), '{"tag":"x","ids":[]}');
  });

  it('serves 3,000 concurrent requests for one tag without a duplicate', async () => {
    const server = await testServer();
    try {
      await createTag(server, 'busy', 50);
      const answers = await Promise.all(
        Array.from({ length: 3000 }, (_, i) =>
          i % 10 === 0 ? batch(server, 'busy', 7) : leafId(server, 'busy').then((id) => [id]),
        ),
      );
      const ids = answers.flat();
      assert.equal(ids.length, 2700 + 300 * 7);
      assert.equal(new Set(ids).size, ids.length);
    } finally {
      await server.close();
    }
  });

  it('answers 404 for an unknown tag and 400 for a malformed one', async () => {
    const server = await testServer({ api: { maxBatch: 100 } });
    try {
      await createTag(server, 'known', 10);
      // Names a store could hold are looked up (spaces, `/` and Unicode included): not found.
      for (const tag of ['unknown', 'bad%20tag', 'x%2Fy', '%E4%B8%AD']) {
        assertError(await server.app.inject(`/api/segment/get/${tag}`), 404, 'TAG_NOT_FOUND');
        assertError(await server.app.inject(`/v1/segment/${tag}?count=3`), 404, 'TAG_NOT_FOUND');
      }
      // 129 characters, U+0000, a lone surrogate: no store can hold them.
      for (const tag of [
        'a'.repeat(129),
        '%00',
        'a%00b',
        encodeURIComponent('\u4e2d').repeat(129),
      ]) {
        assert.match(
          assertError(await server.app.inject(`/api/segment/get/${tag}`), 400, 'INVALID_ARGUMENT'),
          /^tag must be 1 to 128 characters/,
        );
        assertError(await server.app.inject(`/v1/segment/${tag}?count=1`), 400, 'INVALID_ARGUMENT');
      }
      for (const count of ['0', '101', 'x', '1.5']) {
        assert.match(
          assertError(
            await server.app.inject(`/v1/segment/known?count=${count}`),
            400,
            'INVALID_ARGUMENT',
          ),
          /^count must be an integer from 1 to 100/,
        );
      }
      assert.equal((await batch(server, 'known', 100)).length, 100);
      assert.deepEqual(await batch(server, 'known', 1), [101n]);
    } finally {
      await server.close();
    }
  });

  it('answers 503 ID_SPACE_EXHAUSTED, no Retry-After, past 2^63-1', async () => {
    const server = await testServer();
    try {
      // A start with no room for one range is refused at creation (it could only be exhausted).
      const refused = await server.app.inject({
        method: 'POST',
        url: '/v1/tags',
        payload: { tag: 'full', step: 10, startId: (2n ** 63n - 5n).toString() },
      });
      assert.match(
        assertError(refused, 400, 'INVALID_ARGUMENT'),
        /startId must leave room for one range of step 10/,
      );
      await createTag(server, 'full', 10, (2n ** 63n - 11n).toString());
      assert.deepEqual(
        await batch(server, 'full', 10),
        Array.from({ length: 10 }, (_, i) => 2n ** 63n - 11n + BigInt(i)),
      );
      const message = assertError(
        await server.app.inject('/api/segment/get/full'),
        503,
        'ID_SPACE_EXHAUSTED',
      );
      // A 5xx says what happened in a fixed sentence; the log line has the tag and max_id.
      assert.match(
        message,
        /would pass 2\^63-1 \(request req-\w+; the server log has the details\)$/,
      );
      assertError(await server.app.inject('/v1/segment/full?count=2'), 503, 'ID_SPACE_EXHAUSTED');
    } finally {
      await server.close();
    }
  });

  it('a tag created through the API is served at once, even after a miss', async () => {
    const server = await testServer();
    try {
      assertError(await server.app.inject('/api/segment/get/late'), 404, 'TAG_NOT_FOUND');
      await createTag(server, 'late', 10, '77');
      assert.equal(await leafId(server, 'late'), 77n);
    } finally {
      await server.close();
    }
  });

  it('answers MODE_DISABLED on segment and tag routes when segment mode is off', async () => {
    const server = await testServer({ segment: { enabled: false } });
    try {
      for (const [method, url] of [
        ['GET', '/api/segment/get/a'],
        ['GET', '/v1/segment/a?count=2'],
        ['GET', '/v1/tags'],
        ['GET', '/v1/tags/a'],
        ['PATCH', '/v1/tags/a'],
      ] as const) {
        const response = await server.app.inject({
          method,
          url,
          ...(method === 'PATCH' ? { payload: { step: 2 } } : {}),
        });
        assert.match(assertError(response, 404, 'MODE_DISABLED'), /segment mode/, url);
      }
      assertError(
        await server.app.inject({
          method: 'POST',
          url: '/v1/tags',
          payload: { tag: 'a', step: 1 },
        }),
        404,
        'MODE_DISABLED',
      );
    } finally {
      await server.close();
    }
  });

  it('answers 503 STORE_UNAVAILABLE once the store fails, buffer used up', async () => {
    const file = join(dir, 'failing.db');
    const server = await testServer({
      segment: { store: `sqlite:${file}`, table: 'failing', retryAfterMs: 60_000 },
    });
    try {
      await createTag(server, 'fragile', 10);
      const before = await batch(server, 'fragile', 5);
      // A real fault, not a mock: the table disappears under the running server.
      const db = new DatabaseSync(file);
      db.exec('DROP TABLE failing');
      db.close();
      // What is buffered is still served; then the store is asked, fails, and requests fail fast.
      let served = before.length;
      let failure: Awaited<ReturnType<typeof server.app.inject>> | undefined;
      while (failure === undefined && served < 1000) {
        const response = await server.app.inject('/api/segment/get/fragile');
        if (response.statusCode === 200) served++;
        else failure = response;
      }
      assert.ok(failure !== undefined, 'the store failure never surfaced');
      assertError(failure, 503, 'STORE_UNAVAILABLE');
      assertError(await server.app.inject('/v1/segment/fragile?count=2'), 503, 'STORE_UNAVAILABLE');
      assertError(await server.app.inject('/v1/tags'), 503, 'STORE_UNAVAILABLE');
      assert.ok(
        server.logs.some(
          (line) => line['msg'] === 'segment range load failed' && line['tag'] === 'fragile',
        ),
        'the failure is logged',
      );
    } finally {
      await server.close();
    }
  });

  it('serves any Leaf tag, percent-encoded; the JSON API creates plain names', async () => {
    const file = join(dir, 'leaf-tags.db');
    const server = await testServer({ segment: { store: `sqlite:${file}`, table: 'leaf_tags' } });
    // Rows a migrated Leaf table may hold, written beside the server as another node (or Leaf)
    // would.
    const store = new SqliteSegmentStore({ path: file, table: 'leaf_tags' });
    try {
      const tags = [
        'order service',
        '订单/支付',
        'a?b#c%d&e=f',
        'a;b',
        'v1.2',
        'quote"back\\slash',
        '\u{1F600}'.repeat(128),
        ' lead',
      ];
      for (const [i, tag] of tags.entries())
        await store.createTag({ tag, step: 5, startId: BigInt(1000 * (i + 1)) });
      for (const [i, tag] of tags.entries()) {
        const path = encodeURIComponent(tag);
        const first = BigInt(1000 * (i + 1));
        assert.equal(await leafId(server, path), first, tag);
        assert.equal(await leafId(server, path), first + 1n, tag);
        const response = await server.app.inject(`/v1/segment/${path}?count=2`);
        assert.equal(response.statusCode, 200, response.body);
        assert.deepEqual(response.json(), { tag, ids: [String(first + 2n), String(first + 3n)] });
        assert.equal(
          (await server.app.inject(`/v1/tags/${path}`)).json<{ tag: string }>().tag,
          tag,
        );
      }
      // The JSON API keeps the stricter rule for the tags it creates.
      const refused = await server.app.inject({
        method: 'POST',
        url: '/v1/tags',
        payload: { tag: 'new tag', step: 5 },
      });
      assertError(refused, 400, 'INVALID_ARGUMENT');
    } finally {
      await store.close();
      await server.close();
    }
  });

  it("answers every method Leaf's mapping takes, OPTIONS without a draw", async () => {
    const server = await testServer();
    try {
      await createTag(server, 'any-method', 100);
      const ids: bigint[] = [];
      const requests = [
        { method: 'GET' },
        { method: 'POST' },
        {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'key=any-method',
        },
        { method: 'POST', headers: { 'content-type': 'application/json' }, payload: '{not json' },
        { method: 'PUT', headers: { 'content-type': 'text/plain' }, payload: 'x' },
        { method: 'PATCH' },
        { method: 'DELETE' },
      ] as const;
      for (const request of requests) {
        const response = await server.app.inject({
          ...request,
          url: '/api/segment/get/any-method',
        });
        assert.equal(response.statusCode, 200, `${request.method}: ${response.body}`);
        assert.equal(response.headers['content-type'], 'text/plain;charset=UTF-8');
        ids.push(BigInt(response.body));
      }
      // HEAD draws an ID and sends no body, as Leaf's (Spring runs the mapping for HEAD).
      const head = await server.app.inject({ method: 'HEAD', url: '/api/segment/get/any-method' });
      assert.equal(head.statusCode, 200);
      assert.equal(head.body, '');
      const options = await server.app.inject({
        method: 'OPTIONS',
        url: '/api/segment/get/any-method',
      });
      assert.equal(options.statusCode, 200);
      assert.equal(options.headers['allow'], 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
      assert.equal(options.body, '');
      ids.push(await leafId(server, 'any-method'));
      assert.deepEqual(
        ids,
        [1n, 2n, 3n, 4n, 5n, 6n, 7n, 9n],
        'one ID per request; HEAD took 8, OPTIONS none',
      );
      // Errors keep their JSON shape whatever the method.
      assertError(
        await server.app.inject({ method: 'DELETE', url: '/api/segment/get/nope' }),
        404,
        'TAG_NOT_FOUND',
      );
      // The snowflake Leaf route too.
      const snowflake = await server.app.inject({
        method: 'POST',
        url: '/api/snowflake/get/any',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'a=1',
      });
      assert.equal(snowflake.statusCode, 200, snowflake.body);
      assert.match(snowflake.body, /^[1-9][0-9]*$/);
    } finally {
      await server.close();
    }
  });

  it('Accept: application/json gets the bare number as JSON, exact', async () => {
    const server = await testServer();
    try {
      const start = 2n ** 62n + 1n;
      await createTag(server, 'json', 1000, start.toString());
      const cases: [string | undefined, string][] = [
        ['application/json', 'application/json;charset=UTF-8'],
        ['application/json;charset=UTF-8', 'application/json;charset=UTF-8'],
        ['text/plain;q=0.5, application/json', 'application/json;charset=UTF-8'],
        ['application/problem+json', 'application/json;charset=UTF-8'],
        ['application/*', 'application/json;charset=UTF-8'],
        ['text/plain, application/json', 'text/plain;charset=UTF-8'],
        ['application/json;q=0.1, text/*', 'text/plain;charset=UTF-8'],
        ['application/json;q=0, */*', 'text/plain;charset=UTF-8'],
        ['*/*', 'text/plain;charset=UTF-8'],
        ['text/html', 'text/plain;charset=UTF-8'],
        [undefined, 'text/plain;charset=UTF-8'],
      ];
      for (const [i, [accept, type]] of cases.entries()) {
        const response = await server.app.inject({
          url: '/api/segment/get/json',
          headers: accept === undefined ? {} : { accept },
        });
        assert.equal(response.statusCode, 200, response.body);
        assert.equal(response.headers['content-type'], type, String(accept));
        // The body is the ID's digits either way: a JSON number, not a quoted string.
        assert.equal(response.body, String(start + BigInt(i)), String(accept));
      }
      // The snowflake worker may be fenced for a moment on a loaded machine (LEASE_LOST, a correct
      // 503): ask until it issues, then check the answer's form.
      let snowflake = await server.app.inject({
        url: '/api/snowflake/get/x',
        headers: { accept: 'application/json' },
      });
      for (let i = 0; i < 50 && snowflake.statusCode === 503; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        snowflake = await server.app.inject({
          url: '/api/snowflake/get/x',
          headers: { accept: 'application/json' },
        });
      }
      assert.equal(snowflake.statusCode, 200, snowflake.body);
      assert.equal(snowflake.headers['content-type'], 'application/json;charset=UTF-8');
      assert.match(snowflake.body, /^[1-9][0-9]*$/);
    } finally {
      await server.close();
    }
  });

  it('a graceful close gives the tail back; the next server continues it', async () => {
    const store = `sqlite:${join(dir, 'handover.db')}`;
    const first = await testServer({ segment: { store, table: 'handover' } });
    let last: bigint;
    try {
      await createTag(first, 'handover', 1000);
      last = (await batch(first, 'handover', 37)).at(-1) as bigint;
    } finally {
      await first.close();
    }
    const second = await testServer({ segment: { store, table: 'handover' } });
    try {
      assert.equal(await leafId(second, 'handover'), last + 1n);
    } finally {
      await second.close();
    }
  });
});
