// Issue 23.4, as the server tells it: a store or registry that fails while idmint serves is one
// line in the log and in /v1/status (admin token) naming the backend, its address and the cause
// as the system gave it; the 503 answers of the Leaf, v1 and TinyId routes keep their fixed
// sentence (an address is the operator's to read, not the client's) and never carry a driver's
// words. Real services behind a TcpProxy that refuses (the port closed) or black-holes.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { NOT_IN_A_LINE, assertLine } from './support/failure-lines.ts';
import {
  FAILING_REGISTRIES,
  FAILING_SEGMENT_SETTINGS,
  FAILING_STORES,
} from './support/failing-backends.ts';
import { SEGMENT_BACKENDS, withPort } from './support/segment-backends.ts';
import { dropSet } from './support/segment-sets.ts';
import { type TestServer, testServer } from './support/server.ts';
import { SERVICES, describeWithServices, hostPort, uniqueName } from './support/services.ts';
import { TcpProxy } from './support/tcp-proxy.ts';
import { until } from './support/until.ts';

const ADMIN = 'admin-token-0123456789';
const admin = { authorization: `Bearer ${ADMIN}` };

/** The `err` of every log line carrying `code`, as text (a string, or an error's message). */
function loggedErrors(server: TestServer, code: string): string[] {
  return server.logs
    .filter((line) => line['code'] === code && line['err'] !== undefined)
    .map((line) => {
      const err = line['err'];
      return typeof err === 'string' ? err : String((err as { message?: unknown }).message);
    });
}

/** Asserts an error answer says nothing of the backend: no address, no driver's words. */
function assertPublic(body: string, proxy: TcpProxy): void {
  assert.ok(!body.includes(String(proxy.port)), `the answer names the port: ${body}`);
  assert.ok(!body.includes('127.0.0.1'), `the answer names the host: ${body}`);
  assert.doesNotMatch(body, NOT_IN_A_LINE, body);
}

for (const [kind, name, service] of FAILING_STORES) {
  await describeWithServices(`a server over a ${kind} store that goes down`, [service], () => {
    let proxy: TcpProxy;
    let fixture: Awaited<ReturnType<(typeof SEGMENT_BACKENDS)['postgres']['open']>>;
    let server: TestServer;

    before(async () => {
      proxy = await TcpProxy.start(hostPort(SERVICES[service].url));
      fixture = await SEGMENT_BACKENDS[name].open();
      await fixture.store.createTag({ tag: 'down', step: 5 });
      server = await testServer({
        auth: { adminToken: ADMIN },
        snowflake: { enabled: false },
        segment: {
          store: withPort(SERVICES[service].url, proxy.port),
          table: fixture.table,
          ...FAILING_SEGMENT_SETTINGS,
        },
      });
    });

    after(async () => {
      await proxy?.restore();
      await server?.close();
      await fixture?.dispose();
      await proxy?.close();
    });

    it('log and /v1/status: "<kind> segment store at <address>, <doing>: <cause>"', async () => {
      const leaf = () => server.app.inject({ url: '/api/segment/get/down', headers: admin });
      assert.equal((await leaf()).statusCode, 200);
      await proxy.refuse();
      // Draw until the buffer is used up and the store's refusal is what the log says.
      await until(
        async () => {
          await leaf();
          return loggedErrors(server, 'STORE_UNAVAILABLE');
        },
        (errors) => errors.some((err) => err.endsWith(': connection refused')),
        'a log line with the refusal',
      );
      const at = `${kind} segment store at ${proxy.address}, `;
      const errors = loggedErrors(server, 'STORE_UNAVAILABLE');
      for (const err of errors) assertLine(err, at, /^[a-z' ]+: connection (closed|refused)$/);
      assert.ok(
        errors.some((err) => err === `${at}allocating a range: connection refused`),
        errors.join('\n'),
      );
      const status = await until(
        async () => {
          await leaf();
          const response = await server.app.inject({ url: '/v1/status', headers: admin });
          return response.json() as {
            segment: { tags: { tag: string; lastError: { message: string | null } | null }[] };
          };
        },
        (s) => s.segment.tags.some((t) => t.lastError?.message?.endsWith('refused') === true),
        'the tag failing in /v1/status',
      );
      const tag = status.segment.tags.find((t) => t.tag === 'down');
      assertLine(String(tag?.lastError?.message), at, /^allocating a range: connection refused$/);
    });

    it('Leaf, v1 and TinyId answers: a fixed sentence, no address, no driver words', async () => {
      await proxy.refuse();
      const routes = [
        '/api/segment/get/down',
        '/v1/segment/down',
        `/tinyid/id/nextId?bizType=down&token=${ADMIN}`,
        '/v1/tags',
      ];
      for (const url of routes) {
        const response = await until(
          () => server.app.inject({ url, headers: admin }),
          (r) => r.statusCode !== 200 || /STORE_UNAVAILABLE|SEGMENTS_NOT_READY/.test(r.body),
          `a failure from ${url}`,
        );
        assert.match(response.body, /STORE_UNAVAILABLE|SEGMENTS_NOT_READY/, url);
        assert.match(
          response.body,
          /the segment store is unavailable; retry|next range of IDs is not loaded yet/,
          url,
        );
        assertPublic(response.body, proxy);
      }
    });
  });
}

for (const registry of FAILING_REGISTRIES) {
  const { kind, service } = registry;
  await describeWithServices(`a server over a ${kind} registry that goes down`, [service], () => {
    let proxy: TcpProxy;
    let server: TestServer;
    const cluster = uniqueName('srvdown').toLowerCase();

    before(async () => {
      proxy = await TcpProxy.start(hostPort(SERVICES[service].url));
      server = await testServer({
        auth: { adminToken: ADMIN },
        segment: { enabled: false },
        snowflake: {
          registry: registry.url(proxy.port, cluster),
          cluster,
          // A SQL registry's table of its own, dropped after.
          table: cluster,
          leaseTtlMs: 3000,
          registryTimeoutMs: 500,
        },
      });
    });

    after(async () => {
      await proxy?.restore();
      await server?.close().catch(() => undefined);
      await proxy?.close();
      await registry.clean(cluster);
    });

    it('log and /v1/status: "<kind> worker registry at <address>, <doing>: <cause>"', async () => {
      const draw = () => server.app.inject({ url: '/api/snowflake/get/x', headers: admin });
      assert.equal((await draw()).statusCode, 200);
      await proxy.refuse();
      const errors = await until(
        () => loggedErrors(server, 'REGISTRY_UNAVAILABLE'),
        (found) => found.some((err) => err.endsWith(': connection refused')),
        'a renewal failure with the refusal in the log',
      );
      const at = `${kind} worker registry at ${proxy.address}, `;
      for (const err of errors)
        assertLine(
          err,
          at,
          /^[a-z' ]+( \d+)?: (connection (closed|refused)|could not connect|timed out.*)$/,
        );
      const status = (await server.app.inject({ url: '/v1/status', headers: admin })).json() as {
        snowflake: { lastError: string | null };
      };
      assertLine(
        String(status.snowflake.lastError),
        at,
        /^renewing the lease of worker \d+: connection (closed|refused)$/,
      );
      // Once the fence passes, the answers say LEASE_LOST in their fixed sentence.
      const fenced = await until(draw, (r) => r.statusCode === 503, 'the worker fenced');
      assertPublic(fenced.body, proxy);
    });
  });
}

await describeWithServices(
  'a server over a set of databases, one of which goes down',
  ['postgres', 'redis'],
  () => {
    it("each log line names the failing database's line, no driver's words", async (t) => {
      const { openSegmentStores } = await import('../src/backends/open-segment-store.ts');
      const proxy = await TcpProxy.start(hostPort(SERVICES.postgres.url));
      const table = uniqueName('srvset').toLowerCase();
      t.after(async () => {
        await proxy.close();
        await dropSet([SERVICES.postgres.url, SERVICES.redis.url], table);
      });
      const stores = [withPort(SERVICES.postgres.url, proxy.port), SERVICES.redis.url];
      // The set is formed as `idmint db init --stores` forms it, then served.
      const setup = await openSegmentStores(stores, { init: true, verify: false, table });
      try {
        await setup.join();
        await setup.createTag({ tag: 'down', step: 5 });
      } finally {
        await setup.close();
      }
      const server = await testServer({
        snowflake: { enabled: false },
        segment: {
          store: undefined,
          stores,
          table,
          ...FAILING_SEGMENT_SETTINGS,
        },
      });
      t.after(async () => {
        await proxy.restore();
        await server.close();
      });
      assert.equal((await server.app.inject('/api/segment/get/down')).statusCode, 200);
      await proxy.refuse();
      const at = `postgres segment store at ${proxy.address}, `;
      const errors = await until(
        async () => {
          await server.app.inject('/api/segment/get/down');
          return loggedErrors(server, 'STORE_UNAVAILABLE');
        },
        (found) => found.some((err) => err.includes(at) && err.includes('connection refused')),
        "a log line with the database's refusal",
      );
      for (const err of errors) {
        assert.ok(!err.includes('\n'), err);
        assert.doesNotMatch(err, NOT_IN_A_LINE, err);
      }
    });
  },
);
