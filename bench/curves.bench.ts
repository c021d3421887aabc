// Cost curves by batch size and by connections (issue 13): IDs/s and latency of the segment and
// snowflake routes over HTTP, as the batch grows from 1 to 100,000 IDs per request and as the
// connections grow from 10 to 1,000, JSON and binary (`Accept: application/octet-stream`).
//
//   npm run bench:curves -- --write                     (--write: update docs/benchmarks.md)
//   DURATION=3 BATCHES=1,100,10000 CONNECTIONS=10,1000 npm run bench:curves
//
// Closed loop throughout (a connection sends its next request when the last is answered): what a
// curve of saturation throughput needs. Answers up to CLIENT_SWITCH IDs are read by autocannon;
// larger ones by bench/support/closed-loop.ts's bodyLoop over node:http, since autocannon's client
// caps bodies of hundreds of kilobytes below what the server sends. The idmint server runs in a
// process of its own (bench/support/http-target.ts), and so does a bare Fastify route answering a
// constant, the reference of the connection curve; the load generator runs in this one, on the
// same 2 cores, and takes CPU from the server.
import {
  formatRate,
  loadNote,
  machineLine,
  markdownTable,
  writeSection,
} from './support/report.ts';
import {
  bodyLoop,
  closedLoop,
  startTarget,
  stopTargets,
  type ClosedLoopResult,
} from './support/closed-loop.ts';

const DURATION = Number(process.env['DURATION'] ?? 5);
const WARMUP = Number(process.env['WARMUP'] ?? 1);
const list = (name: string, fallback: string) =>
  (process.env[name] ?? fallback).split(',').map(Number);
const BATCHES = list('BATCHES', '1,10,100,1000,10000,100000');
const CONNECTIONS = list('CONNECTIONS', '10,100,1000');
/** Connections of the batch-size curve: the low end of the connection curve. */
const BATCH_CONNECTIONS = Number(process.env['BATCH_CONNECTIONS'] ?? 10);
/** Batch of the batch routes in the connection curve. */
const CONNECTION_BATCH = Number(process.env['CONNECTION_BATCH'] ?? 1000);
/** The largest batch read by autocannon; larger ones by bodyLoop. */
const CLIENT_SWITCH = 1000;
const WRITE = process.argv.includes('--write');

const OCTETS = { accept: 'application/octet-stream' } as const;
const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : 'none');
const log = (line: string) => process.stderr.write(`${line}\n`);
const verdict = (ok: boolean) => (ok ? 'met' : '**missed**');
const failed = (n: number) => (n === 0 ? 'none' : `**${n}**`);

type Form = 'JSON' | 'octet-stream' | 'text';
interface Route {
  readonly family: 'bare' | 'segment' | 'snowflake';
  readonly form: Form;
  /** The path with `{count}` where the batch size goes. */
  readonly path: string;
  readonly shown: string;
}

const batchRoutes: readonly Route[] = [
  {
    family: 'segment',
    form: 'JSON',
    path: '/v1/segment/bench-batch?count={count}',
    shown: '`/v1/segment/{tag}`',
  },
  {
    family: 'segment',
    form: 'octet-stream',
    path: '/v1/segment/bench-batch?count={count}',
    shown: '`/v1/segment/{tag}`',
  },
  {
    family: 'snowflake',
    form: 'JSON',
    path: '/v1/snowflake?count={count}',
    shown: '`/v1/snowflake`',
  },
  {
    family: 'snowflake',
    form: 'octet-stream',
    path: '/v1/snowflake?count={count}',
    shown: '`/v1/snowflake`',
  },
];
const singleRoutes: readonly Route[] = [
  // The reference: Fastify answering a constant, routed as idmint is, in a process of its own.
  {
    family: 'bare',
    form: 'text',
    path: '/bare/get/bench',
    shown: 'bare Fastify route (reference)',
  },
  {
    family: 'segment',
    form: 'text',
    path: '/api/segment/get/bench',
    shown: '`/api/segment/get/{tag}`',
  },
  {
    family: 'snowflake',
    form: 'text',
    path: '/api/snowflake/get/bench',
    shown: '`/api/snowflake/get/{key}`',
  },
];

/** One closed-loop measurement after a warm-up, by the client that suits the answer's size. */
async function measure(
  url: string,
  route: Route,
  count: number,
  connections: number,
): Promise<ClosedLoopResult & { client: string }> {
  const options = {
    connections,
    keepLatencies: true,
    ...(route.form === 'octet-stream' ? { headers: { ...OCTETS } } : {}),
  };
  const loop = count > CLIENT_SWITCH ? bodyLoop : closedLoop;
  await loop(url, WARMUP, options);
  return {
    ...(await loop(url, DURATION, options)),
    client: count > CLIENT_SWITCH ? 'node:http' : 'autocannon',
  };
}

const load = loadNote();
const target = await startTarget('idmint');
const bare = await startTarget('bare').catch((error: unknown) => {
  stopTargets([target]);
  throw error;
});
const batchRows: string[][] = [];
const connectionRows: string[][] = [];
const checks: string[] = [];
try {
  // 1. Batch sizes, at BATCH_CONNECTIONS connections.
  for (const route of batchRoutes) {
    let previous: { count: number; nsPerId: number } | undefined;
    for (const count of BATCHES) {
      const m = await measure(
        `${target.url}${route.path.replace('{count}', String(count))}`,
        route,
        count,
        BATCH_CONNECTIONS,
      );
      const ids = m.requestsPerSecond * count;
      // Wall time per request and per ID at saturation: on 2 cores shared with the generator,
      // not the server's CPU time alone, but the same for every row, so the growth is comparable.
      const usPerRequest = 1e6 / m.requestsPerSecond;
      const nsPerId = 1e9 / ids;
      log(
        `batch ${route.family} ${route.form} ${formatRate(count)}: ${formatRate(ids)} ` +
          `IDs/s, p99 ${ms(m.p99)} ms`,
      );
      const growth = previous === undefined ? '-' : (nsPerId / previous.nsPerId).toFixed(2);
      batchRows.push([
        route.shown,
        route.form,
        formatRate(count),
        m.client,
        formatRate(m.requestsPerSecond),
        formatRate(ids),
        usPerRequest.toFixed(1),
        nsPerId.toFixed(1),
        growth,
        ms(m.p50),
        ms(m.p99),
        ms(m.max),
        failed(m.failures),
      ]);
      // Per-request cost growing faster than the batch: the cost per ID rises from one size to
      // the next by more than the noise of a shared machine (1.5x).
      if (previous !== undefined && nsPerId > previous.nsPerId * 1.5) {
        checks.push(
          `${route.shown} ${route.form}: the cost per ID grows from ` +
            `${formatRate(previous.count)} to ${formatRate(count)} IDs per request ` +
            `(${previous.nsPerId.toFixed(1)} to ${nsPerId.toFixed(1)} ns): **superlinear**`,
        );
      }
      previous = { count, nsPerId };
    }
  }

  // 2. Connections: the single-ID Leaf routes, and the batch routes at CONNECTION_BATCH IDs.
  /** The bare route's p99 / mean wait, by connections. */
  const bareSpread = new Map<number, number>();
  const connectionRoutes = [
    ...singleRoutes.map((route) => ({ route, count: 1 })),
    ...batchRoutes.map((route) => ({ route, count: CONNECTION_BATCH })),
  ];
  for (const { route, count } of connectionRoutes) {
    for (const connections of CONNECTIONS) {
      const base = route.family === 'bare' ? bare.url : target.url;
      const m = await measure(
        `${base}${route.path.replace('{count}', String(count))}`,
        route,
        count,
        connections,
      );
      // Little's law: a closed loop of C connections answered at R req/s waits C / R on average.
      // A p99 far above that mean is unfairness (some requests wait while others are served).
      const meanWait = (connections / m.requestsPerSecond) * 1000;
      log(
        `connections ${route.family} ${route.form} ${connections}: ` +
          `${formatRate(m.requestsPerSecond)} req/s, p99 ${ms(m.p99)} ms (mean ${ms(meanWait)})`,
      );
      connectionRows.push([
        route.shown,
        route.form,
        formatRate(count),
        String(connections),
        formatRate(m.requestsPerSecond),
        formatRate(m.requestsPerSecond * count),
        ms(meanWait),
        ms(m.p50),
        ms(m.p99),
        ms(m.p999),
        ms(m.max),
        (m.p99 / meanWait).toFixed(1),
        failed(m.failures),
      ]);
      // On a shared machine the bare route's own tail is wide: a route is unfair only where its
      // p99 stands further above its mean wait than the bare route's does, twice as far or more.
      const spread = m.p99 / meanWait;
      if (route.family === 'bare') bareSpread.set(connections, spread);
      const reference = bareSpread.get(connections) ?? Number.NaN;
      if (route.family !== 'bare' && spread > reference * 2)
        checks.push(
          `${route.shown} ${route.form}, ${connections} connections: p99 ${ms(m.p99)} ms is ` +
            `${spread.toFixed(1)}x its mean wait, the bare route's ${reference.toFixed(1)}x: ` +
            `**unfair**`,
        );
      if (m.failures > 0)
        checks.push(
          `${route.shown} ${route.form}, ${connections} connections: **${m.failures} failed ` +
            `or non-2xx answers**`,
        );
    }
  }
} finally {
  stopTargets([target, bare]);
}

if (!checks.some((c) => c.includes('superlinear')))
  checks.push(
    `cost per ID never grows by more than 1.5x from one batch size to the next: ${verdict(true)}`,
  );
if (!checks.some((c) => c.includes('unfair')))
  checks.push(
    `p99 / mean wait within 2x of the bare route's at every connection count: ${verdict(true)}`,
  );
if (!checks.some((c) => c.includes('failed')))
  checks.push(`no failed or non-2xx answer: ${verdict(true)}`);

const markdown = `${machineLine()} ${load} Closed loop, ${DURATION} s per point after ${WARMUP} s of
warm-up, one run. The server runs in its own process, the load generator in another, on the same
2 cores: the generator takes CPU from the server, so absolute figures are lower than on a server
with cores of its own; the shape of each curve is the comparable part. Answers of up to
${formatRate(CLIENT_SWITCH)} IDs are read by autocannon, larger ones by a node:http loop \
(autocannon's
client caps large bodies). Latencies in ms.

**Batch size**, ${BATCH_CONNECTIONS} connections. "µs/request" and "ns/ID" are wall time at
* saturation
(1 / req/s, 1 / IDs/s); "x per ID" is the cost per ID against the previous size (above 1: per-ID
cost grows with the batch).

${markdownTable(
  [
    'Route',
    'Form',
    'IDs/request',
    'Client',
    'req/s',
    'IDs/s',
    'µs/request',
    'ns/ID',
    'x per ID',
    'p50',
    'p99',
    'max',
    'Failures',
  ],
  batchRows,
)}

**Connections**: a bare Fastify route answering a constant (the reference: what this machine and
this generator allow), the single-ID Leaf routes (text/plain) and the batch routes at \
${formatRate(CONNECTION_BATCH)} IDs per
request. "Mean wait" is connections / req/s, what a closed loop makes every request wait on average
(Little's law); "p99 / mean" well above the bare route's at the same count says some requests wait
much longer than others.

${markdownTable(
  [
    'Route',
    'Form',
    'IDs/request',
    'Connections',
    'req/s',
    'IDs/s',
    'mean wait',
    'p50',
    'p99',
    'p99.9',
    'max',
    'p99 / mean',
    'Failures',
  ],
  connectionRows,
)}

${checks.map((c) => `- ${c}`).join('\n')}`;

/**
 * What docs/benchmarks.md keeps: IDs/s by batch size, one row per route and form, and the
 * single-ID routes' req/s by connections in a line.
 */
const idsAt = new Map(batchRows.map((row) => [`${row[0]} ${row[1]} ${row[2]}`, row[5] ?? '-']));
const curveRows = batchRoutes.map((route) => [
  route.shown,
  route.form,
  ...BATCHES.map((count) => idsAt.get(`${route.shown} ${route.form} ${formatRate(count)}`) ?? '-'),
]);
const byConnections = singleRoutes.map((route) => {
  const rps = connectionRows
    .filter((row) => row[0] === route.shown && row[1] === route.form)
    .map((row) => row[4]);
  return `${route.shown} ${rps.join(' / ')}`;
});
const page = `${machineLine()} ${load} Closed loop, ${DURATION} s per point, one run; the \
generator on the \
same 2 cores. IDs/s by IDs per request, at ${BATCH_CONNECTIONS} connections:

${markdownTable(['Route', 'Form', ...BATCHES.map((count) => formatRate(count))], curveRows)}

- req/s at ${CONNECTIONS.map((c) => formatRate(c)).join(' / ')} connections: \
${byConnections.join('; ')}
${checks.map((c) => `- ${c}`).join('\n')}`;

process.stdout.write(`${markdown}\n`);
if (WRITE) {
  writeSection('curves', page);
  log('docs/benchmarks.md updated');
}
