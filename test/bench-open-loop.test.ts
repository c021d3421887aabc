import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { dueCount, openLoop, percentile } from '../bench/support/open-loop.ts';

// The open-loop generator behind `npm run bench:latency` (issue 13). Its assertions are lower
// bounds only (a loaded machine makes latencies larger, never smaller), so they do not flake.

describe('bench open-loop generator', () => {
  it('dueCount spaces requests evenly from time 0 and stops at the total', () => {
    assert.equal(dueCount(-1, 0.1, 10), 0);
    assert.equal(dueCount(0, 0.1, 10), 1);
    assert.equal(dueCount(0.25, 0.1, 10), 3);
    assert.equal(dueCount(5, 0.1, 10), 10);
    // 25,000 req/s: 40 µs apart, 25 due in the first millisecond (0, 40, ..., 960 µs).
    assert.equal(dueCount(0.999, 1000 / 25_000, 1_000_000), 25);
  });

  it('percentile picks the smallest sample with at least p% at or below it', () => {
    const sorted = Float64Array.from({ length: 1000 }, (_, i) => i + 1);
    assert.equal(percentile(sorted, 50), 500);
    assert.equal(percentile(sorted, 99), 990);
    assert.equal(percentile(sorted, 99.9), 999);
    assert.equal(percentile(sorted, 100), 1000);
    assert.ok(Number.isNaN(percentile(new Float64Array(0), 50)));
  });

  it('a 200 ms server stall shows in the latencies of every request due during it, not just the ones in flight', async () => {
    let paused = false;
    const held: ServerResponse[] = [];
    let served = 0;
    const server = createServer((_request, response) => {
      served++;
      if (paused) held.push(response);
      else response.end('1');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const pause = () => {
        paused = true;
        setTimeout(() => {
          paused = false;
          for (const response of held.splice(0)) response.end('1');
        }, 200);
      };
      const result = await openLoop({ url: `http://127.0.0.1:${port}/x`, rate: 400, seconds: 1.5, connections: 4, events: [{ atMs: 500, run: pause }] });
      assert.equal(result.intended, 600);
      assert.equal(result.ok, 600);
      assert.equal(result.failures, 0);
      assert.equal(served, 600);
      assert.equal(result.latencies.length, 600);
      // Requests due in the stall's first 100 ms (about 40 at 400/s) waited at least 100 ms from
      // their intended time. A closed-loop client would show at most 4 (one per connection).
      const slow = result.latencies.filter((ms) => ms >= 100).length;
      assert.ok(slow >= 30, `only ${slow} requests took 100 ms or more`);
      assert.ok(result.max >= 190, `max ${result.max} ms`);
      assert.ok(result.p99 >= 100, `p99 ${result.p99} ms hides the stall`);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('counts answers that never come as failures, and says so in max', async () => {
    const server = createServer(() => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const result = await openLoop({ url: `http://127.0.0.1:${port}/x`, rate: 100, seconds: 0.2, connections: 2, drainMs: 200 });
      assert.equal(result.intended, 20);
      assert.equal(result.ok, 0);
      assert.equal(result.failures, 20);
      assert.equal(result.max, Number.POSITIVE_INFINITY);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
