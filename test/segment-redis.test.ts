import assert from 'node:assert/strict';
import { it, type TestContext } from 'node:test';
import type { SegmentRange } from '../src/ports/segment-store.ts';
import {
  RedisSegmentStore,
  type RedisClientLike,
} from '../src/stores/redis/redis-segment-store.ts';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { rejectsWith } from './support/segment-store-suite.ts';
import { SERVICES, describeWithServices, hostPort } from './support/services.ts';
import { TcpProxy } from './support/tcp-proxy.ts';

// The Redis store shares one connection among every call. These tests put a TcpProxy between it
// and the real Redis (delaying or swallowing traffic) and wrap the real ioredis client to hold
// one command back, to build the interleavings a slow or lossy network makes.

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A real ioredis client (through `proxy`), wrapped to hold back chosen commands and count
 * disconnects.
 */
async function wrappedClient(t: TestContext, proxy: TcpProxy) {
  const { Redis } = await import('ioredis');
  const { port } = hostPort(SERVICES.redis.url);
  const url = new URL(SERVICES.redis.url);
  url.port = String(proxy.port);
  // As RedisSegmentStore.connect configures it, minus socketTimeout: these tests must show what
  // the store itself does, not what ioredis's dead-connection timer would do.
  const real = new Redis(url.toString(), {
    maxRetriesPerRequest: 1,
    autoResendUnfulfilledCommands: false,
  });
  real.on('error', () => undefined);
  t.after(() => real.quit().catch(() => undefined));
  assert.ok(port > 0);
  const wrapper = {
    disconnects: 0,
    /** Commands whose arguments include this string wait `holdMs` before they are sent. */
    holdFor: undefined as string | undefined,
    holdMs: 0,
    eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown> {
      if (
        wrapper.holdFor !== undefined &&
        args.some((arg) => String(arg).includes(wrapper.holdFor as string))
      ) {
        return sleep(wrapper.holdMs).then(() => real.eval(script, numKeys, ...args));
      }
      return real.eval(script, numKeys, ...args);
    },
    disconnect(reconnect?: boolean): void {
      wrapper.disconnects++;
      real.disconnect(reconnect);
    },
    quit: () => real.quit(),
  } satisfies RedisClientLike & Record<string, unknown>;
  return wrapper;
}

async function fixtureWithTags(t: TestContext, tags: string[]) {
  const fixture = await SEGMENT_BACKENDS.redis.open();
  t.after(() => fixture.dispose());
  for (const tag of tags) await fixture.store.createTag({ tag, step: 10 });
  const proxy = await TcpProxy.start(hostPort(SERVICES.redis.url));
  t.after(() => proxy.close());
  return { fixture, proxy };
}

await describeWithServices('Redis store: one shared connection', ['redis'], () => {
  it('a call that times out fails alone; the others get their ranges', async (t) => {
    const { fixture, proxy } = await fixtureWithTags(t, ['slow', 'fast']);
    const client = await wrappedClient(t, proxy);
    const timeoutMs = 3000;
    const store = new RedisSegmentStore({ client, table: fixture.table, timeoutMs });
    assert.deepEqual(await store.allocate('fast'), {
      tag: 'fast',
      start: 1n,
      end: 11n,
      step: 10,
      tagStep: 10,
    }); // connected

    // Every chunk takes 1 s through the proxy each way, so a call is ~2 s on the wire. The slow
    // call is held back past its timeout (at 3 s); the fast one is sent at 2 s, so the slow one
    // times out in the middle of its flight (1 s of margin on every side, for a loaded machine).
    proxy.delay(1000);
    client.holdFor = ':tag:slow';
    // sent at 5 s: after the proxy is back to normal at ~4 s (a delayed chunk must not overtake)
    client.holdMs = 5000;
    const slow = store.allocate('slow');
    client.holdFor = undefined;
    await sleep(2000);
    const fast = store.allocate('fast');
    await rejectsWith(slow, 'STORE_UNAVAILABLE', /allocating a range: timed out after 3000 ms$/);
    const range: SegmentRange = await fast.catch((error: unknown) =>
      assert.fail(`the call in flight beside the timed-out one failed too: ${String(error)}`),
    );
    assert.deepEqual(range, { tag: 'fast', start: 11n, end: 21n, step: 10, tagStep: 10 });
    assert.equal(client.disconnects, 0, 'the connection was not dropped');

    // The abandoned command still runs when it is finally sent, and its reply lands on it (its
    // range is skipped, never handed to another call).
    proxy.restore();
    await sleep(2000);
    assert.deepEqual(await store.allocate('slow'), {
      tag: 'slow',
      start: 11n,
      end: 21n,
      step: 10,
      tagStep: 10,
    });
    assert.deepEqual(await store.allocate('fast'), {
      tag: 'fast',
      start: 21n,
      end: 31n,
      step: 10,
      tagStep: 10,
    });
    assert.equal(client.disconnects, 0);
  });

  it("a shifted reply stream is caught by nonces; no call gets another's", async (t) => {
    const { fixture, proxy } = await fixtureWithTags(t, ['a', 'b']);
    const client = await wrappedClient(t, proxy);
    const store = new RedisSegmentStore({ client, table: fixture.table, timeoutMs: 500 });
    assert.equal((await store.allocate('a')).start, 1n);

    // The proxy swallows the next request (a black hole that keeps the connection up).
    proxy.hang();
    await rejectsWith(store.allocate('a'), 'STORE_UNAVAILABLE', /timed out/);
    proxy.restore();
    // The next reply on the connection (b's) arrives where ioredis expects the lost request's.
    // Without the check, b would wait for its reply forever, and the call after it would take it.
    const ranges: SegmentRange[] = [];
    let failures = 0;
    for (let i = 0; i < 5 && ranges.length < 2; i++) {
      try {
        ranges.push(await store.allocate('b'));
      } catch {
        failures++;
      }
    }
    assert.equal(ranges.length, 2, 'the store recovered by itself');
    assert.ok(failures <= 1, `${failures} calls failed after the reset`);
    assert.equal(client.disconnects, 1, 'the shifted reply reset the connection once');
    // Each range is b's own: disjoint, in the order the store allocated them, nothing of a's.
    const [first, second] = ranges as [SegmentRange, SegmentRange];
    assert.ok(
      first.tag === 'b' && second.tag === 'b' && second.start >= first.end,
      JSON.stringify(ranges, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)),
    );
    assert.equal((await fixture.store.getTag('b'))?.maxId, second.end);
  });
});
