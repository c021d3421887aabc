import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { IdMintClient } from '../src/client/client.ts';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import { isIdMintError } from '../src/core/errors.ts';
import { testServer, type TestServer } from './support/server.ts';

// Periodic tags through the server, on a manual clock: formatted IDs on the v1 and Leaf routes,
// the pause after a boundary, overflow refused, the tag's own row never serving bare IDs.

/** 2026-11-28 00:00 in Shanghai (UTC+8): the boundary the tests cross. */
const BOUNDARY = Date.UTC(2026, 10, 27, 16);
const SKEW = 3000;

describe('periodic tags on the server', () => {
  const clock = new ManualClock(BOUNDARY - 60_000);
  let server: TestServer;

  before(async () => {
    server = await testServer(
      { segment: { periodSkewMs: SKEW, waitTimeoutMs: 1000 }, snowflake: { enabled: false } },
      { clock },
    );
  });
  after(() => server.close());

  const create = async (tag: string, template: string, step = 10) => {
    const response = await server.app.inject({
      method: 'POST',
      url: '/v1/tags',
      payload: { tag, step, periodic: { period: 'day', timeZone: 'Asia/Shanghai', template } },
    });
    assert.equal(response.statusCode, 201, response.body);
    return response.json() as Record<string, unknown>;
  };
  const batch = async (tag: string, count: number) => {
    const response = await server.app.inject(`/v1/segment/${tag}?count=${count}`);
    return { status: response.statusCode, body: response.json() as Record<string, unknown> };
  };
  const leaf = (tag: string) => server.app.inject(`/api/segment/get/${tag}`);
  const errorCode = (body: Record<string, unknown>) => (body['error'] as { code: string }).code;

  it('creates a periodic tag; formatted IDs of the current period, dense from 1', async () => {
    const created = await create('orders', '{yyyyMMdd}{seq:6}');
    assert.deepEqual(created['periodic'], {
      period: 'day',
      timeZone: 'Asia/Shanghai',
      template: '{yyyyMMdd}{seq:6}',
      start: 1,
    });
    assert.deepEqual((await batch('orders', 3)).body, {
      tag: 'orders',
      period: '20261127',
      ids: ['20261127000001', '20261127000002', '20261127000003'],
    });
    const single = await leaf('orders');
    assert.equal(single.statusCode, 200);
    assert.equal(single.body, '20261127000004');
    // The period's row is an ordinary tag, created on demand with the tag's step.
    const row = await server.app.inject('/v1/tags/orders@20261127');
    assert.equal(row.json().step, 10);
  });

  it('nothing for the allowed skew after the boundary, then the new period from 1', async () => {
    clock.set(BOUNDARY - 1);
    assert.equal((await leaf('orders')).body, '20261127000005');
    clock.set(BOUNDARY);
    const held = await leaf('orders');
    assert.equal(held.statusCode, 503);
    assert.equal(held.json().error.code, 'PERIOD_SWITCHING');
    assert.equal(held.headers['retry-after'], '3');
    clock.set(BOUNDARY + SKEW - 1);
    assert.equal(errorCode((await batch('orders', 2)).body), 'PERIOD_SWITCHING');
    clock.set(BOUNDARY + SKEW);
    assert.deepEqual((await batch('orders', 2)).body['ids'], ['20261128000001', '20261128000002']);
    assert.equal((await leaf('orders')).body, '20261128000003');
  });

  it('never goes back to a period it left when the clock does', async () => {
    clock.set(BOUNDARY - 10);
    const response = await leaf('orders');
    assert.equal(response.statusCode, 503);
    assert.equal(response.json().error.code, 'CLOCK_MOVED_BACKWARDS');
    clock.set(BOUNDARY + SKEW + 1000);
    assert.equal((await leaf('orders')).body, '20261128000004');
  });

  it('refuses a sequence that outgrows its digits, never wrapping it', async () => {
    await create('tiny', '{yyyyMMdd}{seq:2}', 10);
    const first = await batch('tiny', 99);
    assert.equal((first.body['ids'] as string[]).at(-1), '2026112899');
    const over = await batch('tiny', 1);
    assert.equal(over.status, 503);
    assert.equal(errorCode(over.body), 'PERIOD_SEQUENCE_EXHAUSTED');
    assert.equal((await leaf('tiny')).statusCode, 503);
  });

  it('answers a template with letters on v1 only; Leaf and binary answer numbers', async () => {
    await create('letters', 'ORD-{yyyyMMdd}-{seq:4}');
    assert.deepEqual((await batch('letters', 1)).body['ids'], ['ORD-20261128-0001']);
    const response = await leaf('letters');
    assert.equal(response.statusCode, 409);
    assert.equal(response.json().error.code, 'PERIODIC_NOT_NUMERIC');
    const octets = await server.app.inject({
      url: '/v1/segment/letters?count=1',
      headers: { accept: 'application/octet-stream' },
    });
    assert.equal(octets.statusCode, 409);
  });

  it('answers an all-digit template in binary as 64-bit numbers', async () => {
    const response = await server.app.inject({
      url: '/v1/segment/orders?count=2',
      headers: { accept: 'application/octet-stream' },
    });
    assert.equal(response.statusCode, 200);
    const bytes = response.rawPayload;
    assert.deepEqual(
      [bytes.readBigUInt64BE(0), bytes.readBigUInt64BE(8)],
      [20261128000005n, 20261128000006n],
    );
  });

  it("refuses ranges a caller would issue itself, on the range route and TinyId's", async () => {
    const range = await server.app.inject('/v1/segment/orders/range?size=5');
    assert.equal(range.statusCode, 409, range.body);
    assert.equal(range.json().error.code, 'PERIODIC_RANGE_REFUSED');
    const segment = await server.app.inject('/tinyid/id/nextSegmentId?bizType=orders');
    assert.equal(segment.json().code, 6);
    assert.match(segment.json().message, /^PERIODIC_RANGE_REFUSED/);
  });

  it("answers TinyId's ID routes with formatted IDs of an all-digit template only", async () => {
    const simple = await server.app.inject('/tinyid/id/nextIdSimple?bizType=orders&batchSize=2');
    assert.equal(simple.body, '20261128000007,20261128000008');
    const json = await server.app.inject('/tinyid/id/nextId?bizType=orders&batchSize=1');
    assert.equal(json.body, '{"data":[20261128000009],"code":200,"message":""}');
    const letters = await server.app.inject('/tinyid/id/nextId?bizType=letters');
    // nextId wraps its failures as TinyId's server does (docs/api.md, Differences from TinyId).
    assert.match(letters.json().message, /^error query segmentId: PERIODIC_NOT_NUMERIC/);
  });

  it('gives the client formatted IDs with their period, refuses local mode ranges', async () => {
    const url = await server.listen();
    const client = new IdMintClient({ url, retries: 0 });
    assert.deepEqual(await client.periodicBatch('letters', 2), {
      period: '20261128',
      ids: ['ORD-20261128-0002', 'ORD-20261128-0003'],
    });
    assert.equal(await client.segment('orders'), '20261128000010');
    await assert.rejects(client.nextId('orders'), (error: unknown) =>
      isIdMintError(error, 'PERIODIC_RANGE_REFUSED'),
    );
  });

  it('takes a new step from the next period on, never one a period cannot hold', async () => {
    const patch = (tag: string, payload: Record<string, unknown>) =>
      server.app.inject({ method: 'PATCH', url: `/v1/tags/${tag}`, payload });
    const tooLarge = await patch('tiny', { step: 100 });
    assert.equal(tooLarge.statusCode, 400);
    assert.match(tooLarge.json().error.message, /step 100 is larger than the 99/);
    assert.equal((await patch('tiny', { opaque: true })).statusCode, 400);
    assert.equal((await patch('tiny', { step: 50 })).statusCode, 200);
    clock.set(BOUNDARY + 86_400_000 + SKEW);
    assert.equal((await leaf('tiny')).body, '2026112901');
    assert.equal((await server.app.inject('/v1/tags/tiny@20261129')).json().step, 50);
    assert.equal((await server.app.inject('/v1/tags/tiny@20261128')).json().step, 10);
  });

  it('refuses a template that cannot hold the step, and unknown tokens, naming them', async () => {
    const response = await server.app.inject({
      method: 'POST',
      url: '/v1/tags',
      payload: {
        tag: 'bad',
        step: 1000,
        periodic: { period: 'day', timeZone: 'UTC', template: '{yyyyMMdd}{seq:2}' },
      },
    });
    assert.equal(response.statusCode, 400);
    assert.match(response.json().error.message, /step 1000 is larger than the 99 sequence numbers/);
  });
});
