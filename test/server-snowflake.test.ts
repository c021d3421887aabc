import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import { composeId, decomposeId, getLayout } from '../src/core/layout.ts';
import { maxBatchFor } from '../src/core/snowflake.ts';
import { assertError } from './support/http.ts';
import { testServer } from './support/server.ts';

/** CPU time (ms) of this thread (of the process before Node 23.9, which lacks threadCpuUsage). */
function threadCpuMs(): number {
  const { user, system } =
    typeof process.threadCpuUsage === 'function' ? process.threadCpuUsage() : process.cpuUsage();
  return (user + system) / 1000;
}

describe('snowflake routes (in-process)', () => {
  it('GET /api/snowflake/get/{tag} answers one ID as text/plain, like Leaf', async () => {
    const server = await testServer({ snowflake: { registry: 'static:7' } });
    try {
      let last = 0n;
      const started = Date.now();
      for (let i = 0; i < 200; i++) {
        const response = await server.app.inject(`/api/snowflake/get/order-${i % 3}`);
        assert.equal(response.statusCode, 200);
        assert.equal(response.headers['content-type'], 'text/plain;charset=UTF-8');
        assert.match(response.body, /^[1-9][0-9]*$/);
        const id = BigInt(response.body);
        assert.ok(id > last, `${id} after ${last}`);
        last = id;
      }
      const parts = decomposeId(last, getLayout('idmint'));
      assert.equal(parts.workerId, 7);
      assert.ok(parts.timestamp >= started - 5 && parts.timestamp <= Date.now() + 1000);
    } finally {
      await server.close();
    }
  });

  it('checks the tag on the Leaf route: 1 to 128 characters, as Leaf', async () => {
    const server = await testServer();
    try {
      for (const tag of [
        'a'.repeat(128),
        'a.b:c_d-E9',
        'bad%20tag',
        'caf%C3%A9',
        'a%2Fb',
        'semi%3Bcolon',
      ]) {
        assert.equal((await server.app.inject(`/api/snowflake/get/${tag}`)).statusCode, 200, tag);
      }
      for (const tag of ['a'.repeat(129), '%00', 'a%00b']) {
        const message = assertError(
          await server.app.inject(`/api/snowflake/get/${tag}`),
          400,
          'INVALID_ARGUMENT',
        );
        assert.match(
          message,
          /^tag must be 1 to 128 characters, none of them U\+0000 or an unpaired surrogate, got "/,
          tag,
        );
      }
    } finally {
      await server.close();
    }
  });

  it('GET /v1/snowflake?count=N answers {workerId, ids}, N increasing IDs', async () => {
    const server = await testServer({ snowflake: { registry: 'static:3' } });
    try {
      const one = await server.app.inject('/v1/snowflake');
      assert.equal(one.statusCode, 200);
      const single = one.json() as { workerId: number; ids: string[] };
      assert.equal(single.workerId, 3);
      assert.equal(single.ids.length, 1);

      const response = await server.app.inject('/v1/snowflake?count=10000');
      assert.equal(response.statusCode, 200);
      assert.match(String(response.headers['content-type']), /^application\/json/);
      const body = response.json() as { workerId: number; ids: string[] };
      assert.deepEqual(Object.keys(body), ['workerId', 'ids']);
      assert.equal(body.ids.length, 10_000);
      let last = BigInt(single.ids[0] ?? '0');
      for (const text of body.ids) {
        assert.equal(typeof text, 'string');
        const id = BigInt(text);
        assert.ok(id > last);
        last = id;
        assert.equal(decomposeId(id, getLayout('idmint')).workerId, 3);
      }
    } finally {
      await server.close();
    }
  });

  it('refuses a count that is not plain digits in 1..api.maxBatch, naming the limit', async () => {
    const server = await testServer({ api: { maxBatch: 500 } });
    try {
      assert.equal((await server.app.inject('/v1/snowflake?count=500')).statusCode, 200);
      for (const count of [
        '501',
        '0',
        '-1',
        'abc',
        '1e3',
        '0x10',
        '2.0',
        '%205',
        '',
        '99999999999999999999',
      ]) {
        const message = assertError(
          await server.app.inject(`/v1/snowflake?count=${count}`),
          400,
          'INVALID_ARGUMENT',
        );
        assert.match(message, /^count must be an integer from 1 to 500, got "/, `count=${count}`);
      }
      assert.match(
        assertError(
          await server.app.inject('/v1/snowflake?count=1&count=2'),
          400,
          'INVALID_ARGUMENT',
        ),
        /got more than one value/,
      );
    } finally {
      await server.close();
    }
  });

  it('decodes IDs in idmint shape and, on /decodeSnowflakeId, Leaf shape', async () => {
    const server = await testServer({ snowflake: { layout: 'leaf' } });
    try {
      // The example in Leaf's own LeafMonitorController, in UTC (Leaf prints Beijing time).
      const id = composeId(getLayout('leaf'), {
        timestamp: 1567733700834,
        workerId: 39,
        sequence: 3448,
      }).toString();
      const leaf = await server.app.inject(`/decodeSnowflakeId?snowflakeId=${id}`);
      assert.equal(leaf.statusCode, 200);
      assert.equal(
        leaf.body,
        '{"workerId":"39","sequenceId":"3448",' +
          '"timestamp":"1567733700834(2019-09-06 01:35:00.834)"}',
      );

      const v1 = await server.app.inject(`/v1/snowflake/decode/${id}`);
      assert.equal(v1.statusCode, 200);
      assert.deepEqual(v1.json(), {
        id,
        layout: 'leaf',
        timestamp: 1567733700834,
        date: '2019-09-06T01:35:00.834Z',
        workerId: 39,
        sequence: 3448,
      });

      for (const bad of ['-1', '01', '12x', '9223372036854775808']) {
        assertError(await server.app.inject(`/v1/snowflake/decode/${bad}`), 400, 'INVALID_ID');
      }
      assert.match(
        assertError(await server.app.inject('/decodeSnowflakeId'), 400, 'INVALID_ID'),
        /snowflakeId is required/,
      );
    } finally {
      await server.close();
    }
  });

  it("IDMINT_LAYOUT=leaf brings Leaf's random sequence start unless a spread is set", async () => {
    const leaf = await testServer({ api: { maxBatch: 1_000_000 }, snowflake: { layout: 'leaf' } });
    try {
      // The batch bound counts the spread: 3,997 IDs per ms (4,096 less 0-99) in 100 ms.
      assert.match(
        assertError(await leaf.app.inject('/v1/snowflake?count=399701'), 400, 'INVALID_ARGUMENT'),
        /from 1 to 399700/,
      );
    } finally {
      await leaf.close();
    }
    const off = await testServer({
      api: { maxBatch: 1_000_000 },
      snowflake: { layout: 'leaf', sequenceSpread: 0 },
    });
    try {
      assert.match(
        assertError(await off.app.inject('/v1/snowflake?count=409601'), 400, 'INVALID_ARGUMENT'),
        /from 1 to 409600/,
      );
    } finally {
      await off.close();
    }
  });

  it("/decodeSnowflakeId answers as Leaf's code does, byte for byte, however sent", async () => {
    const server = await testServer({ snowflake: { layout: 'leaf' } });
    // Each body as Leaf's decodeSnowflakeId (LeafMonitorController, 86a6441) printed it, run
    // under Java 17 in UTC: Long.parseLong's input rules, Java's >> on negatives, HashMap order.
    const failure = '{"errorMsg":"snowflake Id反解析发生异常!"}';
    const parts = (worker: string, sequence: string, time: string) =>
      `{"workerId":"${worker}","sequenceId":"${sequence}","timestamp":"${time}"}`;
    const epoch = '1288834974657(2010-11-04 01:42:54.657)';
    const cases: [string, string][] = [
      ['118580044213907456', parts('287', '0', '1317106660308(2011-09-27 06:57:40.308)')],
      ['-1', parts('1023', '4095', '1288834974656(2010-11-04 01:42:54.656)')],
      ['00012', parts('0', '12', epoch)],
      ['%2B5', parts('0', '5', epoch)],
      ['-9223372036854775808', parts('0', '0', '-910188280895(1941-02-27 09:55:19.105)')],
      ['9223372036854775807', parts('1023', '4095', '3487858230208(2080-07-10 17:30:30.208)')],
      // Arabic-Indic and fullwidth digits: Character.digit takes every decimal digit.
      [encodeURIComponent('١٢'), parts('0', '12', epoch)],
      [encodeURIComponent('１２'), parts('0', '12', epoch)],
      ['9223372036854775808', failure],
      ['12x', failure],
      ['', failure],
      ['%2B', failure],
      ['-', failure],
      ['+5', failure], // a + in a query string is a space: " 5"
      ['5%20', failure],
      [encodeURIComponent('𝟏'), failure], // outside the BMP: two UTF-16 units, neither a digit
      ['1&snowflakeId=2', failure], // Spring joins repeated values: "1,2"
    ];
    try {
      for (const [query, body] of cases) {
        const answer = await server.app.inject(`/decodeSnowflakeId?snowflakeId=${query}`);
        assert.equal(answer.statusCode, 200, query);
        assert.equal(answer.headers['content-type'], 'application/json;charset=UTF-8', query);
        assert.equal(answer.body, body, query);
      }
      // A form body, as Spring binds a @RequestParam: POST (Tomcat), PUT and PATCH (Spring Boot's
      // HttpPutFormContentFilter); not DELETE, and not a body of another type.
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      for (const method of ['POST', 'PUT', 'PATCH'] as const) {
        const answer = await server.app.inject({
          method,
          url: '/decodeSnowflakeId',
          headers: form,
          payload: 'snowflakeId=00012',
        });
        assert.equal(answer.body, parts('0', '12', epoch), method);
      }
      const both = await server.app.inject({
        method: 'POST',
        url: '/decodeSnowflakeId?snowflakeId=5',
        headers: form,
        payload: 'snowflakeId=5',
      });
      assert.equal(both.body, failure, 'query and form values join: "5,5"');
      // Differences docs/api.md lists: JSON whatever Accept says (Leaf: 406), no suffix match.
      const html = await server.app.inject({
        url: '/decodeSnowflakeId?snowflakeId=00012',
        headers: { accept: 'text/html' },
      });
      assert.equal(html.body, parts('0', '12', epoch));
      assert.equal(html.headers['content-type'], 'application/json;charset=UTF-8');
      assert.equal(
        (await server.app.inject('/decodeSnowflakeId.json?snowflakeId=1')).statusCode,
        404,
      );
      for (const [method, headers] of [
        ['DELETE', form],
        ['POST', { 'content-type': 'text/plain' }],
      ] as const) {
        const answer = await server.app.inject({
          method,
          url: '/decodeSnowflakeId',
          headers,
          payload: 'snowflakeId=12',
        });
        assertError(answer, 400, 'INVALID_ID');
      }
    } finally {
      await server.close();
    }
  });

  it('decodes the datacenter too for layouts that have one', async () => {
    const server = await testServer({
      snowflake: { layout: 'twitter', datacenterId: 21, registry: 'static:4' },
    });
    try {
      const id = (await server.app.inject('/api/snowflake/get/x')).body;
      const v1 = (await server.app.inject(`/v1/snowflake/decode/${id}`)).json() as Record<
        string,
        unknown
      >;
      assert.equal(v1['datacenterId'], 21);
      assert.equal(v1['workerId'], 4);
      const leaf = (
        await server.app.inject(`/decodeSnowflakeId?snowflakeId=${id}`)
      ).json() as Record<string, unknown>;
      assert.equal(leaf['datacenterId'], '21');
      assert.equal(leaf['workerId'], '4');
    } finally {
      await server.close();
    }
  });

  it('answers 503 CLOCK_MOVED_BACKWARDS when the clock goes back, counts it', async () => {
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const server = await testServer(
      { snowflake: { clock: 'system', rollback: { policy: 'refuse' } } },
      { clock },
    );
    try {
      assert.equal((await server.app.inject('/api/snowflake/get/a')).statusCode, 200);
      clock.advance(-3000);
      for (const url of ['/api/snowflake/get/a', '/v1/snowflake?count=5']) {
        const response = await server.app.inject(url);
        assert.match(assertError(response, 503, 'CLOCK_MOVED_BACKWARDS'), /clock is behind/, url);
        assert.equal(response.headers['retry-after'], '3');
      }
      clock.advance(3001);
      assert.equal((await server.app.inject('/api/snowflake/get/a')).statusCode, 200);
      const metrics = (await server.app.inject('/metrics')).body;
      assert.match(metrics, /^idmint_snowflake_clock_rollbacks_total [1-9]/m);
    } finally {
      await server.close();
    }
  });

  it('answers MODE_DISABLED, never an ID or 0, when snowflake mode is off', async () => {
    const server = await testServer({ snowflake: { enabled: false } });
    try {
      for (const url of ['/api/snowflake/get/a', '/v1/snowflake?count=2']) {
        assert.match(
          assertError(await server.app.inject(url), 404, 'MODE_DISABLED'),
          /snowflake mode/,
          url,
        );
      }
      assert.equal(
        (await server.app.inject('/v1/snowflake/decode/117600667735949312')).statusCode,
        200,
      );
      const ready = await server.app.inject('/readyz');
      assert.equal(ready.statusCode, 200);
      assert.equal(
        (ready.json() as { checks: Record<string, string> }).checks['snowflake'],
        undefined,
      );
    } finally {
      await server.close();
    }
  });

  it('bounds count by what the layout issues in 100 ms: a 400 naming it', async () => {
    const server = await testServer({
      api: { maxBatch: 1_000_000 },
      snowflake: { layout: 'js-safe', registry: 'static:2' },
    });
    try {
      // js-safe: 2^6 = 64 IDs per 1 ms unit, 100 units.
      assert.equal(maxBatchFor(getLayout('js-safe')), 6400);
      const ok = await server.app.inject('/v1/snowflake?count=6400');
      assert.equal(ok.statusCode, 200);
      const body = ok.json() as { workerId: number; ids: string[] };
      assert.equal(body.workerId, 2);
      assert.equal(body.ids.length, 6400, 'all of the count asked for, never part of it');
      assert.ok(body.ids.every((id, i) => i === 0 || BigInt(id) > BigInt(body.ids[i - 1] ?? '0')));
      for (const count of ['6401', '10000', '1000000']) {
        const message = assertError(
          await server.app.inject(`/v1/snowflake?count=${count}`),
          400,
          'INVALID_ARGUMENT',
        );
        assert.equal(
          message,
          `count must be an integer from 1 to 6400, got "${count}": layout "js-safe" issues ` +
            `6400 IDs in 100 ms, the most one batch may take; ask for more in several requests`,
        );
      }
      const openapi = (await server.app.inject('/openapi.json')).json() as {
        paths: Record<
          string,
          {
            get: {
              parameters: { name: string; schema: { maximum: number }; description?: string }[];
            };
          }
        >;
      };
      const count = openapi.paths['/v1/snowflake']?.get.parameters.find((p) => p.name === 'count');
      assert.equal(count?.schema.maximum, 6400);
      assert.match(JSON.stringify(count), /what layout \\"js-safe\\" issues in 100 ms/);
      // The segment routes keep api.maxBatch: the bound is the snowflake layout's alone.
      const segment = openapi.paths['/v1/segment/{tag}']?.get.parameters.find(
        (p) => p.name === 'count',
      );
      assert.equal(segment?.schema.maximum, 1_000_000);
    } finally {
      await server.close();
    }
  });

  it('mints the largest batch (js-safe) while /healthz answers in 50 ms', {
    timeout: 60_000,
  }, async (t) => {
    const server = await testServer({
      port: 0,
      api: { maxBatch: 1_000_000 },
      snowflake: { layout: 'js-safe', registry: 'static:1' },
    });
    const url = await server.listen();
    try {
      const limit = maxBatchFor(getLayout('js-safe'));
      await (await fetch(`${url}/healthz`)).text(); // connections and code warm
      await (await fetch(`${url}/v1/snowflake?count=100`)).text();
      let minting = true;
      const started = performance.now();
      const batch = fetch(`${url}/v1/snowflake?count=${limit}`).then(async (response) => {
        const text = await response.text();
        minting = false;
        return { status: response.status, text, ms: performance.now() - started };
      });
      // Health checks one after another for as long as the batch is in flight, each timed on two
      // clocks: the wall clock, and the CPU time of this process's main thread (server and client
      // share it). The second counts what the event loop did before it could answer; the wall
      // clock also counts time the OS gave other processes: on this shared 2-core machine, with
      // no batch at all, the slowest of 250 to 570 health checks in half a second took 40 to
      // 139 ms at a load average of 33.
      const wall: number[] = [];
      const cpu: number[] = [];
      while (minting) {
        const sentAt = performance.now();
        const cpuAt = threadCpuMs();
        const health = await fetch(`${url}/healthz`);
        assert.equal(health.status, 200);
        await health.text();
        wall.push(performance.now() - sentAt);
        cpu.push(threadCpuMs() - cpuAt);
      }
      const { status, text, ms } = await batch;
      assert.equal(status, 200);
      const ids = (JSON.parse(text) as { ids: string[] }).ids;
      assert.equal(ids.length, limit);
      assert.equal(new Set(ids).size, limit);
      const sorted = [...wall].sort((a, b) => a - b);
      const median = sorted[sorted.length >> 1] ?? Number.POSITIVE_INFINITY;
      const busiest = cpu.reduce((max, value) => Math.max(max, value), 0);
      const shown =
        `${wall.length} health checks during a ${Math.round(ms)} ms batch of ${limit}: wall ` +
        `median ${median.toFixed(1)} ms, slowest ${(sorted.at(-1) ?? 0).toFixed(1)} ms; at ` +
        `most ${busiest.toFixed(1)} ms of CPU before an answer`;
      t.diagnostic(shown);
      assert.ok(
        busiest < 50,
        `the event loop was busy 50 ms or more before answering a health check: ${shown}`,
      );
      assert.ok(median < 50, shown);
      assert.ok(wall.length >= 3, `too few health checks overlapped the batch: ${shown}`);
    } finally {
      await server.close();
    }
  });
});
