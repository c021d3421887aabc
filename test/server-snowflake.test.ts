import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import { composeId, decomposeId, getLayout } from '../src/core/layout.ts';
import { assertError } from './support/http.ts';
import { testServer } from './support/server.ts';

describe('snowflake routes (in-process)', () => {
  it('GET /api/snowflake/get/{tag} answers one decimal ID as text/plain, like Leaf, strictly increasing', async () => {
    const server = await testServer({ snowflake: { registry: 'static:7' } });
    try {
      let last = 0n;
      const started = Date.now();
      for (let i = 0; i < 200; i++) {
        const response = await server.app.inject(`/api/snowflake/get/order-${i % 3}`);
        assert.equal(response.statusCode, 200);
        assert.equal(response.headers['content-type'], 'text/plain; charset=utf-8');
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

  it('checks the tag on the Leaf route: 1 to 128 of A-Z a-z 0-9 _ . : -', async () => {
    const server = await testServer();
    try {
      assert.equal((await server.app.inject(`/api/snowflake/get/${'a'.repeat(128)}`)).statusCode, 200);
      assert.equal((await server.app.inject('/api/snowflake/get/a.b:c_d-E9')).statusCode, 200);
      for (const tag of ['a'.repeat(129), 'bad%20tag', 'caf%C3%A9', 'a%2Fb', 'semi%3Bcolon']) {
        const message = assertError(await server.app.inject(`/api/snowflake/get/${tag}`), 400, 'INVALID_ARGUMENT');
        assert.match(message, /^tag must be 1 to 128 characters of A-Z a-z 0-9 _ \. : -, got "/, tag);
      }
    } finally {
      await server.close();
    }
  });

  it('GET /v1/snowflake?count=N answers {workerId, ids} with N distinct increasing decimal strings', async () => {
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
      for (const count of ['501', '0', '-1', 'abc', '1e3', '0x10', '2.0', '%205', '', '99999999999999999999']) {
        const message = assertError(await server.app.inject(`/v1/snowflake?count=${count}`), 400, 'INVALID_ARGUMENT');
        assert.match(message, /^count must be an integer from 1 to 500, got "/, `count=${count}`);
      }
      assert.match(assertError(await server.app.inject('/v1/snowflake?count=1&count=2'), 400, 'INVALID_ARGUMENT'), /got more than one value/);
    } finally {
      await server.close();
    }
  });

  it('decodes IDs: /v1/snowflake/decode/{id} in idmint shape, /decodeSnowflakeId in Leaf shape', async () => {
    const server = await testServer({ snowflake: { layout: 'leaf' } });
    try {
      // The example in Leaf's own LeafMonitorController, in UTC (Leaf prints Beijing time).
      const id = composeId(getLayout('leaf'), { timestamp: 1567733700834, workerId: 39, sequence: 3448 }).toString();
      const leaf = await server.app.inject(`/decodeSnowflakeId?snowflakeId=${id}`);
      assert.equal(leaf.statusCode, 200);
      assert.deepEqual(leaf.json(), { timestamp: '1567733700834(2019-09-06 01:35:00.834)', workerId: '39', sequenceId: '3448' });

      const v1 = await server.app.inject(`/v1/snowflake/decode/${id}`);
      assert.equal(v1.statusCode, 200);
      assert.deepEqual(v1.json(), { id, layout: 'leaf', timestamp: 1567733700834, date: '2019-09-06T01:35:00.834Z', workerId: 39, sequence: 3448 });

      for (const bad of ['-1', '01', '12x', '9223372036854775808']) {
        assertError(await server.app.inject(`/v1/snowflake/decode/${bad}`), 400, 'INVALID_ID');
        assertError(await server.app.inject(`/decodeSnowflakeId?snowflakeId=${bad}`), 400, 'INVALID_ID');
      }
      assert.match(assertError(await server.app.inject('/decodeSnowflakeId'), 400, 'INVALID_ID'), /snowflakeId is required/);
    } finally {
      await server.close();
    }
  });

  it('decodes the datacenter too for layouts that have one', async () => {
    const server = await testServer({ snowflake: { layout: 'twitter', datacenterId: 21, registry: 'static:4' } });
    try {
      const id = (await server.app.inject('/api/snowflake/get/x')).body;
      const v1 = (await server.app.inject(`/v1/snowflake/decode/${id}`)).json() as Record<string, unknown>;
      assert.equal(v1['datacenterId'], 21);
      assert.equal(v1['workerId'], 4);
      const leaf = (await server.app.inject(`/decodeSnowflakeId?snowflakeId=${id}`)).json() as Record<string, unknown>;
      assert.equal(leaf['datacenterId'], '21');
      assert.equal(leaf['workerId'], '4');
    } finally {
      await server.close();
    }
  });

  it('answers 503 CLOCK_MOVED_BACKWARDS with Retry-After when the clock goes back, and counts it', async () => {
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const server = await testServer({ snowflake: { rollback: { policy: 'refuse' } } }, { clock });
    try {
      assert.equal((await server.app.inject('/api/snowflake/get/a')).statusCode, 200);
      clock.advance(-3000);
      for (const url of ['/api/snowflake/get/a', '/v1/snowflake?count=5']) {
        const response = await server.app.inject(url);
        assert.match(assertError(response, 503, 'CLOCK_MOVED_BACKWARDS'), /3000 ms behind/, url);
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

  it('answers MODE_DISABLED, never an ID or 0, when snowflake mode is off; decoding still works', async () => {
    const server = await testServer({ snowflake: { enabled: false } });
    try {
      for (const url of ['/api/snowflake/get/a', '/v1/snowflake?count=2']) {
        assert.match(assertError(await server.app.inject(url), 404, 'MODE_DISABLED'), /snowflake mode/, url);
      }
      assert.equal((await server.app.inject('/v1/snowflake/decode/117600667735949312')).statusCode, 200);
      const ready = await server.app.inject('/readyz');
      assert.equal(ready.statusCode, 200);
      assert.equal((ready.json() as { checks: Record<string, string> }).checks['snowflake'], undefined);
    } finally {
      await server.close();
    }
  });
});
