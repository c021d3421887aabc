import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { REQUIRE_SERVICES } from './support/services.ts';
import { metricSample as sample } from './support/metrics-text.ts';
import { SCRAPE_JOB, prometheusSkipReason, startPrometheus, type TestPrometheus } from './support/prometheus.ts';
import { testServer } from './support/server.ts';
import { waitFor } from './support/workers.ts';

/** Prometheus's promtool (Debian's `prometheus` package; scripts/services.sh up installs it). */
const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0 ? 'promtool' : undefined;
const missing = 'promtool not found (apt-get install prometheus, or scripts/services.sh up)';
if (promtool === undefined && !REQUIRE_SERVICES) process.stderr.write(`\n!!! SKIPPING the promtool check: ${missing}\n`);

const prometheusSkip = prometheusSkipReason();

describe('/metrics', () => {
  it('passes `promtool check metrics` (Prometheus\'s own linter)', { skip: promtool === undefined && !REQUIRE_SERVICES ? missing : false }, async () => {
    assert.ok(promtool !== undefined, `IDMINT_REQUIRE_SERVICES=1 but ${missing}`);
    const server = await testServer();
    try {
      // Every family the server can expose has a sample: both modes, a range load, errors.
      await server.app.inject({ method: 'POST', url: '/v1/tags', payload: { tag: 'lint', step: 10 } });
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
      assert.equal(response.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
      const text = await response.text();
      assert.match(text, /^# HELP idmint_process_cpu_user_seconds_total /);
      assert.match(text, /^idmint_http_request_duration_seconds_count\{route="\/v1\/snowflake",method="GET",status="200"\} 1$/m);
      assert.ok(text.endsWith('\n') && !text.endsWith('\n\n\n'), 'ends as registry.metrics() ends');
    } finally {
      await server.close();
    }
  });

  it('counts requests that matched no route (404) and methods a path does not take (405)', async () => {
    const server = await testServer();
    try {
      for (let i = 0; i < 3; i++) await server.app.inject('/no/such/route');
      await server.app.inject({ method: 'DELETE', url: '/v1/tags/x' });
      await server.app.inject({ method: 'HEAD', url: '/v1/snowflake' });
      const text = (await server.app.inject('/metrics')).body;
      assert.equal(sample(text, 'idmint_http_request_duration_seconds_count{route="unmatched",method="GET",status="404"}'), 3);
      assert.equal(sample(text, 'idmint_http_request_duration_seconds_count{route="/v1/tags/:tag",method="DELETE",status="405"}'), 1);
      assert.equal(sample(text, 'idmint_http_request_duration_seconds_count{route="/v1/snowflake",method="HEAD",status="405"}'), 1);
      assert.doesNotMatch(text, /^# TYPE \S+_total gauge$/m);
    } finally {
      await server.close();
    }
  });

  it('prints each label set once: a path registered per method counts each method under its own `method`', async () => {
    // Leaf's and TinyId's paths are registered as GET, the other methods, and OPTIONS: three
    // routes of one path, which used to print the same label set twice with different counts.
    const server = await testServer();
    try {
      const sent = await sendThroughEveryMethod((request) => server.app.inject(request).then((answer) => answer.statusCode));
      const text = (await server.app.inject('/metrics')).body;
      const samples = text.split('\n').filter((line) => line !== '' && !line.startsWith('#')).map((line) => line.slice(0, line.lastIndexOf(' ')));
      const repeated = samples.filter((series, i) => samples.indexOf(series) !== i);
      assert.deepEqual(repeated, [], 'series printed more than once');
      for (const [key, count] of sent) {
        const method = key.slice(key.lastIndexOf(' ') + 1);
        assert.equal(sample(text, `idmint_http_request_duration_seconds_count{route="${routeOf(key)}",method="${method}",status="200"}`), count, key);
      }
    } finally {
      await server.close();
    }
  });

  it('is stored by a real Prometheus as counted: every route and method, and the IDs issued', { skip: prometheusSkip ?? false, timeout: 120_000 }, async () => {
    const server = await testServer({ port: 0 });
    let prometheus: TestPrometheus | undefined;
    try {
      const url = await server.listen();
      prometheus = await startPrometheus(new URL(url).host);
      const sent = await sendThroughEveryMethod(async ({ method, url: path, payload, headers }) => {
        const response = await fetch(`${url}${path}`, { method, ...(payload === undefined ? {} : { body: payload }), ...(headers === undefined ? {} : { headers }) });
        await response.arrayBuffer();
        return response.status;
      });
      const perRoute = new Map<string, number>();
      for (const [key, count] of sent) perRoute.set(routeOf(key), (perRoute.get(routeOf(key)) ?? 0) + count);
      // The counts are complete in the server's own text now; a scrape begun after this reads them all.
      const text = (await server.app.inject('/metrics')).body;
      const counted = new Map<string, number>();
      for (const [, labels, value] of text.matchAll(/^idmint_http_request_duration_seconds_count\{([^}]*)\} (\S+)$/gm)) {
        const route = /route="([^"]*)"/.exec(labels ?? '')?.[1] as string;
        counted.set(route, (counted.get(route) ?? 0) + Number(value));
      }
      for (const [route, count] of perRoute) assert.equal(counted.get(route), count, `the server counted ${route}`);
      await prometheus.scrapedSince(Date.now());

      // Per route, whatever the method: what a dashboard sums.
      const storedPerRoute = new Map<string, number>();
      for (const { labels, value } of await prometheus.query(`sum by (route) (idmint_http_request_duration_seconds_count{job="${SCRAPE_JOB}"})`)) {
        storedPerRoute.set(labels['route'] as string, value);
      }
      for (const [route, count] of perRoute) assert.equal(storedPerRoute.get(route), count, `Prometheus stored ${storedPerRoute.get(route)} requests for ${route}, sent ${count}`);
      // Prometheus drops the second of two samples of one series in a scrape, and counts it here.
      assert.equal(await prometheus.ownMetric('prometheus_target_scrapes_sample_duplicate_timestamp_total'), 0);
      const stored = new Map<string, number>();
      for (const { labels, value } of await prometheus.query(`idmint_http_request_duration_seconds_count{job="${SCRAPE_JOB}",status="200"}`)) {
        stored.set(`${labels['route']} ${labels['method']}`, value);
      }
      for (const [key, count] of sent) assert.equal(stored.get(key), count, `Prometheus stored ${stored.get(key)} for ${key}, sent ${count}`);
      // The Grafana dashboard's request panels read the stored series as they are now labelled
      // (a rate needs two samples of a series: one more scrape).
      await prometheus.scrapedSince(Date.now());
      const grafana = JSON.parse(readFileSync(new URL('../docs/grafana/idmint.json', import.meta.url), 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
      const panels = grafana.panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({ title: panel.title, expr: target.expr })));
      const requestPanels = panels.filter(({ expr }) => expr.includes('idmint_http_request_duration_seconds'));
      assert.ok(requestPanels.length >= 2, 'the dashboard has request panels');
      for (const { title, expr } of requestPanels) {
        const result = await prometheus.query(expr.replaceAll('$instance', '.*'));
        assert.ok(result.length > 0, `panel "${title}" finds no data: ${expr}`);
        if (/by \(route\b/.test(expr)) for (const route of perRoute.keys()) assert.ok(result.some((r) => r.labels['route'] === route), `panel "${title}" has no ${route}`);
      }
      // One ID per request on the segment and TinyId routes.
      const ids = [...sent].filter(([key]) => !key.startsWith('/decodeSnowflakeId ')).reduce((sum, [, count]) => sum + count, 0);
      assert.equal(sample(text, 'idmint_ids_issued_total{mode="segment",tag="prom"}'), ids);
      const [issued] = await prometheus.query(`idmint_ids_issued_total{job="${SCRAPE_JOB}",mode="segment",tag="prom"}`);
      assert.equal(issued?.value, ids);
    } finally {
      await prometheus?.stop();
      await server.close();
    }
  });

  it('gives series only to tags in use, at most metrics.maxTagSeries of them, and sums the rest under tag="_other"', async () => {
    const server = await testServer({ metrics: { maxTagSeries: 2 } });
    try {
      for (const tag of ['a', 'b', 'c', 'd', 'idle']) {
        assert.equal((await server.app.inject({ method: 'POST', url: '/v1/tags', payload: { tag, step: 10 } })).statusCode, 201);
      }
      for (const [tag, n] of [['a', 1], ['b', 2], ['c', 3], ['d', 4]] as const) {
        assert.equal((await server.app.inject(`/v1/segment/${tag}?count=${n}`)).statusCode, 200);
      }
      const text = (await server.app.inject('/metrics')).body;
      assert.equal(sample(text, 'idmint_ids_issued_total{mode="segment",tag="a"}'), 1);
      assert.equal(sample(text, 'idmint_ids_issued_total{mode="segment",tag="b"}'), 2);
      assert.equal(sample(text, 'idmint_ids_issued_total{mode="segment",tag="_other"}'), 7);
      // c and d each loaded a range and prefetched the next: the counter and the histogram agree.
      const otherLoads = sample(text, 'idmint_segment_range_loads_total{tag="_other"}') ?? 0;
      assert.ok(otherLoads >= 2, `loads of c and d: ${otherLoads}`);
      assert.equal(sample(text, 'idmint_segment_range_load_seconds_count{tag="_other"}'), otherLoads);
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

  it("counts the tag refresh's rows read and failures, read from the service at each scrape", async () => {
    // 3 tags in the store before the server starts, and every refresh a full read
    // (tagFullRefreshMs 0): the counter grows 3 at a time, from the start-up read on.
    const dir = mkdtempSync(join(tmpdir(), 'idmint-metrics-refresh-'));
    const path = join(dir, 'tags.db');
    const store = new SqliteSegmentStore({ path });
    await store.init();
    for (const tag of ['r1', 'r2', 'r3']) await store.createTag({ tag, step: 10 });
    await store.close();
    const server = await testServer({ segment: { store: `sqlite:${path}`, tagRefreshMs: 20, tagFullRefreshMs: 0 } });
    try {
      const scrape = async (series: string) => sample((await server.app.inject('/metrics')).body, series);
      await waitFor('three full reads of the 3 tags', async () => ((await scrape('idmint_segment_tag_rows_read_total')) ?? 0) >= 9);
      const text = (await server.app.inject('/metrics')).body;
      assert.equal((sample(text, 'idmint_segment_tag_rows_read_total') ?? -1) % 3, 0, 'whole reads of 3 rows');
      assert.equal(sample(text, 'idmint_segment_tag_refresh_failures_total'), 0);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('costs no series for tags never drawn from', async () => {
    const server = await testServer();
    try {
      for (let i = 0; i < 50; i++) await server.app.inject({ method: 'POST', url: '/v1/tags', payload: { tag: `idle-${i}`, step: 10 } });
      const text = (await server.app.inject('/metrics')).body;
      assert.doesNotMatch(text, /tag="idle-/);
    } finally {
      await server.close();
    }
  });
});

/** The route of a `route method` key. */
function routeOf(key: string): string {
  return key.slice(0, key.lastIndexOf(' '));
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
 * client POSTs as a form), each answered 200. Returns the count per `route method`.
 */
async function sendThroughEveryMethod(send: (request: SentRequest) => Promise<number>): Promise<Map<string, number>> {
  const sent = new Map<string, number>();
  const each = async (route: string, request: SentRequest, times: number) => {
    for (let i = 0; i < times; i++) assert.equal(await send(request), 200, `${request.method} ${request.url}`);
    const key = `${route} ${request.method}`;
    sent.set(key, (sent.get(key) ?? 0) + times);
  };
  assert.equal(await send({ method: 'POST', url: '/v1/tags', payload: JSON.stringify({ tag: 'prom', step: 10 }), headers: { 'content-type': 'application/json' } }), 201);
  await each('/api/segment/get/:tag', { method: 'GET', url: '/api/segment/get/prom' }, 5);
  await each('/api/segment/get/:tag', { method: 'POST', url: '/api/segment/get/prom' }, 4);
  await each('/api/segment/get/:tag', { method: 'PUT', url: '/api/segment/get/prom' }, 2);
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  await each('/tinyid/id/nextIdSimple', { method: 'GET', url: '/tinyid/id/nextIdSimple?bizType=prom' }, 3);
  await each('/tinyid/id/nextIdSimple', { method: 'POST', url: '/tinyid/id/nextIdSimple', payload: 'bizType=prom', headers: form }, 7);
  const id = '1234567890123456789';
  await each('/decodeSnowflakeId', { method: 'GET', url: `/decodeSnowflakeId?snowflakeId=${id}` }, 6);
  await each('/decodeSnowflakeId', { method: 'POST', url: `/decodeSnowflakeId?snowflakeId=${id}` }, 1);
  return sent;
}
