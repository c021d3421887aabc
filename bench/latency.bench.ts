// Latency at fixed rates, measured open-loop (issue 13), and binary batches against JSON ones,
// all against a bare Fastify route in the same run.
//
//   npm run bench:latency -- --write                    (--write: update docs/benchmarks.md)
//   DURATION=5 PROCESSES=1,2 npm run bench:latency      (PROCESSES: idmint serve --processes N)
//   PIN=1 npm run bench:latency                          (generator on CPU 0, servers on CPU 1)
//   PEERS='leaf=http://127.0.0.1:8081/api/segment/get/leaf-segment-test' npm run bench:latency
//                                       (any HTTP ID service beside idmint: name=URL,
//                                       comma-separated)
//
// 1. Validation: the bare route at a fixed rate while its process is paused (SIGSTOP) for 100 ms,
//    measured by the open-loop generator and by autocannon (closed loop): the open loop must show
//    the stall in p99/p99.9, the closed loop hides it in a handful of samples.
// 2. Saturation (autocannon, closed loop): the bare route's ceiling, which sets the third rate.
// 3. Fixed rates (bench/support/open-loop.ts): 10,000 and 25,000 req/s and half the bare route's
//    saturation rate, on the bare route and on the single-ID Leaf routes; p99.9 against the bare
//    route's in the same run, and each server's CPU time per request
//    (bench/support/process-cpu.ts). A second bare server (the A/A control) is measured the same
//    way: its ratio to the first is what the machine alone makes of two equal servers, the
//    resolution of the run's ratios.
// 4. Batches: `Accept: application/octet-stream` against JSON, closed loop, IDs/s, beside the bare
//    server answering the same number of prebuilt bytes (the transfer ceiling); for segment tags
//    also the range form (`/v1/segment/{tag}/range?size=N`: a start and an end per answer).
//
// Every server runs in a process of its own; the generator runs in this one, on the same 2 cores.
import { execFileSync } from 'node:child_process';
import {
  formatRate,
  loadNote,
  machineLine,
  markdownTable,
  median,
  writeSection,
} from './support/report.ts';
import {
  bodyLoop,
  closedLoop,
  startTarget,
  stopTargets,
  type Target,
} from './support/closed-loop.ts';
import { openLoop, type OpenLoopResult } from './support/open-loop.ts';
import { treeCpuMs } from './support/process-cpu.ts';
import { idleFor, timerGaps } from './support/timer-gaps.ts';

const DURATION = Number(process.env['DURATION'] ?? 5);
const WARMUP = Number(process.env['WARMUP'] ?? 1);
const ROUNDS = Number(process.env['ROUNDS'] ?? 3);
const CONNECTIONS = Number(process.env['CONNECTIONS'] ?? 50);
const BATCH_CONNECTIONS = Number(process.env['BATCH_CONNECTIONS'] ?? 8);
const PROCESSES = (process.env['PROCESSES'] ?? '1').split(',').map(Number);
const VALIDATE_RATE = Number(process.env['VALIDATE_RATE'] ?? 5_000);
const PAUSE_MS = 100;
const WRITE = process.argv.includes('--write');
/**
 * PIN=1 (Linux, with taskset): the generator on CPU 0 and every server on CPU 1, so the two stop
 * taking turns on one core. Only for one idmint process (two would share CPU 1).
 */
const PIN = process.env['PIN'] === '1';
if (PIN) {
  if (PROCESSES.some((n) => n > 1))
    throw new Error('PIN=1 pins each server to one CPU: use it with PROCESSES=1');
  execFileSync('taskset', ['-pc', '0', String(process.pid)], { stdio: 'ignore' });
}
const SERVER_CPU = PIN ? 1 : undefined;

/** Other ID services measured beside idmint's routes, as `name=URL` pairs (any GET route). */
function parsePeers(spec: string): { readonly name: string; readonly url: string }[] {
  return spec
    .split(',')
    .filter((pair) => pair.trim() !== '')
    .map((pair) => {
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const url = pair.slice(at + 1).trim();
      if (at <= 0 || !URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
        throw new Error(`PEERS: "${pair}" is not name=http://host:port/path`);
      return { name, url };
    });
}
const PEERS = parsePeers(process.env['PEERS'] ?? '');

/** Targets from issue 13. */
const TARGETS = { p999Ratio: 1.2, p999Ms: 1, batchIdsPerSecond: 50_000_000 };

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : 'none');
const log = (line: string) => process.stderr.write(`${line}\n`);
const verdict = (ok: boolean) => (ok ? 'met' : '**missed**');

const load = loadNote();
// The machine's floor, before any server starts: how late a 1 ms timer fires in this idle process.
const floor = await timerGaps(() => idleFor(2000));
const bare = await startTarget('bare', 1, SERVER_CPU);
// The A/A control: a second, identical bare server, measured exactly as idmint's routes are. Its
// ratio to the first is what the machine alone makes of two equal servers: the resolution of
// every other ratio in the run.
const control = await startTarget('bare', 1, SERVER_CPU).catch((error: unknown) => {
  stopTargets([bare]);
  throw error;
});
const idmint = new Map<number, Target>();
try {
  // One process also serves the bare app in its own event loop (its twin): see below.
  for (const processes of PROCESSES)
    idmint.set(
      processes,
      await startTarget('idmint', processes, SERVER_CPU, { twin: processes === 1 }),
    );
} catch (error) {
  stopTargets([bare, control, ...idmint.values()]);
  throw error;
}
/**
 * `reference`: the bare route every other is judged against; `control`: the A/A control; `twin`:
 * the bare app inside the one-process idmint server, sharing its event loop, heap and CPU
 * placement, so idmint's routes against it show their own per-request cost without the bias
 * of one process against another.
 */
type Role = 'reference' | 'control' | 'twin' | 'idmint' | 'peer';
interface Route {
  readonly name: string;
  readonly url: string;
  readonly processes: number;
  /** The server's process, started here; none for a peer (its CPU time is not measured). */
  readonly target?: Target;
  readonly role: Role;
}
const routes: Route[] = [
  {
    name: 'bare Fastify route',
    url: `${bare.url}/bare/get/bench`,
    processes: 0,
    target: bare,
    role: 'reference',
  },
  {
    name: 'bare Fastify route, second process (A/A control)',
    url: `${control.url}/bare/get/bench`,
    processes: 0,
    target: control,
    role: 'control',
  },
  ...[...idmint].flatMap(([processes, target]) => [
    ...(target.twin === undefined
      ? []
      : [
          {
            name: "bare Fastify route in idmint's process (twin)",
            url: `${target.twin}/bare/get/bench`,
            processes,
            target,
            role: 'twin' as const,
          },
        ]),
    {
      name: '`/api/segment/get/{tag}`',
      url: `${target.url}/api/segment/get/bench`,
      processes,
      target,
      role: 'idmint' as const,
    },
    {
      name: '`/api/snowflake/get/{key}`',
      url: `${target.url}/api/snowflake/get/bench`,
      processes,
      target,
      role: 'idmint' as const,
    },
  ]),
  // A peer is measured exactly as idmint's routes are; its server is not ours, so no CPU figure.
  ...PEERS.map(({ name, url }) => ({
    name: `${name} (peer, ${new URL(url).pathname})`,
    url,
    processes: 0,
    role: 'peer' as const,
  })),
];

/** Sends SIGSTOP to the bare server after `atMs`, and SIGCONT {@link PAUSE_MS} later. */
function pauseBare(atMs: number): NodeJS.Timeout {
  return setTimeout(() => {
    bare.child.kill('SIGSTOP');
    setTimeout(() => bare.child.kill('SIGCONT'), PAUSE_MS);
  }, atMs);
}

/** Requests at or above `threshold` ms. */
const atLeast = (latencies: Float64Array, threshold: number) =>
  latencies.filter((v) => v >= threshold).length;

let markdown: string;
/** What docs/benchmarks.md keeps: one row per route, and the run's summary lines. */
let page: string;
try {
  // 1. Validation on the bare route.
  const bareUrl = `${bare.url}/bare/get/bench`;
  await openLoop({ url: bareUrl, rate: VALIDATE_RATE, seconds: WARMUP, connections: CONNECTIONS });
  const quiet = await openLoop({
    url: bareUrl,
    rate: VALIDATE_RATE,
    seconds: DURATION,
    connections: CONNECTIONS,
  });
  const paused = await openLoop({
    url: bareUrl,
    rate: VALIDATE_RATE,
    seconds: DURATION,
    connections: CONNECTIONS,
    events: [{ atMs: (DURATION * 1000) / 2, run: () => pauseBare(0) }],
  });
  const closedTimer = pauseBare((DURATION * 1000) / 2);
  const closed = await closedLoop(bareUrl, DURATION, {
    connections: CONNECTIONS,
    keepLatencies: true,
  });
  clearTimeout(closedTimer);
  const validationRows = [
    [
      'open loop, no pause',
      formatRate(quiet.achievedRate),
      ms(quiet.p50),
      ms(quiet.p99),
      ms(quiet.p999),
      ms(quiet.max),
      formatRate(atLeast(quiet.latencies, 50)),
    ],
    [
      `open loop, ${PAUSE_MS} ms pause`,
      formatRate(paused.achievedRate),
      ms(paused.p50),
      ms(paused.p99),
      ms(paused.p999),
      ms(paused.max),
      formatRate(atLeast(paused.latencies, 50)),
    ],
    [
      `autocannon (closed loop), ${PAUSE_MS} ms pause`,
      formatRate(closed.requestsPerSecond),
      ms(closed.p50),
      ms(closed.p99),
      ms(closed.p999),
      ms(closed.max),
      formatRate(atLeast(closed.latencies, 50)),
    ],
  ];
  log(
    `validation: open loop paused p99.9 ${ms(paused.p999)} ms, closed loop paused p99.9 ` +
      `${ms(closed.p999)} ms`,
  );
  // What a correct measurement must show: every request due during the pause waited, so at
  // least (rate x pause / 2) requests took 50 ms or more.
  const expectedSlow = Math.floor((VALIDATE_RATE * PAUSE_MS) / 1000 / 2);
  const validationOk = atLeast(paused.latencies, 50) >= expectedSlow * 0.8;

  // 2. Saturation.
  const saturation = new Map<Route, number>();
  for (const route of routes) {
    await closedLoop(route.url, WARMUP, { connections: CONNECTIONS });
    const m = await closedLoop(route.url, Math.max(2, Math.round(DURATION / 2)), {
      connections: CONNECTIONS,
    });
    saturation.set(route, m.requestsPerSecond);
    log(
      `saturation ${route.name} (${route.processes} processes): ` +
        `${formatRate(m.requestsPerSecond)} req/s`,
    );
  }
  const [reference] = routes as [Route];
  const twin = routes.find((route) => route.role === 'twin');
  const bareCeiling = saturation.get(reference) ?? Number.NaN;
  const saturationRows = routes.map((route) => {
    const rps = saturation.get(route) ?? Number.NaN;
    return [
      route.name,
      route.processes === 0 ? '-' : String(route.processes),
      formatRate(rps),
      route.role === 'reference' ? '1.00 (ceiling)' : (rps / bareCeiling).toFixed(2),
    ];
  });

  // 3. Fixed rates.
  const rates = [...new Set([10_000, 25_000, Math.round(bareCeiling / 2 / 1000) * 1000])].sort(
    (a, b) => a - b,
  );
  // Each measurement also takes the server's CPU time per answered request (all its processes).
  type FixedRun = OpenLoopResult & { readonly cpuUsPerRequest: number };
  const fixed = new Map<Route, Map<number, FixedRun[]>>();
  /** The runs of `route` at `rate` so far; none for a route that is not there. */
  const runsOf = (route: Route | undefined, rate: number): FixedRun[] =>
    route === undefined ? [] : (fixed.get(route)?.get(rate) ?? []);
  for (let round = 0; round < ROUNDS; round++) {
    // Each round starts at another route, so no route is always the one measured first after a
    // change of rate or right after another route's heaviest run.
    const order = [
      ...routes.slice(round % routes.length),
      ...routes.slice(0, round % routes.length),
    ];
    for (const rate of rates) {
      for (const route of order) {
        await openLoop({ url: route.url, rate, seconds: WARMUP, connections: CONNECTIONS });
        const pid = route.target?.child.pid;
        const cpuBefore = pid === undefined ? Number.NaN : treeCpuMs(pid);
        const run = await openLoop({
          url: route.url,
          rate,
          seconds: DURATION,
          connections: CONNECTIONS,
        });
        const m = {
          ...run,
          cpuUsPerRequest:
            pid === undefined ? Number.NaN : ((treeCpuMs(pid) - cpuBefore) * 1000) / run.ok,
        };
        const byRate = fixed.get(route) ?? new Map<number, FixedRun[]>();
        fixed.set(route, byRate.set(rate, [...runsOf(route, rate), m]));
        log(
          `${formatRate(rate)} req/s ${route.name} (${route.processes}): p50 ${ms(m.p50)} ` +
            `p99 ${ms(m.p99)} p99.9 ${ms(m.p999)} max ${ms(m.max)} lag p99.9 ` +
            `${ms(m.sendLagP999)} CPU ${m.cpuUsPerRequest.toFixed(1)} ` +
            `us/request${m.failures > 0 ? `, ${m.failures} failures` : ''}`,
        );
      }
    }
  }
  const pick = (runs: readonly FixedRun[], f: (m: FixedRun) => number) => median(runs.map(f));
  const checks: string[] = [];
  const cpuRatios: number[] = [];
  /**
   * p99.9 ratios over the rates the bare route kept up with: to the bare route, by role; and
   * (`inProcess`) of idmint's one-process routes to the twin in their process.
   */
  const ratios = {
    control: [] as number[],
    idmint: [] as number[],
    peer: [] as number[],
    inProcess: [] as number[],
  };
  const fixedRows = rates.flatMap((rate) => {
    const bareRuns = runsOf(reference, rate);
    const bareP999 = pick(bareRuns, (m) => m.p999);
    const bareCpu = pick(bareRuns, (m) => m.cpuUsPerRequest);
    const twinP999 = pick(runsOf(twin, rate), (m) => m.p999);
    return routes.map((route) => {
      const runs = runsOf(route, rate);
      const p999 = pick(runs, (m) => m.p999);
      const achieved = pick(runs, (m) => m.achievedRate);
      const failures = runs.reduce((n, m) => n + m.failures, 0);
      const ratio = p999 / bareP999;
      const cpu = pick(runs, (m) => m.cpuUsPerRequest);
      let target = '-';
      const bareBehind = pick(bareRuns, (m) => m.achievedRate) < rate * 0.98;
      // Where the bare route kept up: past saturation, requests queue and CPU per request changes
      // regime.
      if (route.role === 'idmint' && !bareBehind && Number.isFinite(cpu))
        cpuRatios.push(cpu / bareCpu);
      const label =
        route.role === 'control'
          ? 'A/A control (a second bare process)'
          : route.role === 'twin'
            ? "the bare app in idmint's process (twin)"
            : route.role === 'peer'
              ? route.name
              : `${route.name}, ${route.processes} process(es)`;
      // Against the twin: the same process, so the same loop, heap and placement.
      const inProcess =
        route.role === 'idmint' && route.processes === 1 && Number.isFinite(twinP999)
          ? p999 / twinP999
          : undefined;
      if (route.role !== 'reference' && bareBehind) {
        // The reference itself could not keep up: its queue, not its latency, sets its p99.9.
        const behind = route.role === 'peer' ? 'behind' : '**missed** (behind)';
        target = achieved < rate * 0.98 ? behind : 'not judged (bare route behind)';
        checks.push(`${formatRate(rate)} req/s, ${label}: p99.9 ${ms(p999)} ms; ${target}`);
      } else if (route.role === 'twin') {
        target = 'reference in its process';
        checks.push(
          `${formatRate(rate)} req/s, ${label}: p99.9 ${ms(p999)} ms = ${ratio.toFixed(2)}x ` +
            `the bare route's ${ms(bareP999)} ms`,
        );
      } else if (route.role !== 'reference') {
        ratios[route.role].push(ratio);
        if (inProcess !== undefined) ratios.inProcess.push(inProcess);
        if (route.role === 'control') {
          // Two equal servers: any ratio away from 1, either way, is the machine's.
          const within = ratio <= TARGETS.p999Ratio && ratio >= 1 / TARGETS.p999Ratio;
          target = `A/A: ${within ? 'within' : 'outside'} 1.2x either way`;
        } else if (route.role === 'peer') {
          target = 'peer (no target)';
        } else {
          const withinRatio = ratio <= TARGETS.p999Ratio && achieved >= rate * 0.98;
          const underMs = bareP999 > TARGETS.p999Ms || p999 <= TARGETS.p999Ms;
          target =
            `${verdict(withinRatio)} ` +
            `(1.2x)${bareP999 <= TARGETS.p999Ms ? `, ${verdict(underMs)} (1 ms)` : ''}`;
        }
        const twinNote =
          inProcess === undefined
            ? ''
            : `; ${inProcess.toFixed(2)}x the bare app in its own process (${ms(twinP999)} ms)`;
        checks.push(
          `${formatRate(rate)} req/s, ${label}: p99.9 ${ms(p999)} ms = ${ratio.toFixed(2)}x ` +
            `the bare route's ${ms(bareP999)} ms: ${target}${twinNote}`,
        );
      }
      return [
        formatRate(rate),
        route.name,
        route.processes === 0 ? '-' : String(route.processes),
        `${formatRate(achieved)}${achieved < rate * 0.98 ? ' **(behind)**' : ''}`,
        ms(pick(runs, (m) => m.p50)),
        ms(pick(runs, (m) => m.p99)),
        ms(p999),
        ms(pick(runs, (m) => m.max)),
        ms(pick(runs, (m) => m.sendLagP999)),
        Number.isFinite(cpu) ? `${cpu.toFixed(1)} (${(cpu / bareCpu).toFixed(2)})` : '-',
        route.role === 'reference' ? '1.00' : ratio.toFixed(2),
        inProcess === undefined ? '-' : inProcess.toFixed(2),
        failures === 0 ? 'none' : `**${failures}**`,
        target,
      ];
    });
  });

  // 4. Batches, binary against JSON.
  const octets = { accept: 'application/octet-stream' };
  const [firstTarget] = idmint.values();
  const batchRows: string[][] = [];
  const batchRates = new Map<string, number>();
  const idmintBatches = new Map<string, number>();
  if (firstTarget !== undefined) {
    for (const [name, path, count] of [
      ['segment', '/v1/segment/bench-batch', 100_000],
      ['segment', '/v1/segment/bench-batch', 1_000_000],
      // A worker issues at most 4,096 IDs per ms under the default layout: the route's bound is
      // 409,600.
      ['snowflake', '/v1/snowflake', 100_000],
    ] as const) {
      // The bare route's prebuilt body of the same size first: what HTTP carries here at most.
      // A segment tag also has the range form: up to `count` IDs as one start and end.
      const forms = [
        ['bare route, prebuilt body', `${bare.url}/bare/batch?count=${count}`, octets],
        ['JSON', `${firstTarget.url}${path}?count=${count}`, undefined],
        ['octet-stream', `${firstTarget.url}${path}?count=${count}`, octets],
        ...(name === 'segment'
          ? [['range', `${firstTarget.url}${path}/range?size=${count}`, undefined] as const]
          : []),
      ] as const;
      for (const [form, url, headers] of forms) {
        // A range may hold fewer than asked (the rest of a buffered range): count what each
        // carried.
        let rangeIds = 0;
        const onBody =
          form === 'range'
            ? (body: Buffer) =>
                (rangeIds += (JSON.parse(body.toString('utf8')) as { size: number }).size)
            : undefined;
        const options = {
          connections: BATCH_CONNECTIONS,
          ...(headers === undefined ? {} : { headers }),
          ...(onBody === undefined ? {} : { onBody }),
        };
        await bodyLoop(url, WARMUP, options);
        rangeIds = 0;
        const m = await bodyLoop(url, DURATION, options);
        const seconds = m.latencies.length / m.requestsPerSecond;
        const ids = form === 'range' ? rangeIds / seconds : m.requestsPerSecond * count;
        const key = `${name}:${count}`;
        batchRates.set(`${key}:${form}`, ids);
        if (form !== forms[0][0]) idmintBatches.set(`${key}:${form}`, ids);
        log(`batch ${name} ${formatRate(count)} ${form}: ${formatRate(ids)} IDs/s`);
        const json = batchRates.get(`${key}:JSON`) ?? Number.NaN;
        const ceiling = batchRates.get(`${key}:${forms[0][0]}`) ?? Number.NaN;
        const shownPath = path.replace('bench-batch', '{tag}');
        const shownUrl =
          form === 'range' ? `${shownPath}/range?size=${count}` : `${shownPath}?count=${count}`;
        batchRows.push([
          `\`${shownUrl}\``,
          form,
          formatRate(m.requestsPerSecond),
          formatRate(ids),
          form === 'octet-stream' || form === 'range' ? (ids / json).toFixed(2) : '-',
          (ids / ceiling).toFixed(2),
          formatRate(m.bytes / DURATION / 1e6),
          ms(m.p50),
          ms(m.p99),
          m.failures === 0 ? 'none' : `**${m.failures}**`,
        ]);
      }
    }
  }
  const best = (forms: readonly string[]) =>
    Math.max(
      ...[...idmintBatches]
        .filter(([key]) => forms.some((form) => key.endsWith(`:${form}`)))
        .map(([, ids]) => ids),
    );
  const bestBatch = best(['octet-stream']);
  const bestRange = best(['range']);
  const segmentCeiling = Math.max(
    batchRates.get('segment:100000:bare route, prebuilt body') ?? 0,
    batchRates.get('segment:1000000:bare route, prebuilt body') ?? 0,
  );
  const span = (values: readonly number[]) =>
    values.length === 0
      ? 'nothing (the bare route was behind)'
      : `${Math.min(...values).toFixed(2)}x to ${Math.max(...values).toFixed(2)}x`;
  // How far apart the machine put two equal servers, as a factor either way (none: not judged).
  const noise =
    ratios.control.length === 0
      ? Number.POSITIVE_INFINITY
      : Math.max(...ratios.control, ...ratios.control.map((r) => 1 / r));
  // The lines from here on sum the run up; the ones before are per case, in the full report only.
  const summaryFrom = checks.length;
  checks.push(
    `resolution: the A/A control (the same bare server in a second process) measured ` +
      `${span(ratios.control)} the bare route's p99.9, so this run cannot tell ratios within ` +
      `${Number.isFinite(noise) ? `${noise.toFixed(2)}x either way` : 'any factor'} from the ` +
      `machine; ` +
      `idmint's routes measured ${span(ratios.idmint)}, within 1.2x in ` +
      `${ratios.idmint.filter((r) => r <= TARGETS.p999Ratio).length} of ` +
      `${ratios.idmint.length} cases, beyond the control's spread in ` +
      `${ratios.idmint.filter((r) => r > noise).length}`,
  );
  if (ratios.peer.length > 0) {
    checks.push(
      `peers: ${PEERS.map((peer) => peer.name).join(', ')} measured ${span(ratios.peer)} ` +
        `the bare route's p99.9 in the same run (idmint's routes: ${span(ratios.idmint)})`,
    );
  }
  if (ratios.inProcess.length > 0) {
    checks.push(
      `in one process: idmint's routes measured ${span(ratios.inProcess)} the bare app ` +
        `serving beside them in the same process (the twin), within 1.2x in ` +
        `${ratios.inProcess.filter((r) => r <= TARGETS.p999Ratio).length} of ` +
        `${ratios.inProcess.length} cases: ` +
        'their own per-request cost, without the placement of one process against another',
    );
  }
  checks.push(
    `server CPU per single-ID request: ${Math.min(...cpuRatios).toFixed(2)} to ` +
      `${Math.max(...cpuRatios).toFixed(2)} times the bare route's, across routes at the ` +
      `rates the bare route kept up with (no target; CPU per request moves little with the ` +
      `machine's load)`,
  );
  checks.push(
    `binary batches at least ${formatRate(TARGETS.batchIdsPerSecond)} IDs/s over HTTP: ` +
      `${verdict(bestBatch >= TARGETS.batchIdsPerSecond)} (best ${formatRate(bestBatch)} ` +
      `IDs/s; the bare route carried at most ${formatRate(segmentCeiling)} IDs/s of prebuilt ` +
      `bytes in the same run)`,
  );
  checks.push(
    `segment ranges (the range form: a start and an end per answer) at least ` +
      `${formatRate(TARGETS.batchIdsPerSecond)} IDs/s over HTTP: ` +
      `${verdict(bestRange >= TARGETS.batchIdsPerSecond)} (best ${formatRate(bestRange)} ` +
      `IDs/s, counted from each answer's size)`,
  );
  checks.push(
    `validation: the open loop shows the ${PAUSE_MS} ms pause (at least ` +
      `${Math.ceil(expectedSlow * 0.8)} requests at 50 ms or more): ${verdict(validationOk)}`,
  );

  markdown = `${machineLine()} ${load} Short runs, ${DURATION} s per measurement after ${WARMUP} s \
of warm-up, ${ROUNDS} round(s)
(median shown). The machine's floor: in this process, idle before the run, a 1 ms timer fired up to
${ms(floor.maxGapMs)} ms apart (p99.9 ${ms(floor.p999GapMs)} ms): the host's scheduling, not a \
server's, and no tail
below it can be judged. Each server in its own process; the generator (this process) runs on the \
same 2 cores
and takes CPU from the server under test${
    PIN ? ' (pinned: the generator on CPU 0, the ' + 'servers on CPU 1)' : ''
  }. idmint processes: ${PROCESSES.join(', ')}. Latencies in ms.

**Validation** on the bare route at ${formatRate(VALIDATE_RATE)} req/s, ${CONNECTIONS} connections,
* the server
process paused (SIGSTOP/SIGCONT) for ${PAUSE_MS} ms in the middle of the run:

${markdownTable(
  ['Measurement', 'req/s', 'p50', 'p99', 'p99.9', 'max', 'requests >= 50 ms'],
  validationRows,
)}

**Saturation** (autocannon, closed loop, ${CONNECTIONS} connections):

${markdownTable(['Route', 'Processes', 'req/s', 'vs bare'], saturationRows)}

**Fixed rates** (open loop, ${CONNECTIONS} connections, latency from each request's intended send
* time;
"generator lag": how late the generator's loop got to each due request, sent or queued, its own
event-loop delay on the shared cores, included in the latencies; "server CPU": user and system CPU
time of the server's processes per answered request, from /proc, and its ratio to the bare route's;
"twin": the bare app served by the one-process idmint server beside its routes, in the same
process, so "vs twin" holds no difference between two processes' placement):

${markdownTable(
  [
    'Rate',
    'Route',
    'Processes',
    'Achieved',
    'p50',
    'p99',
    'p99.9',
    'max',
    'generator lag p99.9',
    'server CPU us/request (vs bare)',
    'p99.9 vs bare',
    'p99.9 vs twin',
    'Failures',
    'Target',
  ],
  fixedRows,
)}

**Batches**, binary against JSON (closed loop, ${BATCH_CONNECTIONS} keep-alive connections over
* node:http, each
reading whole bodies; autocannon's client is too slow for bodies this large). "bare route, \
prebuilt body":
the bare Fastify server answering the same number of bytes, built once, as the ceiling of the \
transfer
itself on this machine ("vs bare" is against it). "range": \`GET /v1/segment/{tag}/range?size=N\`, \
up to N of
the tag's IDs as one start and end (the client's local mode takes its ranges this way), its IDs \
counted
from each answer's \`size\`; it sends a few hundred bytes whatever N is, so it is not bound by the \
transfer:

${markdownTable(
  ['Route', 'Form', 'req/s', 'IDs/s', 'vs JSON', 'vs bare', 'MB/s', 'p50', 'p99', 'Failures'],
  batchRows,
)}

${checks.map((c) => `- ${c}`).join('\n')}`;

  // Per route: saturation, and p99.9 at each rate, each against the bare route in the same run.
  const summaryRows = routes.map((route) => {
    const rps = saturation.get(route) ?? Number.NaN;
    const atRates = rates.map((rate) => {
      const runs = runsOf(route, rate);
      const p999 = pick(runs, (m) => m.p999);
      const behind = pick(runs, (m) => m.achievedRate) < rate * 0.98 ? ' **behind**' : '';
      return (
        `${ms(p999)} ` +
        `(${(p999 / pick(runsOf(reference, rate), (m) => m.p999)).toFixed(2)})${behind}`
      );
    });
    const inTwinsProcess = twin !== undefined && route.role === 'idmint' && route.processes === 1;
    const p999Of = (of: Route | undefined, rate: number) => pick(runsOf(of, rate), (m) => m.p999);
    const toTwin = inTwinsProcess
      ? rates.map((rate) => p999Of(route, rate) / p999Of(twin, rate))
      : [];
    return [
      route.name,
      route.processes === 0 ? '-' : String(route.processes),
      `${formatRate(rps)} (${(rps / bareCeiling).toFixed(2)})`,
      ...atRates,
      toTwin.length === 0 ? '-' : span(toTwin),
    ];
  });
  const rateColumns = rates.map((rate) => `p99.9 at ${formatRate(rate)} req/s`);
  page = `${machineLine()} ${load} Medians of ${ROUNDS} round(s) of ${DURATION} s per measurement; \
each \
server in its own process, the generator on the same 2 cores${PIN ? ' (pinned)' : ''}. Saturation \
by autocannon \
(closed loop); p99.9 in ms at a fixed rate (open loop, ${CONNECTIONS} connections, from each \
request's intended send \
time); in brackets, against the bare Fastify route in the same run. In this process, idle, a 1 ms \
timer fired up to \
${ms(floor.maxGapMs)} ms apart: no tail below that can be judged.

${markdownTable(
  ['Route', 'Processes', 'Saturation req/s (vs bare)', ...rateColumns, 'p99.9 vs twin'],
  summaryRows,
)}

${checks
  .slice(summaryFrom)
  .map((c) => `- ${c}`)
  .join('\n')}`;
} finally {
  // A run stopped during the pause must not leave the bare server stopped.
  bare.child.kill('SIGCONT');
  stopTargets([bare, control, ...idmint.values()]);
}

process.stdout.write(`${markdown}\n`);
if (WRITE) {
  writeSection('latency', page);
  log('docs/benchmarks.md updated');
}
