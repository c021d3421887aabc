import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { register as globalRegistry } from 'prom-client';
import { assertError } from './support/http.ts';
import { testServer } from './support/server.ts';

/** The API contract (docs/api.md): every route the server answers, and nothing else. */
const ROUTES = [
  'get /api/segment/get/{tag}',
  'get /api/snowflake/get/{tag}',
  'get /decodeSnowflakeId',
  'get /v1/segment/{tag}',
  'get /v1/segment/{tag}/range',
  'get /tinyid/id/nextId',
  'get /tinyid/id/nextIdSimple',
  'get /tinyid/id/nextSegmentId',
  'get /tinyid/id/nextSegmentIdSimple',
  'get /v1/snowflake',
  'get /v1/snowflake/decode/{id}',
  'get /v1/status',
  'get /v1/tags',
  'post /v1/tags',
  'get /v1/tags/{tag}',
  'patch /v1/tags/{tag}',
  'get /healthz',
  'head /healthz',
  'get /readyz',
  'head /readyz',
  'get /metrics',
  'get /v1/uuid7',
  'get /v1/uuid4',
  'get /v1/ulid',
  'get /v1/objectid',
  'get /v1/decode/{id}',
  'get /v1/opaque/snowflake',
  'get /v1/opaque/snowflake/{id}',
  'get /v1/opaque/segment/{tag}/{id}',
].sort();

interface OpenApiDoc {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      {
        parameters?: { in: string; name: string; required?: boolean }[];
        responses: Record<string, unknown>;
        requestBody?: unknown;
      }
    >
  >;
  components: { schemas: Record<string, unknown> };
}

/** Value of a metric line with exactly these labels. */
function metric(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('operations routes and behaviour (in-process)', () => {
  it('/healthz answers while the process runs; /readyz lists its checks', async () => {
    const server = await testServer();
    try {
      const health = await server.app.inject('/healthz');
      assert.equal(health.statusCode, 200);
      assert.deepEqual(health.json(), { status: 'ok' });
      const ready = await server.app.inject('/readyz');
      assert.equal(ready.statusCode, 200);
      assert.deepEqual(ready.json(), {
        status: 'ready',
        checks: { accepting: 'ok', snowflake: 'ok' },
      });
    } finally {
      await server.close();
    }
  });

  it('/metrics counts the ID families, and opaque snowflake IDs as snowflake', async () => {
    const server = await testServer({
      snowflake: { registry: 'static:9' },
      opaque: { keys: '1:2b7e151628aed2a6abf7158809cf4f3c' },
    });
    try {
      assert.equal((await server.app.inject('/v1/uuid7?count=5')).statusCode, 200);
      assert.equal((await server.app.inject('/v1/uuid7')).statusCode, 200);
      assert.equal((await server.app.inject('/v1/ulid?count=3')).statusCode, 200);
      assert.equal((await server.app.inject('/v1/objectid?count=2')).statusCode, 200);
      assert.equal((await server.app.inject('/v1/opaque/snowflake?count=4')).statusCode, 200);
      assert.equal((await server.app.inject('/api/snowflake/get/x')).statusCode, 200);
      assert.equal((await server.app.inject('/v1/ulid?count=0')).statusCode, 400);
      const text = (await server.app.inject('/metrics')).body;
      assert.equal(metric(text, 'idmint_ids_issued_total', '{mode="uuid7",tag=""}'), 6);
      assert.equal(
        metric(text, 'idmint_ids_issued_total', '{mode="ulid",tag=""}'),
        3,
        'a refused request counts nothing',
      );
      assert.equal(metric(text, 'idmint_ids_issued_total', '{mode="objectid",tag=""}'), 2);
      assert.equal(
        metric(text, 'idmint_ids_issued_total', '{mode="uuid4",tag=""}'),
        undefined,
        'a family never drawn from has no series',
      );
      assert.equal(metric(text, 'idmint_ids_issued_total', '{mode="snowflake",tag=""}'), 5);
    } finally {
      await server.close();
    }
  });

  it('/metrics reports IDs, loads, steps, remaining IDs, lease and latency', async () => {
    const server = await testServer({ snowflake: { registry: 'static:9' } });
    try {
      await server.app.inject({
        method: 'POST',
        url: '/v1/tags',
        payload: { tag: 'm', step: 100 },
      });
      for (let i = 0; i < 7; i++) await server.app.inject('/api/segment/get/m');
      await server.app.inject('/v1/segment/m?count=30');
      await server.app.inject('/v1/snowflake?count=12');
      await server.app.inject('/api/snowflake/get/x');
      await server.app.inject('/v1/segment/nope?count=3');
      const response = await server.app.inject('/metrics');
      assert.equal(response.statusCode, 200);
      assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
      const text = response.body;
      assert.equal(metric(text, 'idmint_ids_issued_total', '{mode="segment",tag="m"}'), 37);
      assert.equal(metric(text, 'idmint_ids_issued_total', '{mode="snowflake",tag=""}'), 13);
      assert.equal(
        metric(text, 'idmint_ids_issued_total', '{mode="segment",tag="nope"}'),
        undefined,
      );
      assert.equal(metric(text, 'idmint_segment_tag_step', '{tag="m"}'), 100);
      assert.ok((metric(text, 'idmint_segment_step', '{tag="m"}') ?? 0) >= 100);
      assert.ok((metric(text, 'idmint_segment_remaining_ids', '{tag="m"}') ?? 0) > 0);
      assert.ok((metric(text, 'idmint_segment_range_loads_total', '{tag="m"}') ?? 0) >= 1);
      assert.equal(metric(text, 'idmint_segment_range_load_failures_total', '{tag="m"}'), 0);
      assert.ok((metric(text, 'idmint_segment_range_load_seconds_count', '{tag="m"}') ?? 0) >= 1);
      assert.equal(metric(text, 'idmint_snowflake_lease_held', '{worker_id="9"}'), 1);
      assert.equal(metric(text, 'idmint_snowflake_clock_rollbacks_total'), 0);
      const leafGet = 'route="/api/segment/get/:tag",method="GET"';
      assert.equal(
        metric(text, 'idmint_http_request_duration_seconds_count', `{${leafGet},status="200"}`),
        7,
      );
      const segmentGet = 'route="/v1/segment/:tag",method="GET"';
      assert.equal(
        metric(text, 'idmint_http_request_duration_seconds_count', `{${segmentGet},status="404"}`),
        1,
      );
      const buckets = 'idmint_http_request_duration_seconds_bucket';
      assert.equal(metric(text, buckets, `{${leafGet},status="200",le="+Inf"}`), 7);
      assert.match(text, /^idmint_process_resident_memory_bytes /m);
    } finally {
      await server.close();
    }
  });

  it('two servers in one process keep their own metrics', async () => {
    const a = await testServer();
    const b = await testServer();
    try {
      for (let i = 0; i < 3; i++) await a.app.inject('/api/snowflake/get/x');
      await b.app.inject('/api/snowflake/get/x');
      assert.equal(
        metric(
          (await a.app.inject('/metrics')).body,
          'idmint_ids_issued_total',
          '{mode="snowflake",tag=""}',
        ),
        3,
      );
      assert.equal(
        metric(
          (await b.app.inject('/metrics')).body,
          'idmint_ids_issued_total',
          '{mode="snowflake",tag=""}',
        ),
        1,
      );
      assert.equal((await globalRegistry.metrics()).includes('idmint_'), false);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('/metrics can be turned off', async () => {
    const server = await testServer({ metrics: { enabled: false } });
    try {
      assertError(await server.app.inject('/metrics'), 404, 'ROUTE_NOT_FOUND');
      assert.equal((await server.app.inject('/api/snowflake/get/x')).statusCode, 200);
    } finally {
      await server.close();
    }
  });

  it('serves an OpenAPI 3.1 document listing exactly the routes', async () => {
    const server = await testServer();
    try {
      const doc = (await server.app.inject('/openapi.json')).json() as OpenApiDoc;
      assert.equal(doc.openapi, '3.1.0');
      const documented = Object.entries(doc.paths).flatMap(([path, methods]) =>
        Object.keys(methods).map((method) => `${method} ${path}`),
      );
      assert.deepEqual(documented.sort(), ROUTES);
      for (const entry of ROUTES) {
        const [method = '', path = ''] = entry.split(' ');
        const operation = doc.paths[path]?.[method];
        assert.ok(operation !== undefined);
        // Every {param} in the path is documented as a required path parameter, and only those.
        const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
        const documentedPath = (operation.parameters ?? []).filter((p) => p.in === 'path');
        assert.deepEqual(
          documentedPath.map((p) => p.name),
          inPath,
          entry,
        );
        assert.ok(
          documentedPath.every((p) => p.required === true),
          entry,
        );
        // ...and the route really answers there (not with ROUTE_NOT_FOUND).
        const url = path.replace('{tag}', 'order').replace('{id}', '1');
        const answer = await server.app.inject({
          method: method.toUpperCase() as 'GET',
          url,
          ...(method === 'get' || method === 'head' ? {} : { payload: {} }),
        });
        assert.notEqual(
          answer.statusCode === 404 && answer.body.includes('ROUTE_NOT_FOUND'),
          true,
          entry,
        );
      }
      const query = (entry: string) =>
        (doc.paths[entry.split(' ')[1] ?? '']?.[entry.split(' ')[0] ?? '']?.parameters ?? [])
          .filter((p) => p.in === 'query')
          .map((p) => p.name);
      assert.deepEqual(query('get /v1/segment/{tag}'), ['count']);
      assert.deepEqual(query('get /v1/snowflake'), ['count']);
      assert.deepEqual(query('get /decodeSnowflakeId'), ['snowflakeId']);
      assert.deepEqual(query('get /v1/status'), [
        'q',
        'sort',
        'order',
        'offset',
        'after',
        'limit',
        'tags',
      ]);
      for (const family of ['uuid7', 'uuid4', 'ulid', 'objectid'])
        assert.deepEqual(query(`get /v1/${family}`), ['count']);
      assert.deepEqual(query('get /v1/opaque/snowflake'), ['count']);
      assert.ok(doc.paths['/v1/tags']?.['post']?.requestBody !== undefined);
      assert.ok(
        doc.components.schemas['Error'] !== undefined &&
          doc.components.schemas['Tag'] !== undefined,
      );
    } finally {
      await server.close();
    }
  });

  it('answers unknown routes ROUTE_NOT_FOUND, wrong methods 405 with Allow', async () => {
    const server = await testServer();
    try {
      assert.match(
        assertError(await server.app.inject('/api/segment/get'), 404, 'ROUTE_NOT_FOUND'),
        /no route GET \/api\/segment\/get/,
      );
      const wrong = await server.app.inject({ method: 'DELETE', url: '/v1/tags/x' });
      assert.equal(
        assertError(wrong, 405, 'METHOD_NOT_ALLOWED'),
        'DELETE is not allowed on /v1/tags/x; it takes GET, PATCH',
      );
      assert.equal(wrong.headers['allow'], 'GET, PATCH');
      // HEAD would draw an ID and throw it away, so idmint's own ID routes refuse it (and HEAD has
      // no body); the Leaf routes answer it, as Leaf does: see server-segment.test.ts.
      const head = await server.app.inject({ method: 'HEAD', url: '/v1/snowflake' });
      assert.deepEqual([head.statusCode, head.headers['allow'], head.body], [405, 'GET', '']);
      assertError(await server.app.inject('/v1/segment/%E0%A4%A'), 400, 'INVALID_ARGUMENT');
      // Trailing slashes are forgiven, as Spring (and so Leaf) does.
      assert.equal((await server.app.inject('/api/snowflake/get/x/')).statusCode, 200);
    } finally {
      await server.close();
    }
  });

  it('logs JSON lines for start and stop, none per request unless asked', async () => {
    const quiet = await testServer({ port: 0, host: '127.0.0.1' });
    const url = await quiet.listen();
    for (let i = 0; i < 5; i++) await fetch(`${url}/api/snowflake/get/x`);
    await quiet.close();
    const messages = quiet.logs.map((line) => line['msg']);
    assert.deepEqual(messages, [
      'acquired worker 0 from the static registry',
      'idmint listening',
      'idmint shutting down',
      'released worker 0',
      'segment IDs given back to the store at shutdown',
      'idmint stopped',
    ]);
    const listening = quiet.logs.find((line) => line['msg'] === 'idmint listening') ?? {};
    assert.equal(listening['url'], url);
    assert.equal(listening['level'], 30);
    assert.equal(listening['service'], 'idmint');
    assert.equal(typeof listening['time'], 'string');

    const chatty = await testServer({ log: { requests: true } });
    try {
      await chatty.app.inject('/api/snowflake/get/x');
      assert.ok(
        chatty.logs.some((line) => line['msg'] === 'request completed'),
        JSON.stringify(chatty.logs),
      );
    } finally {
      await chatty.close();
    }
  });

  it('while shutting down, a request in flight is served; /readyz not ready', async () => {
    const server = await testServer({ port: 0 });
    const url = new URL(await server.listen());
    // A request whose headers are not complete yet keeps its connection busy, so close() must
    // wait for it: the server is then draining, with the request still to be answered.
    const socket = connect({ host: url.hostname, port: Number(url.port) });
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    const answers: string[] = [];
    socket.on('data', (chunk: Buffer) => answers.push(chunk.toString('utf8')));
    const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write('GET /readyz HTTP/1.1\r\nHost: idmint\r\n');
    // Generous pauses so the server has read the partial request before close() looks for idle
    // connections (one with nothing read yet would count as idle and be closed).
    await new Promise((resolve) => setTimeout(resolve, 200));
    const closing = server.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.write('\r\n');
    await ended;
    await closing;
    const answer = answers.join('');
    assert.match(answer, /^HTTP\/1\.1 503 /);
    assert.match(answer, /\r\nconnection: close\r\n/i);
    assert.match(answer, /"checks":\{"accepting":"shutting down","snowflake":"ok"\}/);
  });

  it('close() is idempotent and stops serving IDs', async () => {
    const server = await testServer({ port: 0 });
    const url = await server.listen();
    assert.equal((await fetch(`${url}/api/snowflake/get/x`)).status, 200);
    await Promise.all([server.close(), server.close()]);
    await server.close();
    await assert.rejects(fetch(`${url}/api/snowflake/get/x`));
  });
});
