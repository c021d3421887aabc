// Cluster-ordered tags (docs/segments.md, Cluster order): throughput and p99 of a cluster-ordered
// tag on its issuer and through a node that forwards to it, beside a plain tag on the same node,
// in one run, as ratios; and the time without an issuer when the issuer is killed (the lease
// must run out) or stopped gracefully (it gives the lease back).
//
//   npm run bench:ordering -- --write                  (--write: update docs/benchmarks.md)
//   DURATION=5 CONNECTIONS=50 npm run bench:ordering
//
// Two `idmint serve` processes on one SQLite file, autocannon in this process. Before them, the
// hot path in this process: SegmentService.nextSync of a plain tag against a cluster-ordered tag
// this node issues (its one extra cost: a deadline comparison).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MonotonicClock } from '../src/clocks/monotonic-clock.ts';
import { SegmentService } from '../src/service/segment-service.ts';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { closedLoop, type ClosedLoopResult } from './support/closed-loop.ts';
import {
  formatRate,
  loadNote,
  machineLine,
  markdownTable,
  pause,
  writeSection,
} from './support/report.ts';

const DURATION = Number(process.env['DURATION'] ?? 5);
const WARMUP = Number(process.env['WARMUP'] ?? 2);
const CONNECTIONS = Number(process.env['CONNECTIONS'] ?? 50);
const WRITE = process.argv.includes('--write');
const BIN = fileURLToPath(new URL('../bin/idmint.js', import.meta.url));

const dir = mkdtempSync(join(tmpdir(), 'idmint-bench-ordering-'));
const file = join(dir, 'tags.db');
const setup = new SqliteSegmentStore({ path: file });
await setup.init();
await setup.createTag({ tag: 'plain', step: 100_000 });
await setup.createTag({ tag: 'ordered', step: 100_000, ordering: 'cluster' });

/** The hot path: ns per nextSync of each tag, in this process. */
async function hotPath(): Promise<{ plain: number; ordered: number }> {
  const service = new SegmentService({
    store: setup,
    clock: new MonotonicClock(),
    tagRefreshMs: 0,
  });
  service.issuers?.setAddress('http://127.0.0.1:1');
  await service.start();
  try {
    const time = async (tag: string) => {
      await service.next(tag);
      let best = Number.POSITIVE_INFINITY;
      for (let round = 0; round < 5; round++) {
        const n = 2_000_000;
        const started = performance.now();
        for (let i = 0; i < n; i++)
          if (service.nextSync(tag) === undefined) await service.next(tag);
        best = Math.min(best, ((performance.now() - started) * 1e6) / n);
      }
      return best;
    };
    return { plain: await time('plain'), ordered: await time('ordered') };
  } finally {
    await service.close();
  }
}

interface Node {
  readonly url: string;
  readonly child: ChildProcess;
}

/** `idmint serve` on the shared file; resolves once it listens. */
function serve(): Promise<Node> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1'], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      IDMINT_SEGMENT_STORE: `sqlite:${file}`,
      IDMINT_SNOWFLAKE_ENABLED: 'false',
      IDMINT_METRICS_ENABLED: 'false',
      IDMINT_LOG_LEVEL: 'info',
    },
  });
  return new Promise((resolve, reject) => {
    let pending = '';
    child.once('exit', (code) => reject(new Error(`idmint serve exited with ${code}`)));
    child.stdout?.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === 'idmint listening' && entry.url !== undefined) {
          child.removeAllListeners('exit');
          resolve({ url: entry.url, child });
        }
      }
    });
  });
}

const agent = new Agent({ keepAlive: true });
function get(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request(url, { agent, timeout: 2000 }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end();
  });
}

/**
 * Requests through `via` one after the other while `fault` runs on the issuer: the longest time
 * between two successful answers from the fault until answers come again after the first failure
 * (answers still in flight when the fault lands do not end the measurement).
 */
async function gap(via: string, fault: () => void): Promise<number> {
  let running = true;
  let last = performance.now();
  let longest = 0;
  let failed = false;
  let recovered = false;
  const loop = (async () => {
    while (running) {
      const status = await get(`${via}/api/segment/get/ordered`);
      const now = performance.now();
      if (status === 200) {
        longest = Math.max(longest, now - last);
        last = now;
        if (failed) recovered = true;
      } else {
        failed = true;
        await pause(5);
      }
    }
  })();
  await pause(500);
  last = performance.now();
  longest = 0;
  fault();
  // Without a failure (a seamless handover) the measurement ends 3 s after the fault.
  const started = performance.now();
  const until = started + 40_000;
  while (!recovered && performance.now() < until && (failed || performance.now() < started + 3000))
    await pause(50);
  await pause(500);
  running = false;
  await loop;
  return longest;
}

const hot = await hotPath();
process.stderr.write(
  `nextSync: plain ${hot.plain.toFixed(1)} ns, ordered ${hot.ordered.toFixed(1)} ns\n`,
);

const load = loadNote();
let issuer = await serve();
const forwarder = await serve();
// The first request makes the issuer claim the lease; the other node then learns it from the store.
await get(`${issuer.url}/api/segment/get/ordered`);
await get(`${forwarder.url}/api/segment/get/ordered`);

interface Scenario {
  readonly name: string;
  readonly url: () => string;
  readonly ids: number;
}
const SCENARIOS: Scenario[] = [
  { name: 'plain tag', url: () => `${issuer.url}/api/segment/get/plain`, ids: 1 },
  {
    name: 'ordered tag, on its issuer',
    url: () => `${issuer.url}/api/segment/get/ordered`,
    ids: 1,
  },
  {
    name: 'ordered tag, through a forwarding node',
    url: () => `${forwarder.url}/api/segment/get/ordered`,
    ids: 1,
  },
  {
    name: 'plain tag, on the forwarding node',
    url: () => `${forwarder.url}/api/segment/get/plain`,
    ids: 1,
  },
  {
    name: 'ordered tag, batch of 100, through a forwarding node',
    url: () => `${forwarder.url}/v1/segment/ordered?count=100`,
    ids: 100,
  },
];
const results: { scenario: Scenario; m: ClosedLoopResult }[] = [];
let killGap = Number.NaN;
let stopGap = Number.NaN;
try {
  for (const scenario of SCENARIOS) {
    await closedLoop(scenario.url(), WARMUP, { connections: CONNECTIONS });
    const m = await closedLoop(scenario.url(), DURATION, {
      connections: CONNECTIONS,
      keepLatencies: true,
    });
    results.push({ scenario, m });
    process.stderr.write(
      `${scenario.name}: ${formatRate(m.requestsPerSecond)} req/s, p99 ${m.p99.toFixed(2)} ms` +
        `${m.failures > 0 ? `, ${m.failures} failures` : ''}\n`,
    );
  }
  // A graceful stop gives the lease back: the forwarding node claims it at once.
  const stopped = issuer;
  stopGap = await gap(forwarder.url, () => stopped.child.kill('SIGTERM'));
  process.stderr.write(`handover after SIGTERM: ${stopGap.toFixed(0)} ms without an answer\n`);
  // The forwarding node now issues; a new node takes its requests, and the issuer is killed.
  const killed = forwarder;
  issuer = await serve();
  await get(`${issuer.url}/api/segment/get/ordered`);
  killGap = await gap(issuer.url, () => killed.child.kill('SIGKILL'));
  process.stderr.write(`handover after SIGKILL: ${killGap.toFixed(0)} ms without an answer\n`);
} finally {
  for (const node of [issuer, forwarder]) node.child.kill('SIGKILL');
  agent.destroy();
  await setup.close();
  rmSync(dir, { recursive: true, force: true });
}

const plain = results[0]?.m.requestsPerSecond ?? Number.NaN;
const rows = results.map(({ scenario, m }) => [
  scenario.name,
  formatRate(m.requestsPerSecond),
  formatRate(m.requestsPerSecond * scenario.ids),
  m.p50.toFixed(2),
  m.p99.toFixed(2),
  (m.requestsPerSecond / plain).toFixed(2),
  m.failures === 0 ? 'none' : `**${m.failures}**`,
]);
const page = `${machineLine()} ${load} Two \`idmint serve\` processes on one SQLite file (default \
settings: lease TTL 10 s), autocannon in a third process, ${CONNECTIONS} connections, \
${DURATION} s per row after ${WARMUP} s of warm-up; Leaf's single-ID route unless said. Latencies \
in ms.

${markdownTable(['Route', 'req/s', 'IDs/s', 'p50', 'p99', 'vs plain', 'Failures'], rows)}

- Hot path in one process, \`SegmentService.nextSync\`: plain tag ${hot.plain.toFixed(1)} ns, \
cluster-ordered tag on its issuer ${hot.ordered.toFixed(1)} ns per ID.
- Time without an answer through another node when the issuer stops gracefully (SIGTERM: it gives \
the lease back): ${formatRate(stopGap)} ms; when it is killed (SIGKILL: the lease runs out by the \
store's clock): ${formatRate(killGap)} ms.`;

process.stdout.write(`${page}\n`);
if (WRITE) {
  writeSection('ordering', page);
  process.stderr.write('docs/benchmarks.md updated\n');
}
