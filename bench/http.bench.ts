// HTTP throughput and latency of the idmint server against a bare Fastify route on the same
// machine, in one run, so the ratios hold even when the shared machine's speed drifts.
//
//   npm run bench:http -- --write                       (--write: update docs/benchmarks.md)
//   DURATION=5 ROUNDS=3 npm run bench:http
//
// Each server runs in a process of its own (bench/support/http-target.ts); autocannon drives it
// from this process with 50 connections. Latency is taken from every response's own timing
// (autocannon's summary rounds to whole milliseconds, too coarse for a 2 ms target).
import {
  closedLoop,
  startTarget,
  stopTargets,
  type ClosedLoopResult,
} from './support/closed-loop.ts';
import {
  formatRate,
  loadNote,
  machineLine,
  markdownTable,
  median,
  writeSection,
} from './support/report.ts';

const DURATION = Number(process.env['DURATION'] ?? 10);
const WARMUP = Number(process.env['WARMUP'] ?? 3);
const ROUNDS = Number(process.env['ROUNDS'] ?? 3);
const CONNECTIONS = Number(process.env['CONNECTIONS'] ?? 50);
const WRITE = process.argv.includes('--write');

/** Targets from issue 5. */
const TARGETS = { ratio: 0.85, p99Ms: 2, batchIdsPerSecond: 5_000_000 };

interface Scenario {
  readonly name: string;
  readonly target: 'bare' | 'idmint';
  readonly path: string;
  readonly idsPerRequest: number;
  readonly single: boolean;
}

type Measurement = ClosedLoopResult;

const SCENARIOS: readonly Scenario[] = [
  {
    name: 'bare Fastify route, constant text (ceiling)',
    target: 'bare',
    path: '/bare/get/bench',
    idsPerRequest: 1,
    single: false,
  },
  {
    name: '`GET /api/segment/get/{tag}`',
    target: 'idmint',
    path: '/api/segment/get/bench',
    idsPerRequest: 1,
    single: true,
  },
  {
    name: '`GET /api/snowflake/get/{tag}`',
    target: 'idmint',
    path: '/api/snowflake/get/bench',
    idsPerRequest: 1,
    single: true,
  },
  {
    name: '`GET /v1/segment/{tag}?count=1000`',
    target: 'idmint',
    path: '/v1/segment/bench?count=1000',
    idsPerRequest: 1000,
    single: false,
  },
  // The ID families and opaque IDs (issue 10), beside the routes above: what a family route and
  // the FF1 encoding of an opaque tag cost per request, as ratios to the same run's bare route.
  {
    name: '`GET /api/segment/get/{tag}`, an opaque tag',
    target: 'idmint',
    path: '/api/segment/get/bench-opaque',
    idsPerRequest: 1,
    single: false,
  },
  { name: '`GET /v1/uuid7`', target: 'idmint', path: '/v1/uuid7', idsPerRequest: 1, single: false },
  {
    name: '`GET /v1/uuid7?count=1000`',
    target: 'idmint',
    path: '/v1/uuid7?count=1000',
    idsPerRequest: 1000,
    single: false,
  },
];

const load = loadNote();
const targets = { bare: await startTarget('bare'), idmint: await startTarget('idmint') };
const results = new Map<Scenario, Measurement[]>(SCENARIOS.map((s) => [s, []]));
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const scenario of SCENARIOS) {
      const url = `${targets[scenario.target].url}${scenario.path}`;
      await closedLoop(url, WARMUP, { connections: CONNECTIONS });
      const m = await closedLoop(url, DURATION, { connections: CONNECTIONS, keepLatencies: true });
      results.get(scenario)?.push(m);
      process.stderr.write(
        `${scenario.name}: ${formatRate(m.requestsPerSecond)} req/s, p99 ` +
          `${m.p99.toFixed(2)} ms${m.failures > 0 ? `, ${m.failures} failures` : ''}\n`,
      );
    }
  }
} finally {
  stopTargets(Object.values(targets));
}

const summary = SCENARIOS.map((scenario) => {
  const runs = results.get(scenario) ?? [];
  const pick = (f: (m: Measurement) => number) => median(runs.map(f));
  return {
    scenario,
    rps: pick((m) => m.requestsPerSecond),
    p50: pick((m) => m.p50),
    p99: pick((m) => m.p99),
    p999: pick((m) => m.p999),
    failures: runs.reduce((n, m) => n + m.failures, 0),
  };
});
const bare = summary[0]?.rps ?? Number.NaN;
const ms = (value: number) => value.toFixed(2);
const rows = summary.map((s) => [
  s.scenario.name,
  formatRate(s.rps),
  formatRate(s.rps * s.scenario.idsPerRequest),
  ms(s.p50),
  ms(s.p99),
  ms(s.p999),
  s.scenario.target === 'bare' ? '1.00 (ceiling)' : (s.rps / bare).toFixed(2),
  s.failures === 0 ? 'none' : `**${s.failures}**`,
]);
const verdict = (ok: boolean) => (ok ? 'met' : '**missed**');
const singles = summary.filter((s) => s.scenario.single);
const batch = summary.find((s) => s.scenario.idsPerRequest > 1);
const checks = [
  `single-ID routes at least ${TARGETS.ratio * 100}% of the bare route's req/s: ` +
    `${verdict(singles.every((s) => s.rps / bare >= TARGETS.ratio))} ` +
    `(${singles.map((s) => `${((s.rps / bare) * 100).toFixed(0)}%`).join(', ')})`,
  `p99 under ${TARGETS.p99Ms} ms at ${CONNECTIONS} connections: ` +
    `${verdict(singles.every((s) => s.p99 < TARGETS.p99Ms))}`,
  `batch route at least ${formatRate(TARGETS.batchIdsPerSecond)} IDs/s: ` +
    verdict(
      batch !== undefined && batch.rps * batch.scenario.idsPerRequest >= TARGETS.batchIdsPerSecond,
    ),
  `no failed or non-2xx response: ${verdict(summary.every((s) => s.failures === 0))}`,
];
const markdown = `${machineLine()} ${load} autocannon, ${CONNECTIONS} connections,
${DURATION} s per route after ${WARMUP} s of warm-up, ${ROUNDS} round(s) (median shown); each \
server in its own
process, autocannon in a third. Latencies in ms, from every response's own timing.

${markdownTable(['Route', 'req/s', 'IDs/s', 'p50', 'p99', 'p99.9', 'vs bare', 'Failures'], rows)}

${checks.map((c) => `- ${c}`).join('\n')}`;

/** What docs/benchmarks.md keeps: the table and the targets, under a one-line method. */
const page = `${machineLine()} ${load} Median of ${ROUNDS} round(s) of ${DURATION} s per route, \
${CONNECTIONS} connections; latencies in ms.

${markdownTable(['Route', 'req/s', 'IDs/s', 'p50', 'p99', 'p99.9', 'vs bare', 'Failures'], rows)}

${checks.map((c) => `- ${c}`).join('\n')}`;

process.stdout.write(`${markdown}\n`);
if (WRITE) {
  writeSection('http', page);
  process.stderr.write('docs/benchmarks.md updated\n');
}
