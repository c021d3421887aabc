import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { REQUIRE_SERVICES } from './support/services.ts';
import { metricSample as sample } from './support/metrics-text.ts';
import { testServer } from './support/server.ts';
import { waitFor } from './support/workers.ts';

/** Prometheus's promtool (Debian's `prometheus` package; scripts/services.sh up installs it). */
const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0 ? 'promtool' : undefined;
const missing = 'promtool not found (apt-get install prometheus, or scripts/services.sh up)';
if (promtool === undefined && !REQUIRE_SERVICES) process.stderr.write(`\n!!! SKIPPING the promtool check: ${missing}\n`);

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
      assert.match(text, /^idmint_http_request_duration_seconds_count\{route="\/v1\/snowflake",status="200"\} 1$/m);
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
      assert.equal(sample(text, 'idmint_http_request_duration_seconds_count{route="unmatched",status="404"}'), 3);
      assert.equal(sample(text, 'idmint_http_request_duration_seconds_count{route="/v1/tags/:tag",status="405"}'), 1);
      assert.equal(sample(text, 'idmint_http_request_duration_seconds_count{route="/v1/snowflake",status="405"}'), 1);
      assert.doesNotMatch(text, /^# TYPE \S+_total gauge$/m);
    } finally {
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
