// Segment mode: in-process throughput of next(tag) on a warm buffer against bare baselines, the
// latency of next(tag) across range switches while every allocation takes 50 ms (the double
// buffer must hide it), and the allocation round trip of each backend. Side by side in one run,
// so the ratios hold while the shared machine's speed drifts.
//
//   npm run bench:segment -- --write                       (--write: update docs/benchmarks.md)
//   ROUNDS=3 BURST=500000 LATENCY_MS=2000 ALLOCATIONS=100 npm run bench:segment
import { MonotonicClock } from '../src/clocks/monotonic-clock.ts';
import { SegmentService } from '../src/service/segment-service.ts';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { FaultySegmentStore } from '../test/support/faulty-segment-store.ts';
import { SEGMENT_BACKENDS } from '../test/support/segment-backends.ts';
import { reachable } from '../test/support/services.ts';
import {
  formatRate,
  machineLine,
  markdownTable,
  median,
  pause,
  writeSection,
} from './support/report.ts';

const ROUNDS = Number(process.env['ROUNDS'] ?? 7);
const BURST = Number(process.env['BURST'] ?? 2_000_000);
const LATENCY_MS = Number(process.env['LATENCY_MS'] ?? 5000);
const ALLOCATIONS = Number(process.env['ALLOCATIONS'] ?? 500);
const WRITE = process.argv.includes('--write');
const TAG = 'bench';

/** Where timed loops leave their last value, so no engine can treat the work as dead. */
let sink: unknown;

/** A service on an in-memory SQLite store; `delayMs` delays every store call. */
async function service(options: {
  step: number;
  maxStep?: number;
  delayMs?: number;
  prefetchThreshold?: number;
}) {
  const sqlite = new SqliteSegmentStore({ path: ':memory:' });
  await sqlite.init();
  await sqlite.createTag({ tag: TAG, step: options.step });
  const store = new FaultySegmentStore(sqlite);
  store.delayMs = options.delayMs ?? 0;
  const segments = new SegmentService({
    store,
    clock: new MonotonicClock(),
    tagRefreshMs: 0,
    step: { maxStep: options.maxStep ?? 1_000_000 },
    prefetchThreshold: options.prefetchThreshold,
    waitTimeoutMs: 10_000,
  });
  await segments.start();
  return {
    segments,
    store,
    close: async () => {
      await segments.close();
      await sqlite.close();
    },
  };
}

// ---- 1. Throughput with a warm buffer ---------------------------------------------------------

interface Candidate {
  readonly name: string;
  readonly note: string;
  /**
   * Draws `n` IDs, keeping only the last. Each loop is written out so every call site stays
   * monomorphic.
   */
  run(n: number): Promise<unknown>;
}

async function throughput(): Promise<{ rows: string[][]; nextSyncRate: number; baseline: number }> {
  const big = await service({ step: 1_000_000 });
  const small = await service({ step: 10_000, maxStep: 10_000 });
  const asyncOnly = await service({ step: 1_000_000 });
  const batches = await service({ step: 1_000_000 });
  const counters = new Map([[TAG, { value: 0n }]]);
  let bare = 0n;
  const candidates: Candidate[] = [
    {
      name: 'baseline: bare bigint counter',
      note: '`id++`: the least an ID can cost',
      run: async (n) => {
        for (let i = 0; i < n; i++) bare++;
        return bare;
      },
    },
    {
      name: 'baseline: `Map.get(tag)` + bigint counter',
      note: 'a per-tag counter with no ranges at all',
      run: async (n) => {
        let last = 0n;
        for (let i = 0; i < n; i++) {
          const counter = counters.get(TAG);
          if (counter !== undefined) last = counter.value++;
        }
        return last;
      },
    },
    {
      name: 'idmint `nextSync(tag) ?? await next(tag)`',
      note: 'ranges of 1,000,000 (dynamic step at its cap)',
      run: async (n) => {
        const s = big.segments;
        let last = 0n;
        for (let i = 0; i < n; i++) last = s.nextSync(TAG) ?? (await s.next(TAG));
        return last;
      },
    },
    {
      name: 'idmint, ranges of 10,000',
      note: 'a range switch every 10,000 IDs',
      run: async (n) => {
        const s = small.segments;
        let last = 0n;
        for (let i = 0; i < n; i++) last = s.nextSync(TAG) ?? (await s.next(TAG));
        return last;
      },
    },
    {
      name: 'idmint `nextBatchSync(tag, 1000)`',
      note: '1,000 IDs per call',
      run: async (n) => {
        const s = batches.segments;
        let last: bigint[] = [];
        for (let i = 0; i < n; i += 1000)
          last = s.nextBatchSync(TAG, 1000) ?? (await s.nextBatch(TAG, 1000));
        return last;
      },
    },
    {
      name: 'idmint `await next(tag)`',
      note: 'a Promise per ID: why the sync path exists',
      run: async (n) => {
        const s = asyncOnly.segments;
        let last = 0n;
        for (let i = 0; i < n; i++) last = await s.next(TAG);
        return last;
      },
    },
  ];
  const rates = candidates.map(() => [] as number[]);
  // warm-up
  for (const candidate of candidates) sink = await candidate.run(Math.min(BURST, 200_000));
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < candidates.length; k++) {
      // Rotate the order each round so no candidate always follows a garbage-heavy one.
      const index = (k + round) % candidates.length;
      const candidate = candidates[index] as Candidate;
      await pause(5); // let prefetched ranges land, as between requests
      const start = process.hrtime.bigint();
      sink = await candidate.run(BURST);
      (rates[index] as number[]).push(BURST / (Number(process.hrtime.bigint() - start) / 1e9));
    }
    process.stderr.write(`throughput round ${round + 1}/${ROUNDS} done\n`);
  }
  for (const s of [big, small, asyncOnly, batches]) await s.close();
  const medians = rates.map((r) => median(r));
  const baseline = medians[0] as number;
  const rows = candidates.map((candidate, i) => [
    candidate.name,
    formatRate(medians[i] as number),
    `${((medians[i] as number) / baseline).toFixed(2)}x`,
    candidate.note,
  ]);
  return { rows, nextSyncRate: medians[2] as number, baseline };
}

// ---- 2. Latency across range switches with a slow store ----------------------------------------

interface LatencyResult {
  readonly name: string;
  readonly requests: number;
  readonly loads: number;
  readonly waited: number;
  /** Call to ID in hand: what `next(tag)` itself costs. */
  readonly service: Quantiles;
  /**
   * Scheduled arrival to ID in hand: includes waiting behind a stalled request, as a client sees
   * it.
   */
  readonly response: Quantiles;
}

interface Quantiles {
  readonly p50: number;
  readonly p999: number;
  readonly max: number;
}

function quantiles(samples: Float64Array): Quantiles {
  const sorted = samples.sort();
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { p50: at(0.5), p999: at(0.999), max: sorted[sorted.length - 1] ?? 0 };
}

/**
 * Paced like a server: a request is due every 10 µs (100,000/s), served in ticks of about a
 * millisecond, each request timed as `nextSync(tag) ?? await next(tag)`, what a route does.
 * Ranges of 10,000 at this rate last 100 ms, so the 10% prefetch leaves 90 ms to hide a 50 ms
 * allocation.
 */
async function latency(
  name: string,
  options: { step: number; delayMs: number; prefetchThreshold?: number },
): Promise<LatencyResult> {
  const rate = 100_000;
  const { segments, store, close } = await service({ ...options, maxStep: options.step });
  await segments.next(TAG); // first range loaded before timing
  const total = Math.floor((LATENCY_MS / 1000) * rate);
  const serviceTimes = new Float64Array(total);
  const responseTimes = new Float64Array(total);
  let waited = 0;
  const loadsBefore = store.calls.allocate;
  const start = performance.now() + 1;
  for (let i = 0; i < total; ) {
    // Yield between ticks, as a server does between requests, so a finished load can land.
    const ahead = start + (i * 1000) / rate - performance.now();
    if (ahead >= 1) await pause(Math.floor(ahead));
    else await new Promise((resolve) => setImmediate(resolve));
    // Serve every request that is due by now (a backlog after a stall, as queued requests would).
    const now = performance.now();
    for (; i < total && start + (i * 1000) / rate <= now; i++) {
      const t0 = performance.now();
      let id = segments.nextSync(TAG);
      if (id === undefined) {
        waited++;
        id = await segments.next(TAG);
      }
      const done = performance.now();
      serviceTimes[i] = done - t0;
      responseTimes[i] = done - (start + (i * 1000) / rate);
      sink = id;
    }
  }
  const loads = store.calls.allocate - loadsBefore;
  await close();
  return {
    name,
    requests: total,
    loads,
    waited,
    service: quantiles(serviceTimes),
    response: quantiles(responseTimes),
  };
}

function us(ms: number): string {
  return ms >= 1 ? `${ms.toFixed(1)} ms` : `${(ms * 1000).toFixed(2)} µs`;
}

// ---- 3. Allocation round trip per backend -----------------------------------------------------

async function roundTrips(): Promise<string[][]> {
  const rows: string[][] = [];
  const backends = [
    { label: 'SQLite (file, WAL)', backend: SEGMENT_BACKENDS.sqlite, service: undefined },
    { label: 'PostgreSQL', backend: SEGMENT_BACKENDS.postgres, service: 'postgres' as const },
    { label: 'MariaDB', backend: SEGMENT_BACKENDS.mariadb, service: 'mysql' as const },
    { label: 'Redis', backend: SEGMENT_BACKENDS.redis, service: 'redis' as const },
  ];
  for (const { label, backend, service: name } of backends) {
    if (name !== undefined && !(await reachable(name))) {
      rows.push([label, 'unreachable', '', '']);
      continue;
    }
    const fixture = await backend.open();
    try {
      await fixture.store.createTag({ tag: TAG, step: 1000 });
      for (let i = 0; i < 20; i++) await fixture.store.allocate(TAG); // warm the pool and caches
      const times: number[] = [];
      for (let i = 0; i < ALLOCATIONS; i++) {
        const t0 = performance.now();
        await fixture.store.allocate(TAG);
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      const at = (q: number) =>
        times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? 0;
      rows.push([
        label,
        us(at(0.5)),
        us(at(0.99)),
        backend.name === 'mariadb'
          ? 'transaction: UPDATE + SELECT'
          : backend.name === 'redis'
            ? 'one Lua script (HINCRBY)'
            : 'one UPDATE ... RETURNING',
      ]);
    } finally {
      await fixture.dispose();
    }
  }
  return rows;
}

// ---- run and report ---------------------------------------------------------------------------

const warm = await throughput();
const latencies: LatencyResult[] = [];
latencies.push(
  await latency('steady state: one range, store instant', { step: 10_000_000, delayMs: 0 }),
);
latencies.push(
  await latency('double buffer: ranges of 10,000, store delayed 50 ms', {
    step: 10_000,
    delayMs: 50,
  }),
);
latencies.push(
  await latency('for contrast, single buffer (`prefetchThreshold: 1`), delayed 50 ms', {
    step: 10_000,
    delayMs: 50,
    prefetchThreshold: 1,
  }),
);
const allocations = await roundTrips();

const steady = latencies[0] as LatencyResult;
const hidden = latencies[1] as LatencyResult;
const markdown = `${machineLine()} ${ROUNDS} rounds of ${BURST.toLocaleString('en-US')} IDs per \
candidate,
interleaved; the median round is shown. Stores are SQLite \`:memory:\` unless named.

**Throughput, warm buffer** (target: \`next(tag)\` at least 20 million IDs/s; measured
${formatRate(warm.nextSyncRate)} IDs/s: \
**${warm.nextSyncRate >= 20e6 ? 'met' : 'not met on this run'}**):

${markdownTable(['Candidate', 'IDs/s', 'vs bare counter', 'Notes'], warm.rows)}

**Latency across range switches** (target: p99.9 of \`next(tag)\` with every allocation delayed
50 ms within 1.5x of steady state; measured \
**${(hidden.service.p999 / steady.service.p999).toFixed(2)}x**, and
${(hidden.response.p999 / steady.response.p999).toFixed(2)}x for the response time). \
${LATENCY_MS / 1000} s per row at 100,000 requests/s served in ~1 ms ticks. *Call*: from the
call to the ID in hand (\`nextSync(tag) ?? await next(tag)\`, what a route does). *Response*: from \
the
request's scheduled arrival to the ID in hand, including time queued behind a stalled request
and the tick's timer lag, as a client would see it. Response p99.9 mostly measures the event
loop's timer lag, which varies from run to run with the machine's load (steady state included);
the single-buffer row shows what it looks like when the database is on the request path.

${markdownTable(
  [
    'Configuration',
    'Range loads',
    'Had to wait',
    'Call p50',
    'Call p99.9',
    'Call max',
    'Response p50',
    'Response p99.9',
    'Response max',
  ],
  latencies.map((r) => [
    r.name,
    String(r.loads),
    String(r.waited),
    us(r.service.p50),
    us(r.service.p999),
    us(r.service.max),
    us(r.response.p50),
    us(r.response.p999),
    us(r.response.max),
  ]),
)}

**Allocation round trip** (one \`store.allocate(tag)\`, ${ALLOCATIONS} in a row, loopback, shared
* services):

${markdownTable(['Backend', 'p50', 'p99', 'How'], allocations)}`;

/**
 * What docs/benchmarks.md keeps: the throughput table, the latency target and the round trips in
 * lines.
 */
const switchRatio = hidden.service.p999 / steady.service.p999;
const roundTripLine = allocations.map(([backend, p50, p99]) =>
  p99 === '' ? `${backend} unreachable` : `${backend} ${p50} / ${p99}`,
);
const page = `${machineLine()} Median of ${ROUNDS} interleaved rounds of \
${BURST.toLocaleString('en-US')} IDs \
per candidate; stores are SQLite \`:memory:\` unless named.

${markdownTable(['Candidate', 'IDs/s', 'vs bare counter', 'Notes'], warm.rows)}

- \`next(tag)\` on a warm buffer at least 20,000,000 IDs/s: \
${warm.nextSyncRate >= 20e6 ? 'met' : '**not met**'} \
(${formatRate(warm.nextSyncRate)})
- p99.9 of \`next(tag)\` across range switches, every allocation delayed 50 ms, within 1.5x of \
steady state: \
${switchRatio <= 1.5 ? 'met' : '**not met**'} (${switchRatio.toFixed(2)}x; response time \
${(hidden.response.p999 / steady.response.p999).toFixed(2)}x, mostly the event loop's timer lag)
- allocation round trip, p50 / p99 of ${ALLOCATIONS} in a row: ${roundTripLine.join('; ')}`;

process.stdout.write(`${markdown}\n`);
if (sink === Symbol.for('never')) process.stdout.write('');
if (WRITE) {
  writeSection('segment', page);
  process.stderr.write('docs/benchmarks.md updated\n');
}
