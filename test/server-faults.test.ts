import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { removeRegistryData } from './support/coordinators.ts';
import { SEGMENT_BACKENDS, withPort } from './support/segment-backends.ts';
import { assertError } from './support/http.ts';
import { metricSample } from './support/metrics-text.ts';
import { testServer, type TestServer } from './support/server.ts';
import { SERVICES, describeWithServices, hostPort, uniqueName } from './support/services.ts';
import { TcpProxy } from './support/tcp-proxy.ts';

// Database trouble as the HTTP client sees it, on real PostgreSQL behind a TCP proxy: the proxy
// hangs or cuts the connection while the server runs, as a stalled or crashed database would.
await describeWithServices(
  'server over a failing PostgreSQL (in-process, TcpProxy)',
  ['postgres'],
  () => {
    let fixture: Awaited<ReturnType<typeof SEGMENT_BACKENDS.postgres.open>>;
    let proxy: TcpProxy;
    let server: TestServer;

    before(async () => {
      fixture = await SEGMENT_BACKENDS.postgres.open();
      await fixture.store.createTag({ tag: 'slow', step: 5 });
      proxy = await TcpProxy.start(hostPort(SERVICES.postgres.url));
      server = await testServer({
        segment: {
          store: withPort(SERVICES.postgres.url, proxy.port),
          table: fixture.table,
          timeoutMs: 1500,
          waitTimeoutMs: 200,
          retryAfterMs: 300,
          // A step that stays small keeps the buffer short, so the test reaches the store quickly.
          maxStep: 5,
          prefetchThreshold: 1,
        },
      });
    });

    after(async () => {
      await server?.close();
      await proxy?.close();
      await fixture?.dispose();
    });

    it('a stalled database: SEGMENTS_NOT_READY once the buffer is used up', async () => {
      const drawn: bigint[] = [];
      const draw = async () => {
        const response = await server.app.inject('/api/segment/get/slow');
        if (response.statusCode === 200) drawn.push(BigInt(response.body));
        return response;
      };
      assert.equal((await draw()).statusCode, 200);
      proxy.hang();
      let failure: Awaited<ReturnType<typeof draw>> | undefined;
      for (let i = 0; i < 50 && failure === undefined; i++) {
        const response = await draw();
        if (response.statusCode !== 200) failure = response;
      }
      assert.ok(failure !== undefined, 'the stall never surfaced');
      assert.match(
        assertError(failure, 503, 'SEGMENTS_NOT_READY'),
        /next range of IDs is not loaded yet/,
      );
      proxy.restore();
      // The stalled allocation is abandoned after timeoutMs (its range, if committed, is skipped);
      // the requests after it get IDs again.
      let recovered = false;
      for (let i = 0; i < 100 && !recovered; i++) {
        recovered = (await draw()).statusCode === 200;
        if (!recovered) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.ok(recovered, 'no ID after the database answered again');
      assert.equal(new Set(drawn).size, drawn.length, 'an ID was issued twice');
      for (let i = 1; i < drawn.length; i++)
        assert.ok((drawn[i] as bigint) > (drawn[i - 1] as bigint));
    });

    it('a NUL character in a description is a 400 on PostgreSQL too', async () => {
      for (const request of [
        {
          method: 'POST' as const,
          url: '/v1/tags',
          payload: { tag: 'nul', step: 5, description: 'a\u0000b' },
        },
        { method: 'PATCH' as const, url: '/v1/tags/slow', payload: { description: 'a\u0000b' } },
      ]) {
        assert.match(
          assertError(await server.app.inject(request), 400, 'INVALID_ARGUMENT'),
          /^description .*U\+0000/,
          request.method,
        );
      }
      assertError(await server.app.inject('/v1/tags/nul'), 404, 'TAG_NOT_FOUND');
    });

    it('a database that is down: STORE_UNAVAILABLE fast, on every route', async () => {
      proxy.cut();
      try {
        let failure: Awaited<ReturnType<typeof server.app.inject>> | undefined;
        for (let i = 0; i < 50 && failure === undefined; i++) {
          const response = await server.app.inject('/api/segment/get/slow');
          if (response.statusCode !== 200) failure = response;
        }
        assert.ok(failure !== undefined);
        const code = (JSON.parse(failure.body) as { error: { code: string } }).error.code;
        assert.ok(code === 'STORE_UNAVAILABLE' || code === 'SEGMENTS_NOT_READY', code);
        assertError(failure, 503, code);
        const listing = await server.app.inject('/v1/tags');
        const message = assertError(listing, 503, 'STORE_UNAVAILABLE');
        // The driver's failure names the database's address; the answer does not, the log does.
        // The ID route's failure was logged just before, so this one points to that line.
        const requestId =
          /\(request req-\w+; the server log has the details(?: under request (req-\w+))?\)$/.exec(
            message,
          )?.[1] ?? /\(request (req-\w+);/.exec(message)?.[1];
        assert.ok(requestId !== undefined, message);
        for (const secret of [
          `${proxy.port}`,
          '127.0.0.1',
          'ECONNREFUSED',
          'ECONNRESET',
          fixture.table,
          'postgres',
        ]) {
          assert.equal(
            listing.body.includes(secret),
            false,
            `the answer reveals ${secret}: ${listing.body}`,
          );
        }
        const line = server.logs.find((entry) => entry['reqId'] === requestId);
        assert.ok(line !== undefined, `no log line for ${requestId}`);
        // One line: the store, its address, the operation in words, the cause as the system gave
        // it (the proxy drops the connection: closed; a load from the stall before: timed out),
        // never the driver's words.
        const logged = String((line['err'] as { message?: string }).message);
        const doing = '(reading the tag list|allocating a range)';
        const form = new RegExp(`, ${doing}: (connection closed|timed out after 1500 ms)$`);
        assert.ok(logged.startsWith(`postgres segment store at ${proxy.address}, `), logged);
        assert.match(logged, form);
        // Health stays up and so does readiness: every node shares the outage, and buffers still
        // serve.
        assert.equal((await server.app.inject('/healthz')).statusCode, 200);
        assert.equal((await server.app.inject('/readyz')).statusCode, 200);
      } finally {
        proxy.restore();
      }
    });
  },
);

// A coordinator that stops answering, as the HTTP client sees it: real etcd behind a TCP proxy.
await describeWithServices('server over a failing etcd (in-process, TcpProxy)', ['etcd'], () => {
  let proxy: TcpProxy;
  let server: TestServer;
  const name = uniqueName('faults');

  before(async () => {
    proxy = await TcpProxy.start(hostPort(SERVICES.etcd.url));
    // A short lease, so losing the coordinator fences the worker within a second or two.
    server = await testServer({
      segment: { enabled: false },
      snowflake: {
        registry: `etcd://${proxy.address}/${name}`,
        leaseTtlMs: 2000,
        registryTimeoutMs: 500,
      },
    });
  });

  after(async () => {
    await server?.close().catch(() => undefined);
    await proxy?.close();
    await removeRegistryData(`etcd://${hostPort(SERVICES.etcd.url).host}/${name}`);
  });

  it('a lease that cannot be renewed fences the worker: LEASE_LOST, then IDs', async () => {
    assert.equal((await server.app.inject('/api/snowflake/get/x')).statusCode, 200);
    proxy.cut();
    let fenced: Awaited<ReturnType<typeof server.app.inject>> | undefined;
    for (let i = 0; i < 200 && fenced === undefined; i++) {
      const response = await server.app.inject('/api/snowflake/get/x');
      if (response.statusCode !== 200) fenced = response;
      else await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.ok(fenced !== undefined, 'the worker kept issuing without its lease');
    assert.match(assertError(fenced, 503, 'LEASE_LOST'), /fenced|lease/);
    const ready = await server.app.inject('/readyz');
    assert.equal(ready.statusCode, 503);
    assert.match(
      (ready.json() as { checks: { snowflake: string } }).checks.snowflake,
      /^worker \d+ (fenced|recovering)/,
    );
    const fencedMetrics = (await server.app.inject('/metrics')).body;
    assert.match(fencedMetrics, /^idmint_snowflake_lease_held\{worker_id="\d+"\} 0$/m);
    assert.ok(
      (metricSample(fencedMetrics, 'idmint_snowflake_lease_renew_failures_total') ?? 0) >= 1,
      'the failed renewals are counted',
    );
    // Cut past the lease's 2 s TTL: etcd has let the lease expire, so the next renewal finds it
    // gone and the worker recovers on a new lease: a loss.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    proxy.restore();
    let resumed = false;
    for (let i = 0; i < 300 && !resumed; i++) {
      resumed = (await server.app.inject('/api/snowflake/get/x')).statusCode === 200;
      if (!resumed) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.ok(resumed, 'no snowflake ID after the coordinator came back');
    assert.equal((await server.app.inject('/readyz')).statusCode, 200);
    const resumedMetrics = (await server.app.inject('/metrics')).body;
    assert.match(resumedMetrics, /^idmint_snowflake_lease_held\{worker_id="\d+"\} 1$/m);
    assert.ok(
      (metricSample(resumedMetrics, 'idmint_snowflake_lease_losses_total') ?? 0) >= 1,
      'the expired lease is counted as lost',
    );
  });
});
