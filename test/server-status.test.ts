import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { defaultDashboardDir } from '../src/server/routes/dashboard.ts';
import { SEGMENT_BACKENDS, withPort } from './support/segment-backends.ts';
import { assertError } from './support/http.ts';
import { testServer, type TestServer } from './support/server.ts';
import { SERVICES, describeWithServices, hostPort } from './support/services.ts';
import { TcpProxy } from './support/tcp-proxy.ts';
import { until } from './support/until.ts';

const USER = 'user-token-0123456789';
const ORDERS = 'orders-token-0123456789';
const ADMIN = 'admin-token-0123456789';
const auth = (token: string) => ({ authorization: `Bearer ${token}` });

interface TagStatus {
  tag: string;
  serving: string;
  step: number;
  remaining: number;
  fill: number;
  range: { start: string; end: string; position: string } | null;
  next: { start: string; end: string } | null;
  nextLoad: string;
  idsUntilNextLoad: number | null;
  idsPerSecond: number | null;
  rates: number[] | null;
  lastError: { code: string; message: string | null } | null;
  steps: { at: string; step: number; ms: number }[];
}
interface Status {
  auth: { enabled: boolean; admin: boolean };
  server: {
    requests: {
      requestsPerSecond: number;
      routes: { route: string; requests: number; p99Ms: number | null }[];
    } | null;
    errors: { code: string; count: number }[];
    health: { name: string; ok: boolean; detail: string }[];
  };
  segment: {
    total: number;
    inUse: number;
    matched: number;
    offset: number;
    limit: number;
    nextAfter: string | null;
    tags: TagStatus[];
  } | null;
  snowflake: {
    workerId: number;
    status: string;
    expiresInMs: number | null;
    horizon: string | null;
    validUntil: string | null;
    peerClock: unknown;
    rollbacks: { count: number; policy: string };
    idsPerSecond: number | null;
  } | null;
}

async function status(
  server: TestServer,
  query = '',
  headers: Record<string, string> = {},
): Promise<Status> {
  const response = await server.app.inject({ url: `/v1/status${query}`, headers });
  assert.equal(response.statusCode, 200, response.body);
  return response.json() as Status;
}

describe('GET /v1/status (in-process, SQLite)', () => {
  it("reports each tag's range, fill, step history; the lease and layout", async () => {
    const server = await testServer();
    try {
      await server.app.inject({
        method: 'POST',
        url: '/v1/tags',
        payload: { tag: 'orders', step: 10 },
      });
      for (let i = 0; i < 12; i++)
        assert.equal((await server.app.inject('/api/segment/get/orders')).statusCode, 200);
      const tag = (
        await until(
          () => status(server),
          (s) => s.segment?.tags[0]?.nextLoad === 'ready',
          'next range loaded',
        )
      ).segment?.tags[0];
      assert.equal(tag?.tag, 'orders');
      assert.equal(tag?.serving, 'memory');
      // 12 IDs from ranges of 10: the second range [11, 21) is current, position 13, the third
      // waits.
      assert.deepEqual(tag?.range, { start: '11', end: '21', position: '13' });
      assert.equal(tag?.next?.start, '21');
      assert.equal(tag?.remaining, Number(tag?.next?.end) - 13);
      assert.ok((tag?.fill ?? 0) > 0 && (tag?.fill ?? 1) <= 1);
      // Leaf's first two loads take the stored step; the third is the dynamic step's choice.
      assert.deepEqual(
        tag?.steps.slice(0, 2).map((load) => load.step),
        [10, 10],
      );
      assert.equal(tag?.steps.length, 3);
      assert.ok(tag?.steps.every((load) => load.ms >= 0 && !Number.isNaN(Date.parse(load.at))));

      const snowflake = (await status(server)).snowflake;
      assert.equal(snowflake?.status, 'active');
      assert.equal(snowflake?.workerId, 0);
      assert.ok((snowflake?.expiresInMs ?? 0) > 0, 'the lease has time left');
      assert.ok(
        Date.parse(snowflake?.horizon ?? '') >= Date.parse(snowflake?.validUntil ?? ''),
        'the recorded horizon covers the fence',
      );
      assert.deepEqual(snowflake?.rollbacks, { count: 0, policy: 'wait' });
      // The static registry has no peers: the check ran and found none.
      assert.deepEqual(
        { ...(snowflake?.peerClock as object), checkedAt: undefined },
        {
          check: 'refuse',
          checkedAt: undefined,
          peers: 0,
          offsetMs: null,
          maxPeerSkewMs: 5000,
          skipped: null,
        },
      );
    } finally {
      await server.close();
    }
  });

  it('turns draws into rates per tag, requests/s and p99, errors by code', async () => {
    const server = await testServer();
    try {
      await server.app.inject({
        method: 'POST',
        url: '/v1/tags',
        payload: { tag: 'busy', step: 100 },
      });
      await server.app.inject({
        method: 'POST',
        url: '/v1/tags',
        payload: { tag: 'idle', step: 100 },
      });
      let drawing = true;
      const load = (async () => {
        while (drawing) {
          await server.app.inject('/v1/segment/busy?count=20');
          await server.app.inject('/v1/snowflake?count=10');
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      })();
      try {
        const busy = await until(
          () => status(server, '?sort=rate&order=desc'),
          (s) =>
            (s.segment?.tags[0]?.idsPerSecond ?? 0) > 0 && (s.snowflake?.idsPerSecond ?? 0) > 0,
          'rates above zero',
        );
        assert.equal(
          busy.segment?.tags[0]?.tag,
          'busy',
          'sorted by rate, the busy tag comes first',
        );
        assert.ok((busy.segment?.tags[0]?.rates ?? []).some((rate) => rate > 0));
        const idle = busy.segment?.tags.find((t) => t.tag === 'idle');
        assert.ok(idle?.idsPerSecond === null || idle?.idsPerSecond === 0);
        const routes = busy.server.requests?.routes ?? [];
        const segmentRoute = routes.find((r) => r.route === '/v1/segment/:tag');
        assert.ok(
          segmentRoute !== undefined &&
            segmentRoute.requests > 0 &&
            segmentRoute.p99Ms !== null &&
            segmentRoute.p99Ms > 0,
          JSON.stringify(routes),
        );
        assert.ok((busy.server.requests?.requestsPerSecond ?? 0) > 0);
      } finally {
        drawing = false;
        await load;
      }
      for (let i = 0; i < 3; i++) await server.app.inject('/nope');
      await server.app.inject('/v1/segment/busy?count=0');
      const errors = (await status(server)).server.errors;
      assert.deepEqual(errors, [
        { code: 'ROUTE_NOT_FOUND', count: 3 },
        { code: 'INVALID_ARGUMENT', count: 1 },
      ]);
      const metrics = (await server.app.inject('/metrics')).body;
      assert.match(metrics, /^idmint_http_errors_total\{code="ROUTE_NOT_FOUND"\} 3$/m);
      assert.match(metrics, /^idmint_http_errors_total\{code="INVALID_ARGUMENT"\} 1$/m);
    } finally {
      await server.close();
    }
  });

  it('searches, sorts and pages the tags on the server, so thousands cost one page', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-status-'));
    const store = { segment: { store: `sqlite:${join(dir, 'tags.db')}` } };
    const names: string[] = [];
    for (let i = 0; i < 1200; i++)
      names.push(`t${String(i).padStart(4, '0')}${i % 100 === 7 ? '.pay' : ''}`);
    await (await testServer(store)).close(); // creates the table
    // Written straight into the table in one transaction (1,200 POSTs commit one by one), and
    // then a node that starts on them has none in use (created on a node, a tag is in use there).
    const db = new DatabaseSync(join(dir, 'tags.db'));
    db.exec('BEGIN');
    const insert = db.prepare(
      'INSERT INTO leaf_alloc (biz_tag, max_id, step, update_time) VALUES (?, 1, ?, ' +
        'CURRENT_TIMESTAMP)',
    );
    for (const tag of names) insert.run(tag, 10 + (i(tag) % 50));
    db.exec('COMMIT');
    db.close();
    const server = await testServer(store);
    try {
      // Each tag's buffer loads on first use: draw from a few so some have a step.
      for (const tag of ['t0003', 't0010', 't0020'])
        await server.app.inject(`/api/segment/get/${tag}`);
      const first = await status(server);
      assert.equal(first.segment?.total, 1200);
      assert.equal(first.segment?.tags.length, 50, 'one page by default');
      assert.deepEqual(
        first.segment?.tags.slice(0, 2).map((t) => t.tag),
        ['t0000', 't0001'],
      );
      const page = await status(server, '?offset=1150&limit=100');
      assert.equal(page.segment?.tags.length, 50);
      assert.equal(page.segment?.tags.at(-1)?.tag, 't1199');
      const search = await status(server, '?q=.PAY');
      assert.equal(search.segment?.matched, 12);
      assert.ok(search.segment?.tags.every((t) => t.tag.endsWith('.pay')));
      const desc = await status(server, '?sort=tag&order=desc&limit=1');
      assert.equal(desc.segment?.tags[0]?.tag, 't1199');
      const bySteps = await status(server, '?sort=step&order=desc&limit=3');
      assert.deepEqual(bySteps.segment?.tags.map((t) => t.tag).sort(), ['t0003', 't0010', 't0020']);
      // The tags in use only, and their count beside the total.
      const inUse = await status(server, '?tags=in-use');
      assert.deepEqual(
        inUse.segment?.tags.map((t) => t.tag),
        ['t0003', 't0010', 't0020'],
      );
      assert.deepEqual(
        [
          inUse.segment?.total,
          inUse.segment?.inUse,
          inUse.segment?.matched,
          inUse.segment?.nextAfter,
        ],
        [1200, 3, 3, null],
      );
      // The cursor visits every tag exactly once, a bounded page at a time, down as well as up.
      for (const order of ['asc', 'desc']) {
        const seen: string[] = [];
        let after: string | null = null;
        do {
          const page: Status = await status(
            server,
            `?order=${order}&limit=500` +
              (after === null ? '' : `&after=${encodeURIComponent(after)}`),
          );
          assert.ok((page.segment?.tags.length ?? 0) <= 500);
          seen.push(...(page.segment?.tags.map((t) => t.tag) ?? []));
          after = page.segment?.nextAfter ?? null;
        } while (after !== null);
        assert.deepEqual(
          seen,
          order === 'asc' ? [...names].sort() : [...names].sort().reverse(),
          order,
        );
      }
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
    function i(tag: string): number {
      return Number(tag.slice(1, 5));
    }
  });

  it('refuses a bad query with INVALID_ARGUMENT naming what is allowed', async () => {
    const server = await testServer();
    try {
      const cases: [string, RegExp][] = [
        [
          '?sort=size',
          /sort must be one of tag, fill, remaining, rate, step, latency, failures, got "size"/,
        ],
        ['?order=up', /order must be asc or desc/],
        ['?limit=0', /limit must be an integer from 1 to 500, got "0"/],
        ['?limit=501', /limit must be an integer from 1 to 500/],
        ['?offset=-1', /offset must be an integer from 0/],
        ['?limit=1&limit=2', /limit must be given once/],
        [`?q=${'x'.repeat(129)}`, /q must be at most 128 characters/],
        ['?tags=idle', /tags must be one of all, in-use, got "idle"/],
        ['?after=', /after must be a tag name of 1 to 128 characters, got 0/],
        [`?after=${'x'.repeat(129)}`, /after must be a tag name of 1 to 128 characters, got 129/],
        ['?after=a&sort=rate', /after pages in name order: use it with sort=tag/],
        ['?after=a&offset=5', /after and offset are two ways to page: give one of them/],
        ['?after=a&after=b', /after must be given once/],
      ];
      for (const [query, message] of cases) {
        assert.match(
          assertError(await server.app.inject(`/v1/status${query}`), 400, 'INVALID_ARGUMENT'),
          message,
          query,
        );
      }
    } finally {
      await server.close();
    }
  });

  it('with a mode off, says so (null); documented in OpenAPI', async () => {
    const server = await testServer({ snowflake: { enabled: false }, metrics: { enabled: false } });
    try {
      const answer = await status(server);
      assert.equal(answer.snowflake, null);
      assert.equal(answer.server.requests, null, 'no histogram without metrics');
      assert.notEqual(answer.segment, null);
      const doc = (await server.app.inject('/openapi.json')).json() as {
        paths: Record<
          string,
          Record<string, { operationId?: string; parameters?: { name: string }[] }>
        >;
      };
      const operation = doc.paths['/v1/status']?.['get'];
      assert.equal(operation?.operationId, 'status');
      assert.deepEqual(operation?.parameters?.map((p) => p.name).sort(), [
        'after',
        'limit',
        'offset',
        'order',
        'q',
        'sort',
        'tags',
      ]);
      assert.equal(doc.paths['/'], undefined, 'the page is not part of the API document');
    } finally {
      await server.close();
    }
  });
});

describe('GET /v1/status follows the API auth', () => {
  it('needs a token; a limited token sees its tags; messages for admin only', async () => {
    const server = await testServer({
      auth: { tokens: [`${ORDERS}:order*`, USER], adminToken: ADMIN },
    });
    try {
      for (const tag of ['order', 'order.eu', 'user'])
        await server.app.inject({
          method: 'POST',
          url: '/v1/tags',
          headers: auth(ADMIN),
          payload: { tag, step: 10 },
        });
      assertError(await server.app.inject('/v1/status'), 401, 'UNAUTHORIZED');
      assertError(
        await server.app.inject({ url: '/v1/status', headers: auth('wrong-token-0123456789') }),
        401,
        'UNAUTHORIZED',
      );
      const limited = await status(server, '', auth(ORDERS));
      assert.deepEqual(
        limited.segment?.tags.map((t) => t.tag),
        ['order', 'order.eu'],
      );
      assert.equal(limited.segment?.total, 2, 'the count says nothing of the tags it may not see');
      assert.deepEqual(limited.auth, { enabled: true, admin: false });
      assert.deepEqual((await status(server, '?q=user', auth(ORDERS))).segment?.tags, []);
      assert.equal((await status(server, '', auth(USER))).segment?.total, 3);
      assert.deepEqual((await status(server, '', auth(ADMIN))).auth, {
        enabled: true,
        admin: true,
      });
    } finally {
      await server.close();
    }
  });
});

await describeWithServices(
  'GET /v1/status over a failing PostgreSQL (TcpProxy)',
  ['postgres'],
  () => {
    let fixture: Awaited<ReturnType<typeof SEGMENT_BACKENDS.postgres.open>>;
    let proxy: TcpProxy;
    let server: TestServer;

    before(async () => {
      fixture = await SEGMENT_BACKENDS.postgres.open();
      await fixture.store.createTag({ tag: 'flaky', step: 5 });
      proxy = await TcpProxy.start(hostPort(SERVICES.postgres.url));
      server = await testServer({
        auth: { tokens: [USER], adminToken: ADMIN },
        segment: {
          store: withPort(SERVICES.postgres.url, proxy.port),
          table: fixture.table,
          timeoutMs: 1500,
          waitTimeoutMs: 200,
          retryAfterMs: 60_000,
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

    it('shows a failing tag, the store unhealthy, the message to admin only', async () => {
      assert.equal(
        (await server.app.inject({ url: '/api/segment/get/flaky', headers: auth(USER) }))
          .statusCode,
        200,
      );
      proxy.cut();
      // Draw until the buffer is empty and a load has failed (retryAfterMs keeps it failing).
      await until(
        async () =>
          (await server.app.inject({ url: '/api/segment/get/flaky', headers: auth(USER) }))
            .statusCode,
        (code) => code === 503,
        'a 503 once the buffer ran dry',
      );
      const user = await until(
        () => status(server, '', auth(USER)),
        (s) => s.segment?.tags[0]?.serving === 'failing',
        'the tag shown failing',
      );
      const tag = user.segment?.tags[0];
      assert.equal(tag?.lastError?.code, 'STORE_UNAVAILABLE');
      assert.equal(
        tag?.lastError?.message,
        null,
        'a non-admin token gets the code, not the message (it can name the address)',
      );
      assert.equal(tag?.nextLoad, 'failing');
      const health = user.server.health.find((h) => h.name.startsWith('segment store'));
      assert.deepEqual(health, {
        name: 'segment store (postgres)',
        ok: false,
        detail: '1 tag failing to load ranges (STORE_UNAVAILABLE)',
      });
      const admin = await status(server, '', auth(ADMIN));
      assert.equal(
        admin.segment?.tags[0]?.lastError?.message,
        `postgres segment store at ${proxy.address}, allocating a range: connection closed`,
        'the admin token reads the failure itself, in one line',
      );
      const body = JSON.stringify(user);
      for (const secret of [String(proxy.port), 'ECONNREFUSED', 'ECONNRESET', fixture.table])
        assert.ok(!body.includes(secret), `a non-admin status names ${secret}`);
      proxy.restore();
    });
  },
);

describe('the dashboard page', () => {
  const built = mkdtempSync(join(tmpdir(), 'idmint-dashboard-assets-'));
  after(() => rmSync(built, { recursive: true, force: true }));
  mkdirSync(built, { recursive: true });
  writeFileSync(
    join(built, 'index.html'),
    '<html><head><meta name="idmint-auth" content="off" /><script type="module" ' +
      'src="/dashboard/app-ABC.js"></script></head></html>',
  );
  writeFileSync(join(built, 'app-ABC.js'), 'console.log(1)');

  it('serves the built page with a strict CSP and cached bundles', async () => {
    for (const authOn of [false, true]) {
      const server = await testServer(authOn ? { auth: { adminToken: ADMIN } } : {}, {
        dashboardDir: built,
      });
      try {
        for (const url of ['/', '/dashboard', '/dashboard/']) {
          const page = await server.app.inject(url);
          assert.equal(page.statusCode, 200, url);
          assert.match(String(page.headers['content-type']), /^text\/html/);
          assert.match(
            String(page.headers['content-security-policy']),
            /default-src 'none'; script-src 'self'/,
          );
          assert.equal(page.headers['cache-control'], 'no-cache');
          assert.match(
            page.body,
            new RegExp(`<meta name="idmint-auth" content="${authOn ? 'on' : 'off'}" />`),
          );
        }
        const script = await server.app.inject('/dashboard/app-ABC.js');
        assert.equal(script.statusCode, 200);
        assert.match(String(script.headers['content-type']), /^text\/javascript/);
        assert.equal(script.headers['cache-control'], 'public, max-age=31536000, immutable');
        // Open even with auth on: the page holds no data.
        assert.equal(script.body, 'console.log(1)');
        for (const url of [
          '/dashboard/nope.js',
          '/dashboard/..%2Fpackage.json',
          '/dashboard/index.html',
        ])
          assertError(await server.app.inject(url), 404, 'ROUTE_NOT_FOUND');
      } finally {
        await server.close();
      }
    }
  });

  it('without a build says how to make one; serves dist/dashboard', async () => {
    const server = await testServer({}, { dashboardDir: join(built, 'missing') });
    try {
      assert.match(
        assertError(await server.app.inject('/'), 404, 'ROUTE_NOT_FOUND'),
        /dashboard is not built on this server: run `npm run build`/,
      );
    } finally {
      await server.close();
    }
    assert.equal(
      defaultDashboardDir(),
      fileURLToPath(new URL('../dist/dashboard/', import.meta.url)),
    );
  });
});
