import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { parse, stringify } from 'yaml';
import { REQUIRE_SERVICES } from './support/services.ts';
import { testServer } from './support/server.ts';

// The fleet view in docs/: Prometheus alert rules and a Grafana dashboard. Both must name only
// metrics idmint really exports (a renamed metric would silently empty a panel or an alert), and
// the rules must load in Prometheus (promtool) and fire when they should (promtool test rules).

const ALERTS = fileURLToPath(new URL('../docs/prometheus/alerts.yml', import.meta.url));
const GRAFANA = fileURLToPath(new URL('../docs/grafana/idmint.json', import.meta.url));

const promtool =
  spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0 ? 'promtool' : undefined;
const missing = 'promtool not found (apt-get install prometheus, or scripts/services.sh up)';
if (promtool === undefined && !REQUIRE_SERVICES)
  process.stderr.write(
    `\n!!! SKIPPING the promtool checks of docs/prometheus/alerts.yml: ${missing}\n`,
  );
const skipPromtool = promtool === undefined && !REQUIRE_SERVICES ? missing : false;

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

const rules = (
  parse(readFileSync(ALERTS, 'utf8')) as { groups: { name: string; rules: Rule[] }[] }
).groups.flatMap((group) => group.rules);
const dashboard = JSON.parse(readFileSync(GRAFANA, 'utf8')) as {
  uid: string;
  panels: {
    id: number;
    type: string;
    title: string;
    targets?: { expr: string }[];
    datasource?: { uid: string };
  }[];
  templating: { list: { name: string; definition?: string }[] };
};

/** Names of the metrics in an expression: every `idmint_...` identifier. */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\bidmint_[a-z0-9_]+/g)].map((match) => match[0]);
}

/**
 * The series names /metrics exports, from a server with both modes on and every family exercised.
 */
async function exportedNames(): Promise<Set<string>> {
  const server = await testServer();
  try {
    await server.app.inject({
      method: 'POST',
      url: '/v1/tags',
      payload: { tag: 'fleet', step: 10 },
    });
    await server.app.inject('/api/segment/get/fleet');
    await server.app.inject('/v1/snowflake?count=2');
    await server.app.inject('/nope');
    const text = (await server.app.inject('/metrics')).body;
    const names = new Set<string>();
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      if (name === undefined) continue;
      names.add(name);
      if (type === 'histogram')
        for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    }
    return names;
  } finally {
    await server.close();
  }
}

describe('docs/prometheus/alerts.yml and docs/grafana/idmint.json', () => {
  let exported: Set<string>;
  before(async () => {
    exported = await exportedNames();
  });

  it('name only metrics /metrics exports', () => {
    const used = new Map<string, string>();
    for (const rule of rules)
      for (const name of metricNames(`${rule.expr} ${Object.values(rule.annotations).join(' ')}`))
        used.set(name, `alert ${rule.alert}`);
    for (const panel of dashboard.panels)
      for (const target of panel.targets ?? [])
        for (const name of metricNames(target.expr)) used.set(name, `panel "${panel.title}"`);
    for (const variable of dashboard.templating.list)
      for (const name of metricNames(variable.definition ?? ''))
        used.set(name, `variable $${variable.name}`);
    assert.ok(used.size >= 15, `the files use ${used.size} metrics`);
    const unknown = [...used]
      .filter(([name]) => !exported.has(name))
      .map(([name, where]) => `${name} (${where})`);
    assert.deepEqual(unknown, [], 'metrics /metrics does not export');
    // Each alert reads idmint's metrics, or Prometheus's own `up` for the scrape job.
    for (const rule of rules)
      assert.ok(
        metricNames(rule.expr).length > 0 || /^up\{job="idmint"\}/.test(rule.expr),
        rule.alert,
      );
  });

  it('cover what matters, each rule with severity, summary and what to do', () => {
    const names = rules.map((rule) => rule.alert);
    const needs = [
      'IdmintSegmentBufferRunningDry',
      'IdmintSegmentStoreUnreachable',
      'IdmintSegmentStoreFenced',
      'IdmintSegmentStoreHealed',
      'IdmintSnowflakeLeaseNotHeld',
      'IdmintSnowflakeLeaseTrouble',
      'IdmintClockSkew',
      'IdmintClockRollbackRefused',
      'IdmintRequestErrors',
    ];
    for (const needed of needs) {
      assert.ok(names.includes(needed), `${needed} is missing`);
    }
    assert.equal(new Set(names).size, names.length, 'alert names are unique');
    for (const rule of rules) {
      assert.match(rule.labels.severity ?? '', /^(critical|warning)$/, rule.alert);
      assert.ok((rule.annotations.summary ?? '').length > 10, `${rule.alert}: summary`);
      assert.ok(
        (rule.annotations.action ?? '').length > 40,
        `${rule.alert}: action says what to do`,
      );
    }
  });

  it('the Grafana dashboard is well formed: ids, data source, variables', () => {
    assert.equal(dashboard.uid, 'idmint');
    const ids = dashboard.panels.map((panel) => panel.id);
    assert.equal(new Set(ids).size, ids.length);
    const variables = new Set(dashboard.templating.list.map((variable) => variable.name));
    const queries = dashboard.panels.filter((panel) => panel.type !== 'row');
    assert.ok(queries.length >= 15);
    for (const panel of queries) {
      assert.ok(
        (panel.targets ?? []).length > 0 &&
          panel.targets?.every((target) => target.expr.trim() !== ''),
        panel.title,
      );
      assert.equal(panel.datasource?.uid, '${datasource}', panel.title);
      for (const target of panel.targets ?? [])
        for (const [, name] of target.expr.matchAll(/\$(\w+)/g))
          assert.ok(variables.has(name ?? ''), `${panel.title}: $${name}`);
    }
  });

  it('pass `promtool check rules`', { skip: skipPromtool }, () => {
    assert.ok(promtool !== undefined, `IDMINT_REQUIRE_SERVICES=1 but ${missing}`);
    const check = spawnSync(promtool, ['check', 'rules', ALERTS], { encoding: 'utf8' });
    assert.equal(check.status, 0, `${check.stdout}${check.stderr}`);
    assert.match(check.stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
  });

  describe('fire when they should (`promtool test rules` on synthetic series)', {
    skip: skipPromtool,
  }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-alerts-'));
    after(() => rmSync(dir, { recursive: true, force: true }));

    /** The annotations of `alert` as Prometheus renders them for these labels and value. */
    const annotations = (alert: string, labels: Record<string, string>, value = '') => {
      const rule = rules.find((r) => r.alert === alert);
      assert.ok(rule !== undefined, alert);
      return Object.fromEntries(
        Object.entries(rule.annotations).map(([key, text]) => [
          key,
          text
            .replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, label: string) => labels[label] ?? '')
            .replace('{{ $value }}', value),
        ]),
      );
    };
    const expect = (alert: string, labels: Record<string, string>, value?: string) => ({
      exp_labels: { ...labels, severity: rules.find((r) => r.alert === alert)?.labels.severity },
      exp_annotations: annotations(alert, labels, value),
    });
    const node = { job: 'idmint', instance: 'a:8080' };
    const series = (name: string, labels: Record<string, string>, values: string) => ({
      series: `${name}{${Object.entries({ ...node, ...labels })
        .map(([k, v]) => `${k}="${v}"`)
        .join(',')}}`,
      values,
    });

    const segmentGet = { route: '/v1/segment/:tag', method: 'GET' };
    const leafPost = { route: '/api/segment/get/:tag', method: 'POST' };

    const cases = [
      {
        name: 'a lease not held for 30 s',
        input: [series('idmint_snowflake_lease_held', { worker_id: '3' }, '1 1 0 0 0 0')],
        checks: [
          { eval_time: '1m', alertname: 'IdmintSnowflakeLeaseNotHeld', exp_alerts: [] },
          {
            eval_time: '5m',
            alertname: 'IdmintSnowflakeLeaseNotHeld',
            exp_alerts: [expect('IdmintSnowflakeLeaseNotHeld', { instance: node.instance })],
          },
        ],
      },
      {
        name: 'a tag with 20 s of IDs buffered, beside one with 1000 s',
        input: [
          series('idmint_segment_remaining_ids', { tag: 'orders' }, '1000x10'),
          // 50 IDs/s
          series('idmint_ids_issued_total', { mode: 'segment', tag: 'orders' }, '0+3000x10'),
          series('idmint_segment_remaining_ids', { tag: 'users' }, '1000x10'),
          series('idmint_ids_issued_total', { mode: 'segment', tag: 'users' }, '0+60x10'), // 1 ID/s
        ],
        checks: [
          {
            eval_time: '6m',
            alertname: 'IdmintSegmentBufferRunningDry',
            exp_alerts: [
              expect('IdmintSegmentBufferRunningDry', { instance: node.instance, tag: 'orders' }),
            ],
          },
        ],
      },
      {
        name: 'snowflake requests refused for a clock behind',
        input: [
          series('idmint_http_errors_total', { code: 'CLOCK_MOVED_BACKWARDS' }, '0 0 5 5 5'),
          series('idmint_http_errors_total', { code: 'TAG_NOT_FOUND' }, '0 9 18 27 36'),
        ],
        checks: [
          { eval_time: '1m', alertname: 'IdmintClockRollbackRefused', exp_alerts: [] },
          {
            eval_time: '3m',
            alertname: 'IdmintClockRollbackRefused',
            exp_alerts: [expect('IdmintClockRollbackRefused', { instance: node.instance })],
          },
        ],
      },
      {
        name: '2% of requests answered 503',
        input: [
          // The rule sums over routes and methods: 20 of 1,000 a minute answered 503, over two
          // methods.
          series(
            'idmint_http_request_duration_seconds_count',
            { ...segmentGet, status: '200' },
            '0+980x15',
          ),
          series(
            'idmint_http_request_duration_seconds_count',
            { ...segmentGet, status: '503' },
            '0+12x15',
          ),
          series(
            'idmint_http_request_duration_seconds_count',
            { ...leafPost, status: '503' },
            '0+8x15',
          ),
        ],
        checks: [
          {
            eval_time: '12m',
            alertname: 'IdmintRequestErrors',
            exp_alerts: [expect('IdmintRequestErrors', { instance: node.instance })],
          },
        ],
      },
      {
        name: 'a new history of the store, fenced by one node of two',
        input: [
          series('idmint_segment_store_fences_total', {}, '0 0 1 1 1'),
          {
            series: 'idmint_segment_store_fences_total{job="idmint",instance="b:8080"}',
            values: '0 0 0 0 0',
          },
        ],
        checks: [
          { eval_time: '1m', alertname: 'IdmintSegmentStoreFenced', exp_alerts: [] },
          {
            eval_time: '3m',
            alertname: 'IdmintSegmentStoreFenced',
            exp_alerts: [expect('IdmintSegmentStoreFenced', {})],
          },
        ],
      },
      {
        name: 'a node handed a range below its own IDs',
        input: [
          series('idmint_segment_heals_total', { tag: 'orders' }, '0 0 1 1 1'),
          series('idmint_segment_store_fences_total', {}, '0x5'),
        ],
        checks: [
          { eval_time: '1m', alertname: 'IdmintSegmentStoreHealed', exp_alerts: [] },
          {
            eval_time: '3m',
            alertname: 'IdmintSegmentStoreHealed',
            exp_alerts: [expect('IdmintSegmentStoreHealed', { instance: node.instance })],
          },
        ],
      },
      {
        name: 'a node 2.5 s away from its peers at start-up',
        input: [series('idmint_snowflake_peer_clock_offset_seconds', {}, '2.5x3')],
        checks: [
          {
            eval_time: '1m',
            alertname: 'IdmintClockSkew',
            exp_alerts: [expect('IdmintClockSkew', { instance: node.instance }, '2.5')],
          },
        ],
      },
    ];

    for (const testCase of cases) {
      it(testCase.name, () => {
        assert.ok(promtool !== undefined, `IDMINT_REQUIRE_SERVICES=1 but ${missing}`);
        const file = join(dir, `${testCase.name.replace(/\W+/g, '-')}.yml`);
        writeFileSync(
          file,
          stringify({
            rule_files: [ALERTS],
            evaluation_interval: '1m',
            tests: [
              { interval: '1m', input_series: testCase.input, alert_rule_test: testCase.checks },
            ],
          }),
        );
        const run = spawnSync(promtool, ['test', 'rules', file], { encoding: 'utf8' });
        assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
      });
    }
  });
});
