import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
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

  it('a 200 ms server stall shows in every request due during it', async () => {
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
      const result = await openLoop({
        url: `http://127.0.0.1:${port}/x`,
        rate: 400,
        seconds: 1.5,
        connections: 4,
        events: [{ atMs: 500, run: pause }],
      });
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

  it("shows a stall of the generator's own loop in its lag", async () => {
    const server = createServer((_request, response) => response.end('1'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      // The generator's own thread busy for 200 ms: about 400 requests fall due at 2,000/s, and
      // only 2 connections are there to take them when it comes back.
      const stall = () => {
        const until = performance.now() + 200;
        while (performance.now() < until);
      };
      const result = await openLoop({
        url: `http://127.0.0.1:${port}/x`,
        rate: 2000,
        seconds: 1.5,
        connections: 2,
        events: [{ atMs: 500, run: stall }],
      });
      assert.equal(result.intended, 3000);
      // Half of those 400 were reached 100 ms late or more. Lag taken only at sends saw 2 of them,
      // and its p99.9 (the 4th largest of 3,000) stayed at the usual jitter.
      assert.ok(
        result.sendLagP999 >= 100,
        `lag p99.9 ${result.sendLagP999} ms hides the generator's stall`,
      );
      assert.ok(result.sendLagMax >= 190, `lag max ${result.sendLagMax} ms`);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("reopens connections a server closes (Tomcat's 100th answer)", async () => {
    // Tomcat's maxKeepAliveRequests (100 by default, so Leaf's and TinyId's servers): the 100th
    // answer on a connection says `Connection: close`, and the server closes it.
    const MAX_PER_CONNECTION = 100;
    const perSocket = new Map<Socket, number>();
    let served = 0;
    let closedByServer = 0;
    const server = createServer((request, response) => {
      const n = (perSocket.get(request.socket) ?? 0) + 1;
      perSocket.set(request.socket, n);
      served++;
      if (n === MAX_PER_CONNECTION) {
        response.setHeader('connection', 'close');
        closedByServer++;
      }
      response.end('1');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const url = `http://127.0.0.1:${port}/x`;
      const result = await openLoop({
        url,
        rate: 400,
        seconds: 1.5,
        connections: 4,
        drainMs: 2000,
      });
      assert.equal(result.intended, 600);
      assert.equal(result.ok, 600);
      assert.equal(result.failures, 0);
      assert.equal(result.latencies.length, 600);
      assert.equal(served, 600);
      // 600 requests, at most 100 per connection: at least 6 connections, so 2 or more reopened;
      // every connection the server closed before the end was replaced by one.
      assert.ok(perSocket.size >= 6, `${perSocket.size} connections`);
      const reconnects = `${result.reconnects} reconnects, ${closedByServer} closed by the server`;
      assert.ok(result.reconnects >= 2 && result.reconnects <= closedByServer, reconnects);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('reads chunked answers and answers that end with the connection', async () => {
    // node:http sends chunked when the body is written in parts with no length.
    let chunked = 0;
    const http = createServer((_request, response) => {
      chunked++;
      response.write('12');
      response.end('34');
    });
    // An answer with no length and no chunking runs to the end of the connection (RFC 9112 6.3).
    let untilClose = 0;
    const raw = createNetServer((socket) => {
      socket.once('data', () => {
        untilClose++;
        socket.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n1234');
      });
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
    try {
      const run = (server: { address(): unknown }) => {
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/x`;
        return openLoop({ url, rate: 200, seconds: 0.5, connections: 2 });
      };
      const viaChunks = await run(http);
      assert.equal(viaChunks.ok, 100);
      assert.equal(chunked, 100);
      assert.equal(viaChunks.reconnects, 0, 'chunked answers keep the connection');
      const viaClose = await run(raw);
      assert.equal(viaClose.ok, 100);
      assert.equal(untilClose, 100);
      assert.ok(
        viaClose.reconnects >= 98,
        `${viaClose.reconnects} reconnects: one per answer but the last ones`,
      );
    } finally {
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
      await new Promise((resolve) => raw.close(resolve));
    }
  });

  it('waits for every answer when some are errors, and counts those as failures', async () => {
    let served = 0;
    const server = createServer((_request, response) => {
      served++;
      response.statusCode = served % 2 === 0 ? 503 : 200;
      response.end('1');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const result = await openLoop({
        url: `http://127.0.0.1:${port}/x`,
        rate: 200,
        seconds: 0.5,
        connections: 2,
      });
      assert.equal(served, 100);
      assert.equal(result.latencies.length, 100, 'every answer timed, the 503s too');
      assert.equal(result.ok, 50);
      assert.equal(result.failures, 50);
      assert.ok(Number.isFinite(result.max));
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
      const result = await openLoop({
        url: `http://127.0.0.1:${port}/x`,
        rate: 100,
        seconds: 0.2,
        connections: 2,
        drainMs: 200,
      });
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
