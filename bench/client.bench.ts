// The client's local mode: `nextIdSync` in the caller on a warm buffer against bare baselines,
// and IDs per second through the client while it draws from a real server (a process of its own)
// against the per-request HTTP client, side by side in one run. Short runs: the machine is shared.
//
//   npm run bench:client -- --write                      (--write: update docs/benchmarks.md)
//   ROUNDS=5 BURST=500000 SECONDS=3 npm run bench:client
import { spawn, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { IdMintClient } from '../src/client/client.ts';
import { defineConfig } from '../src/config/load.ts';
import { buildServer } from '../src/server/app.ts';
import {
  formatRate,
  machineLine,
  markdownTable,
  median,
  pause,
  writeSection,
} from './support/report.ts';

const ROUNDS = Number(process.env['ROUNDS'] ?? 5);
const BURST = Number(process.env['BURST'] ?? 500_000);
const SECONDS = Number(process.env['SECONDS'] ?? 3);
const WRITE = process.argv.includes('--write');
const TAG = 'bench';
/** The target for `nextId` on a warm buffer. */
const TARGET = 30_000_000;

/** Where timed loops leave their last value, so no engine can treat the work as dead. */
let _sink: unknown;

// ---- 1. Warm buffer, in the caller ------------------------------------------------------------

/** An in-process server whose ranges are large enough that a burst never waits for one. */
async function bigRangeServer() {
  const server = await buildServer(
    defineConfig({
      port: 0,
      segment: { store: 'sqlite::memory:' },
      snowflake: { enabled: false },
      api: { maxBatch: 1_000_000 },
      log: { level: 'warn' },
    }),
  );
  const created = await server.app.inject({
    method: 'POST',
    url: '/v1/tags',
    payload: { tag: TAG, step: 1_000_000 },
  });
  if (created.statusCode !== 201) throw new Error(created.body);
  return { server, url: await server.listen() };
}

async function warm(): Promise<{ rows: string[][]; rate: number }> {
  const { server, url } = await bigRangeServer();
  const client = new IdMintClient({
    url,
    local: {
      initialSize: 1_000_000,
      minSize: 1_000_000,
      maxSize: 1_000_000,
      prefetchThreshold: 0.5,
    },
  });
  /** Waits until a whole burst is held, so the timed loop never meets an empty buffer. */
  const fill = async () => {
    _sink = await client.nextId(TAG);
    for (let i = 0; i < 200 && (client.localStats().tags[0]?.buffered ?? 0) < BURST + 1; i++)
      await pause(5);
    if ((client.localStats().tags[0]?.buffered ?? 0) < BURST + 1)
      throw new Error('the client did not fill its buffer');
  };
  const counters = new Map([[TAG, { value: 0n }]]);
  let bare = 0n;
  const candidates: {
    name: string;
    note: string;
    prepare?: () => Promise<void>;
    run(n: number): Promise<void>;
  }[] = [
    {
      name: 'baseline: bare bigint counter',
      note: '`id++`: the least an ID can cost',
      run: async (n) => {
        for (let i = 0; i < n; i++) bare++;
        _sink = bare;
      },
    },
    {
      name: 'baseline: `Map.get(tag)` + bigint counter',
      note: 'a per-tag counter, no ranges',
      run: async (n) => {
        let last = 0n;
        for (let i = 0; i < n; i++) {
          const counter = counters.get(TAG);
          if (counter !== undefined) last = counter.value++;
        }
        _sink = last;
      },
    },
    {
      name: '`client.nextIdSync(tag)`',
      note: 'local mode, synchronous path',
      prepare: fill,
      run: async (n) => {
        let last: bigint | undefined;
        for (let i = 0; i < n; i++) last = client.nextIdSync(TAG);
        if (last === undefined) throw new Error('the buffer ran dry inside a timed burst');
        _sink = last;
      },
    },
    {
      name: '`await client.nextId(tag)`',
      note: 'local mode, a resolved Promise per ID',
      prepare: fill,
      run: async (n) => {
        let last = 0n;
        for (let i = 0; i < n; i++) last = await client.nextId(TAG);
        _sink = last;
      },
    },
  ];
  const rates = new Map<string, number[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const candidate of candidates) {
      // Outside the timed loop: the buffer is filled so the burst never waits for a range.
      await candidate.prepare?.();
      const start = performance.now();
      await candidate.run(BURST);
      const ms = performance.now() - start;
      rates.set(candidate.name, [...(rates.get(candidate.name) ?? []), (BURST / ms) * 1000]);
    }
  }
  await server.close();
  const base = median(rates.get(candidates[0]?.name ?? '') ?? []);
  const rows = candidates.map((candidate) => {
    const rate = median(rates.get(candidate.name) ?? []);
    return [candidate.name, formatRate(rate), (rate / base).toFixed(2), candidate.note];
  });
  return { rows, rate: median(rates.get('`client.nextIdSync(tag)`') ?? []) };
}

// ---- 2. Through a server in a process of its own ---------------------------------------------

function startTarget(): Promise<{ url: string; child: ChildProcess }> {
  const script = fileURLToPath(new URL('./support/http-target.ts', import.meta.url));
  const child = spawn(process.execPath, [...process.execArgv, script, 'idmint'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`idmint target exited with ${code}`)));
    child.stdout?.once('data', (chunk: Buffer) =>
      resolve({ url: (JSON.parse(chunk.toString('utf8')) as { url: string }).url, child }),
    );
  });
}

/**
 * IDs per second that `draw` (which returns how many IDs it got) reaches in SECONDS, with
 * `parallel` callers.
 */
async function drawFor(draw: () => Promise<number>, parallel = 1): Promise<number> {
  const until = performance.now() + SECONDS * 1000;
  const start = performance.now();
  let ids = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (performance.now() < until) ids += await draw();
    }),
  );
  return (ids / (performance.now() - start)) * 1000;
}

async function throughServer(): Promise<string[][]> {
  const target = await startTarget();
  try {
    const local = new IdMintClient({ url: target.url });
    const perRequest = new IdMintClient({ url: target.url, retries: 0 });
    const scenarios: {
      name: string;
      note: string;
      draw: () => Promise<number>;
      parallel?: number;
    }[] = [
      {
        name: 'local mode: `nextIdSync(tag) ?? await nextId(tag)`',
        note: 'ranges of 1,000 growing to 10,000 (the defaults), fetched in the background',
        draw: async () => {
          // A caller's loop: synchronous while a range is held, awaiting only when it is not.
          let last: bigint | undefined;
          for (let i = 0; i < 65_536; i++)
            last = local.nextIdSync(TAG) ?? (await local.nextId(TAG));
          _sink = last;
          return 65_536;
        },
      },
      {
        name: 'per-request client: `await segment(tag)`',
        note: 'one ID per HTTP request, one in flight',
        draw: async () => {
          _sink = await perRequest.segment(TAG);
          return 1;
        },
      },
      {
        name: 'per-request client: `await segmentBatch(tag, 1000)`',
        note: '1,000 IDs per request, one in flight',
        draw: async () => (await perRequest.segmentBatch(TAG, 1000)).length,
      },
    ];
    const rates = new Map<string, number>();
    for (const scenario of scenarios) {
      await drawFor(scenario.draw, scenario.parallel); // warm-up round, same length
      rates.set(scenario.name, await drawFor(scenario.draw, scenario.parallel));
    }
    const single = rates.get(scenarios[1]?.name ?? '') ?? 1;
    return scenarios.map((scenario) => {
      const rate = rates.get(scenario.name) ?? 0;
      return [scenario.name, formatRate(rate), (rate / single).toFixed(1), scenario.note];
    });
  } finally {
    target.child.removeAllListeners('exit');
    target.child.kill('SIGTERM');
  }
}

const load = loadavg()
  .map((value) => value.toFixed(2))
  .join(' ');
const warmResult = await warm();
const serverRows = await throughServer();
const met = warmResult.rate >= TARGET;
const markdown =
  `${machineLine()} Load average before the run: ${load}. The machine was shared with other work \
during the run: compare the ratios.

Warm buffer, in the caller: ${ROUNDS} round(s) of ${formatRate(BURST)} IDs each (median shown), \
every range already held.

${markdownTable(['Path', 'IDs/s', 'vs bare counter', 'Note'], warmResult.rows)}

Through a server (\`idmint serve\` defaults, SQLite, in a process of its own), ${SECONDS} s each \
after a warm-up of the same length:

${markdownTable(['Client', 'IDs/s', 'vs one request per ID', 'Note'], serverRows)}

- \`nextIdSync\` on a warm buffer at least ${formatRate(TARGET)} IDs/s: ` +
  `${met ? 'met' : 'NOT met'} (${formatRate(warmResult.rate)})`;
/** What docs/benchmarks.md keeps: the warm-buffer table, the server run in a line, the target. */
const serverLine = serverRows
  .map(([client, rate, ratio]) => `${client}: ${rate} IDs/s (${ratio}x)`)
  .join('; ');
const page = `${machineLine()} Load average before the run: ${load}. Median of ${ROUNDS} round(s) \
of \
${formatRate(BURST)} IDs, every range already held.

${markdownTable(['Path', 'IDs/s', 'vs bare counter', 'Note'], warmResult.rows)}

- through a server (\`idmint serve\` defaults, SQLite, its own process; ${SECONDS} s each; against \
one request per \
ID): ${serverLine}
- \`nextIdSync\` on a warm buffer at least ${formatRate(TARGET)} IDs/s: \
${met ? 'met' : '**not met**'} \
(${formatRate(warmResult.rate)})`;
process.stdout.write(`${markdown}\n`);
if (WRITE) writeSection('client', page);
