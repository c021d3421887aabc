import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { REQUIRE_SERVICES } from './support/services.ts';
import { metricSample as sample } from './support/metrics-text.ts';
import {
  SCRAPE_JOB,
  prometheusSkip,
  startPrometheus,
  type TestPrometheus,
} from './support/prometheus.ts';
import { testServer } from './support/server.ts';
import { waitFor } from './support/workers.ts';

/** Prometheus's promtool (Debian's `prometheus` package; scripts/services.sh up installs it). */
const promtool =
  spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0 ? 'promtool' : undefined;
const missing = 'promtool not found (apt-get install prometheus, or scripts/services.sh up)';
if (promtool === undefined && !REQUIRE_SERVICES)
  process.stderr.write(`\n!!! SKIPPING the promtool check: ${missing}\n`);

describe('/metrics', () => {
  it("passes `promtool check metrics` (Prometheus's own linter)", {
    skip: promtool === undefined && !REQUIRE_SERVICES ? missing : false,
  }, async () => {
    assert.ok(promtool !== undefined, `IDMINT_REQUIRE_SERVICES=1 but ${missing}`);
    const server = await testServer();
    try {
      // Every family the server can expose has a sample: both modes, a range load, errors.
      await server.app.inject({
        method: 'POST',
        url: '/v1/tags',
        payload: { tag: 'lint', step: 10 },
      });
      await server.app.inject('/api/segment/get/lint');
      await server.app.inject('/v1/snowflake?count=2');
      await server.app.inject('/nope');
      const text = (await server.app.inject('/metrics')).body;
      const check = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' });
      assert.equal(`${check.stdout}${check.stderr}`, '');
      assert.equal(check.status, 0);
    } finally {
      await server.close();
    }
  });

  it('streams the text over a socket as it is made (chunked, no one big write)', async () => {
    const server = await testServer({ port: 0 });
    try {
      const url = await server.listen();
      await fetch(`${url}/v1/snowflake`);
      const response = await fetch(`${url}/metrics`);
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('transfer-encoding'), 'chunked');
      assert.equal(
        response.headers.get('content-type'),
        'text/plain; version=0.0.4; charset=utf-8',
      );
      const text = await response.text();
      assert.match(text, /^# HELP idmint_process_cpu_user_seconds_total /);
      assert.equal(requestCount(text, '/v1/snowflake', 'GET'), 1);
      assert.ok(text.endsWith('\n') && !text.endsWith('\n\n\n'), 'ends as registry.metrics() ends');
    } finally {
      await server.close();
    }
  });

  it('counts requests that matched no route (404) or method (405)', async () => {
    const server = await testServer();
    try {
      for (let i = 0; i < 3; i++) await server.app.inject('/no/such/route');
      await server.app.inject({ method: 'DELETE', url: '/v1/tags/x' });
      await server.app.inject({ method: 'HEAD', url: '/v1/snowflake' });
      const text = (await server.app.inject('/metrics')).body;
      assert.equal(requestCount(text, 'unmatched', 'GET', 404), 3);
      assert.equal(requestCount(text, '/v1/tags/:tag', 'DELETE', 405), 1);
      assert.equal(requestCount(text, '/v1/snowflake', 'HEAD', 405), 1);
      assert.doesNotMatch(text, /^# TYPE \S+_total gauge$/m);
    } finally {
      await server.close();
    }
  });

  it('prints each label set once: each method under its own `method`', async () => {
    // Leaf's and TinyId's paths are registered as GET, the other methods, and OPTIONS: three
    // routes of one path, which used to print the same label set twice with different counts.
    const server = await testServer();
    try {
      const sent = await sendThroughEveryMethod(
        async (request) => (await server.app.inject(request)).statusCode,
      );
      const text = (await server.app.inject('/metrics')).body;
      const samples = text
        .split('\n')
        .filter((line) => line !== '' && !line.startsWith('#'))
        .map((line) => line.slice(0, line.lastIndexOf(' ')));
      const repeated = samples.filter((series, i) => samples.indexOf(series) !== i);
      assert.deepEqual(repeated, [], 'series printed more than once');
      for (const { route, method, count } of sent) {
        assert.equal(requestCount(text, route, method), count, `${method} ${route}`);
      }
    } finally {
      await server.close();
    }
  });

  const PROMETHEUS_TITLE =
    'is stored by a real Prometheus as counted: every route and method, and the IDs issued';
  it(PROMETHEUS_TITLE, { skip: prometheusSkip(), timeout: 120_000 }, async () => {
    const server = await testServer({ port: 0 });
    let prometheus: TestPrometheus | undefined;
    try {
      const url = await server.listen();
      prometheus = await startPrometheus(new URL(url).host);
      const sent = await sendThroughEveryMethod(async ({ method, url: path, payload, headers }) => {
        const response = await fetch(`${url}${path}`, { method, body: payload, headers });
        await response.arrayBuffer();
        return response.status;
      });
      const perRoute = new Map<string, number>();
      for (const { route, count } of sent) perRoute.set(route, (perRoute.get(route) ?? 0) + count);
      // The counts are complete in the server's own text now (summed over its lines per route, so
      // this holds whatever the labels); a scrape begun after this reads them all.
      const text = (await server.app.inject('/metrics')).body;
      const counted = new Map<string, number>();
      const countLines = /^idmint_http_request_duration_seconds_count\{([^}]*)\} (\S+)$/gm;
      for (const [, labels, value] of text.matchAll(countLines)) {
        const route = /route="([^"]*)"/.exec(labels ?? '')?.[1] as string;
        counted.set(route, (counted.get(route) ?? 0) + Number(value));
      }
      for (const [route, count] of perRoute)
        assert.equal(counted.get(route), count, `the server counted ${route}`);
      await prometheus.scrapedSince(Date.now());

      // Per route, whatever the method: what a dashboard sums.
      const storedPerRoute = new Map<string, number>();
      const requests = `idmint_http_request_duration_seconds_count{job="${SCRAPE_JOB}"}`;
      for (const { labels, value } of await prometheus.query(`sum by (route) (${requests})`)) {
        storedPerRoute.set(labels['route'] as string, value);
      }
      for (const [route, count] of perRoute) {
        const value = storedPerRoute.get(route);
        assert.equal(
          value,
          count,
          `Prometheus stored ${value} requests for ${route}, sent ${count}`,
        );
      }
      // Prometheus drops the second of two samples of one series in a scrape, and counts it here.
      assert.equal(
        await prometheus.ownMetric('prometheus_target_scrapes_sample_duplicate_timestamp_total'),
        0,
      );
      const stored = await prometheus.query(requests);
      for (const { route, method, count } of sent) {
        const series = stored.find(
          ({ labels }) => labels['route'] === route && labels['method'] === method,
        );
        assert.equal(
          series?.value,
          count,
          `Prometheus stored ${series?.value} for ${method} ${route}, sent ${count}`,
        );
      }

      // The Grafana dashboard's request panels read the stored series as they are now labelled
      // (a rate needs two samples of a series: one more scrape).
      await prometheus.scrapedSince(Date.now());
      for (const { title, expr } of grafanaRequestPanels()) {
        const result = await prometheus.query(expr.replaceAll('$instance', '.*'));
        assert.ok(result.length > 0, `panel "${title}" finds no data: ${expr}`);
        if (!/by \(route\b/.test(expr)) continue;
        for (const route of perRoute.keys()) {
          assert.ok(
            result.some(({ labels }) => labels['route'] === route),
            `panel "${title}": ${route}`,
          );
        }
      }

      // One ID per request on the segment and TinyId routes.
      const ids = sent
        .filter(({ route }) => route !== '/decodeSnowflakeId')
        .reduce((sum, { count }) => sum + count, 0);
      assert.equal(sample(text, 'idmint_ids_issued_total{mode="segment",tag="prom"}'), ids);
      const [issued] = await prometheus.query(
        `idmint_ids_issued_total{job="${SCRAPE_JOB}",mode="segment",tag="prom"}`,
      );
      assert.equal(issued?.value, ids);
    } finally {
      await prometheus?.stop();
      await server.close();
    }
  });

  it('gives series only to tags in use, up to maxTagSeries, the rest summed', async () => {
    const server = await testServer({ metrics: { maxTagSeries: 2 } });
    try {
      for (const tag of ['a', 'b', 'c', 'd', 'idle']) {
        assert.equal(
          (await server.app.inject({ method: 'POST', url: '/v1/tags', payload: { tag, step: 10 } }))
            .statusCode,
          201,
        );
      }
      for (const [tag, n] of [
        ['a', 1],
        ['b', 2],
        ['c', 3],
        ['d', 4],
      ] as const) {
        assert.equal((await server.app.inject(`/v1/segment/${tag}?count=${n}`)).statusCode, 200);
      }
      const text = (await server.app.inject('/metrics')).body;
      assert.equal(sample(text, 'idmint_ids_issued_total{mode="segment",tag="a"}'), 1);
      assert.equal(sample(text, 'idmint_ids_issued_total{mode="segment",tag="b"}'), 2);
      assert.equal(sample(text, 'idmint_ids_issued_total{mode="segment",tag="_other"}'), 7);
      // c and d each loaded a range and prefetched the next: the counter and the histogram agree.
      const otherLoads = sample(text, 'idmint_segment_range_loads_total{tag="_other"}') ?? 0;
      assert.ok(otherLoads >= 2, `loads of c and d: ${otherLoads}`);
      assert.equal(
        sample(text, 'idmint_segment_range_load_seconds_count{tag="_other"}'),
        otherLoads,
      );
      assert.equal(sample(text, 'idmint_segment_tag_step{tag="a"}'), 10);
      // A step summed over tags means nothing: no _other series for it.
      assert.equal(sample(text, 'idmint_segment_tag_step{tag="_other"}'), undefined);
      assert.doesNotMatch(text, /tag="(c|d|idle)"/);
      const tagLabels = new Set([...text.matchAll(/tag="([^"]*)"/g)].map((m) => m[1]));
      assert.deepEqual([...tagLabels].sort(), ['', '_other', 'a', 'b']);
    } finally {
      await server.close();
    }
  });

  it("counts the tag refresh's rows read and failures at each scrape", async () => {
    // 3 tags in the store before the server starts, and every refresh a full read
    // (tagFullRefreshMs 0): the counter grows 3 at a time, from the start-up read on.
    const dir = mkdtempSync(join(tmpdir(), 'idmint-metrics-refresh-'));
    const path = join(dir, 'tags.db');
    const store = new SqliteSegmentStore({ path });
    await store.init();
    for (const tag of ['r1', 'r2', 'r3']) await store.createTag({ tag, step: 10 });
    await store.close();
    const server = await testServer({
      segment: { store: `sqlite:${path}`, tagRefreshMs: 20, tagFullRefreshMs: 0 },
    });
    try {
      const scrape = async (series: string) =>
        sample((await server.app.inject('/metrics')).body, series);
      await waitFor(
        'three full reads of the 3 tags',
        async () => ((await scrape('idmint_segment_tag_rows_read_total')) ?? 0) >= 9,
      );
      const text = (await server.app.inject('/metrics')).body;
      assert.equal(
        (sample(text, 'idmint_segment_tag_rows_read_total') ?? -1) % 3,
        0,
        'whole reads of 3 rows',
      );
      assert.equal(sample(text, 'idmint_segment_tag_refresh_failures_total'), 0);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('costs no series for tags never drawn from', async () => {
    const server = await testServer();
    try {
      for (let i = 0; i < 50; i++)
        await server.app.inject({
          method: 'POST',
          url: '/v1/tags',
          payload: { tag: `idle-${i}`, step: 10 },
        });
      const text = (await server.app.inject('/metrics')).body;
      assert.doesNotMatch(text, /tag="idle-/);
    } finally {
      await server.close();
    }
  });
});

/**
 * `idmint_http_request_duration_seconds_count` of one route, method and status in a scrape's text.
 */
function requestCount(
  text: string,
  route: string,
  method: string,
  status = 200,
): number | undefined {
  const labels = `route="${route}",method="${method}",status="${status}"`;
  return sample(text, `idmint_http_request_duration_seconds_count{${labels}}`);
}

/** The queries of docs/grafana/idmint.json's panels that read the request histogram. */
function grafanaRequestPanels(): { title: string; expr: string }[] {
  const text = readFileSync(new URL('../docs/grafana/idmint.json', import.meta.url), 'utf8');
  const dashboard = JSON.parse(text) as {
    panels: { title: string; targets?: { expr: string }[] }[];
  };
  const panels = dashboard.panels.flatMap(({ title, targets = [] }) =>
    targets.map(({ expr }) => ({ title, expr })),
  );
  const requests = panels.filter(({ expr }) =>
    expr.includes('idmint_http_request_duration_seconds'),
  );
  assert.ok(requests.length >= 2, 'the dashboard has request panels');
  return requests;
}

/** A request as `app.inject` takes it; the Prometheus test sends it with fetch instead. */
interface SentRequest {
  readonly method: string;
  readonly url: string;
  readonly payload?: string;
  readonly headers?: Record<string, string>;
}

/**
 * Sends a different number of requests through each method of the paths registered once per
 * method (Leaf's segment route and /decodeSnowflakeId, TinyId's nextIdSimple, which TinyId's
 * client POSTs as a form), each answered 200. Returns how many went to each route and method.
 */
async function sendThroughEveryMethod(
  send: (request: SentRequest) => Promise<number>,
): Promise<{ route: string; method: string; count: number }[]> {
  const sent: { route: string; method: string; count: number }[] = [];
  const each = async (route: string, request: SentRequest, count: number) => {
    for (let i = 0; i < count; i++)
      assert.equal(await send(request), 200, `${request.method} ${request.url}`);
    sent.push({ route, method: request.method, count });
  };
  const json = { 'content-type': 'application/json' };
  const tag = JSON.stringify({ tag: 'prom', step: 10 });
  assert.equal(await send({ method: 'POST', url: '/v1/tags', payload: tag, headers: json }), 201);
  await each('/api/segment/get/:tag', { method: 'GET', url: '/api/segment/get/prom' }, 5);
  await each('/api/segment/get/:tag', { method: 'POST', url: '/api/segment/get/prom' }, 4);
  await each('/api/segment/get/:tag', { method: 'PUT', url: '/api/segment/get/prom' }, 2);
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  await each(
    '/tinyid/id/nextIdSimple',
    { method: 'GET', url: '/tinyid/id/nextIdSimple?bizType=prom' },
    3,
  );
  const tinyIdPost = {
    method: 'POST',
    url: '/tinyid/id/nextIdSimple',
    payload: 'bizType=prom',
    headers: form,
  };
  await each('/tinyid/id/nextIdSimple', tinyIdPost, 7);
  const decode = '/decodeSnowflakeId?snowflakeId=1234567890123456789';
  await each('/decodeSnowflakeId', { method: 'GET', url: decode }, 6);
  await each('/decodeSnowflakeId', { method: 'POST', url: decode }, 1);
  return sent;
}
