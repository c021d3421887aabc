import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { REQUIRE_SERVICES } from './support/services.ts';
import { testServer } from './support/server.ts';

/** Prometheus's promtool (Debian's `prometheus` package; scripts/services.sh up installs it). */
const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0 ? 'promtool' : undefined;
const missing = 'promtool not found (apt-get install prometheus, or scripts/services.sh up)';
if (promtool === undefined && !REQUIRE_SERVICES) process.stderr.write(`\n!!! SKIPPING the promtool check: ${missing}\n`);

/** Value of the sample with exactly this name and label set. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

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
});
