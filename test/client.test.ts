import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { IdMintClient } from '../src/client/client.ts';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import { isIdMintError } from '../src/core/errors.ts';
import { testServer } from './support/server.ts';

const ADMIN = 'admin-token-0123456789';

describe('IdMintClient against a real server socket', () => {
  it('draws IDs from both modes, decodes, and administers tags', async () => {
    const server = await testServer({
      port: 0,
      snowflake: { registry: 'static:5' },
      auth: { adminToken: ADMIN },
    });
    const url = await server.listen();
    try {
      const client = new IdMintClient({ url: `${url}/`, token: ADMIN });
      const created = await client.createTag({
        tag: 'order',
        step: 100,
        startId: 10n,
        description: 'Orders',
      });
      assert.deepEqual(
        { ...created, updatedAt: null },
        {
          tag: 'order',
          maxId: '10',
          step: 100,
          description: 'Orders',
          updatedAt: null,
          opaque: false,
          delta: 1,
          remainder: 0,
        },
      );
      assert.equal(await client.segment('order'), '10');
      assert.deepEqual(await client.segmentBatch('order', 3), ['11', '12', '13']);
      const one = await client.snowflake();
      const batch = await client.snowflakeBatch(4);
      assert.equal(batch.workerId, 5);
      assert.equal(batch.ids.length, 4);
      assert.ok(BigInt(batch.ids[0] ?? '0') > BigInt(one));
      const parts = await client.decode(one);
      assert.equal(parts.workerId, 5);
      assert.equal(parts.id, one);
      assert.equal((await client.updateTag('order', { step: 500 })).step, 500);
      assert.equal((await client.getTag('order')).step, 500);
      assert.deepEqual(
        (await client.listTags()).map((t) => t.tag),
        ['order'],
      );
      assert.deepEqual(await client.readiness(), {
        ready: true,
        checks: { accepting: 'ok', snowflake: 'ok' },
      });
    } finally {
      await server.close();
    }
  });

  it("throws the server's error code, with the status in details", async () => {
    const server = await testServer({ port: 0, auth: { adminToken: ADMIN } });
    const url = await server.listen();
    try {
      const anonymous = new IdMintClient({ url });
      await assert.rejects(
        anonymous.segment('order'),
        (error) => isIdMintError(error, 'UNAUTHORIZED') && error.details?.['status'] === 401,
      );
      const client = new IdMintClient({ url, token: ADMIN });
      await assert.rejects(
        client.segment('ghost'),
        (error) => isIdMintError(error, 'TAG_NOT_FOUND') && /ghost/.test(error.message),
      );
      await assert.rejects(client.segmentBatch('x', 0), (error) =>
        isIdMintError(error, 'INVALID_ARGUMENT'),
      );
      await client.createTag({ tag: 'dup', step: 1 });
      await assert.rejects(client.createTag({ tag: 'dup', step: 1 }), (error) =>
        isIdMintError(error, 'TAG_EXISTS'),
      );
    } finally {
      await server.close();
    }
  });

  it('retries a 503 with Retry-After, and gives up after its retries', async () => {
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const server = await testServer(
      { port: 0, snowflake: { clock: 'system', rollback: { policy: 'refuse' } } },
      { clock },
    );
    const url = await server.listen();
    try {
      const client = new IdMintClient({ url, retries: 3, maxRetryDelayMs: 50 });
      await client.snowflake();
      clock.advance(-2000);
      let attempts = 0;
      const counting = new IdMintClient({
        url,
        retries: 2,
        maxRetryDelayMs: 10,
        fetch: (input, init) => {
          attempts++;
          return fetch(input, init);
        },
      });
      await assert.rejects(
        counting.snowflake(),
        (error) =>
          isIdMintError(error, 'CLOCK_MOVED_BACKWARDS') && error.details?.['retryAfterMs'] === 2000,
      );
      assert.equal(attempts, 3);
      // The clock comes back while the client waits between attempts: the call succeeds.
      setTimeout(() => clock.advance(2001), 20);
      assert.match(await client.snowflake(), /^[1-9][0-9]*$/);
    } finally {
      await server.close();
    }
  });

  it('reports an unreachable server as SERVER_UNAVAILABLE', async () => {
    // A port that was free a moment ago: nothing listens there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const client = new IdMintClient({
      url: `http://127.0.0.1:${port}`,
      retries: 1,
      maxRetryDelayMs: 1,
    });
    await assert.rejects(
      client.snowflake(),
      (error) => isIdMintError(error, 'SERVER_UNAVAILABLE') && error.retryable,
    );
    assert.throws(
      () => new IdMintClient({ url: 'ftp://x' }),
      (error) => isIdMintError(error, 'INVALID_ARGUMENT'),
    );
    assert.throws(
      () => new IdMintClient({ url: 'nope' }),
      (error) => isIdMintError(error, 'INVALID_ARGUMENT'),
    );
  });
});
