// Cost curves by tag count (issue 13): what a node pays for the tags that exist against the tags
// in use. Each size runs in a child process of its own, so RSS is that size's alone.
//   npm run bench:scale                                   1,000 and 100,000 tags in SQLite and
//   PostgreSQL npm run bench:scale -- --tags 1000,1000000 --stores sqlite   other sizes and stores
//   npm run bench:scale -- --write                        (--write: update docs/benchmarks.md)
// Registries, batch sizes and connections have benches of their own (docs/benchmarks.md).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Writable } from 'node:stream';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { buildServer } from '../src/server/app.ts';
import { defineConfig } from '../src/config/load.ts';
import { SystemClock } from '../src/clocks/system-clock.ts';
import { SegmentService } from '../src/service/segment-service.ts';
import { openSegmentStore } from '../src/backends/open-segment-store.ts';
import { dropSqlTable } from '../test/support/registry-admin.ts';
import { metricSample } from '../test/support/metrics-text.ts';
import { startServe } from '../test/support/serve-process.ts';
import { machineLine, markdownTable, writeSection } from './support/report.ts';
import { idleFor, timerGaps } from './support/timer-gaps.ts';
import { startTarget, stopTargets } from './support/closed-loop.ts';
import { openLoop } from './support/open-loop.ts';

/** Tags drawn from in each run: the tags in use. */
const IN_USE = 100;
/**
 * The fixed rate (req/s) and length (s) of each open-loop p99.9 measurement, after WARMUP s at
 * the same rate: a fresh `idmint serve` had p99.9 of 16 to 23 ms in its first 10 s at 3,000
 * req/s, then 2.5 to 2.9 ms, as the bare route.
 */
const RATE = 3000;
const SECONDS = 10;
const WARMUP = 10;
const POSTGRES_URL =
  process.env['IDMINT_BENCH_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

type StoreKind = 'sqlite' | 'postgres';

interface Figures {
  store: StoreKind;
  tags: number;
  insertMs: number;
  startupMs: number;
  rssMb: number;
  fullRows: number;
  firstMs: number;
  firstBlockMs: number;
  idleBlockMs: number;
  fullMs: number;
  fullBlockMs: number;
  changeRows: number;
  changeMs: number;
  metricsKb: number;
  series: number;
  scrapeMs: number;
  blockMs: number;
  statusMs: number;
  bareP999Ms: number;
  p999AloneMs: number;
  p999ScrapedMs: number;
  scrapes: number;
  p999ReadingMs: number;
  fullReads: number;
}

/** The longest gap of a 1 ms ticker while `run` runs: how long the event loop was blocked. */
async function longestBlock<T>(
  run: () => Promise<T>,
): Promise<{ value: T; blockMs: number; ms: number }> {
  const { value, ms, maxGapMs } = await timerGaps(run);
  return { value, blockMs: maxGapMs, ms };
}

/** p99.9 of an open loop at RATE req/s for SECONDS s, after WARMUP s. */
async function fixedRateP999(url: string): Promise<number> {
  await openLoop({ url, rate: RATE, seconds: WARMUP, connections: 50 });
  return (await openLoop({ url, rate: RATE, seconds: SECONDS, connections: 50 })).p999;
}

/** The counter of tag rows a node's refreshes read. */
const ROWS_READ = 'idmint_segment_tag_rows_read_total';

/** What a real node does besides answering while its p99.9 is measured. */
type Background = 'nothing' | 'scrapes' | 'full reads';

/**
 * p99.9 of single-ID requests to a real `idmint serve` on the filled store, at a fixed rate, open
 * loop (bench/support/open-loop.ts), while it does nothing else, is scraped every 100 ms, or reads
 * every tag back to back (tagRefreshMs 1, every refresh a full read). Also how many scrapes and
 * full reads (rows read over the `tags` in the store) ran meanwhile.
 */
async function serverP999(
  env: Record<string, string>,
  background: Background,
  tags: number,
): Promise<{ p999: number; fullReads: number; scrapes: number }> {
  const readAll = { IDMINT_SEGMENT_TAG_REFRESH_MS: '1', IDMINT_SEGMENT_TAG_FULL_REFRESH_MS: '0' };
  // A million tags take seconds to read before the node listens.
  const serve = await startServe([], {
    env: background === 'full reads' ? { ...env, ...readAll } : env,
    timeoutMs: 60_000,
  });
  try {
    const scrape = () => fetch(`${serve.url}/metrics`).then((r) => r.text());
    const before = await scrape();
    let scraping = background === 'scrapes';
    let scrapes = 0;
    const scraper = (async () => {
      while (scraping) {
        await scrape();
        scrapes++;
        await idleFor(100);
      }
    })();
    const p999 = await fixedRateP999(`${serve.url}/api/segment/get/tag-0`);
    scraping = false;
    await scraper;
    const rowsRead =
      (metricSample(await scrape(), ROWS_READ) ?? Number.NaN) -
      (metricSample(before, ROWS_READ) ?? Number.NaN);
    return { p999, fullReads: Math.floor(rowsRead / tags), scrapes };
  } finally {
    await serve.stop();
  }
}

/** Creates the table and `tags` rows last written an hour ago (idle tags), by the fastest path. */
async function fill(kind: StoreKind, url: string, table: string, tags: number): Promise<void> {
  const store = await openSegmentStore(url, { table });
  await store.init();
  await store.close();
  if (kind === 'sqlite') {
    const db = new DatabaseSync(url.slice('sqlite:'.length));
    // One transaction: 1,000,000 single-row commits would take minutes.
    db.exec('BEGIN');
    const insert = db.prepare(
      `INSERT INTO ${table} (biz_tag, max_id, step, update_time) VALUES (?, 1, 1000, ` +
        `datetime('now', '-1 hour'))`,
    );
    for (let i = 0; i < tags; i++) insert.run(`tag-${i}`);
    db.exec('COMMIT');
    db.close();
    return;
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(
    `INSERT INTO ${table} (biz_tag, max_id, step, update_time) SELECT 'tag-' || g, 1, 1000, ` +
      `(now() AT TIME ZONE 'UTC') - interval '1 hour' FROM generate_series(0, ${tags - 1}) g`,
  );
  await client.query(`ANALYZE ${table}`);
  await client.end();
}

/**
 * Runs one size on one store: fill, start a server, draw from IN_USE tags, refresh, scrape, read
 * the status.
 */
async function child(kind: StoreKind, tags: number): Promise<Figures> {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-bench-scale-'));
  const table = kind === 'sqlite' ? 'leaf_alloc' : `bench_scale_${process.pid}`;
  const url = kind === 'sqlite' ? `sqlite:${join(dir, 'tags.db')}` : POSTGRES_URL;
  const silent = new Writable({ write: (_chunk, _encoding, done) => done() });
  const config = defineConfig({
    segment: { store: url, table },
    snowflake: { stateDir: dir, lockDir: dir },
    log: { level: 'warn' },
  });
  try {
    let t = performance.now();
    await fill(kind, url, table, tags);
    const insertMs = performance.now() - t;
    globalThis.gc?.();
    const rss0 = process.memoryUsage().rss;
    t = performance.now();
    const server = await buildServer(config, { logStream: silent });
    const startupMs = performance.now() - t;
    globalThis.gc?.();
    const rssMb = (process.memoryUsage().rss - rss0) / 1e6;
    const inject = (path: string) => server.app.inject(path);
    // The floor of "loop blocked": the same ticker while the process does nothing for a second
    // (the virtual machine's own scheduling shows as gaps of several ms).
    const idle = await longestBlock(() => idleFor(1000));
    for (let i = 0; i < IN_USE; i++) await inject(`/v1/segment/tag-${i}`);
    await inject('/metrics'); // the first scrape compiles the code: measure the second
    await new Promise((resolve) => setTimeout(resolve, 20));
    const scrape = await longestBlock(() => inject('/metrics'));
    const metrics = scrape.value as { body: string };
    t = performance.now();
    await inject('/v1/status?limit=50');
    const statusMs = performance.now() - t;

    // The refresh as a node runs it (SegmentService on its own connection): the full read at
    // start-up and every tagFullRefreshMs, and the incremental read every tagRefreshMs, which
    // finds the IN_USE tags the draws above wrote.
    const store = await openSegmentStore(url, { table });
    const service = new SegmentService({ store, clock: new SystemClock(), tagRefreshMs: 0 });
    const first = await longestBlock(() => service.start());
    const rowsAfterFull = service.stats().tagRowsRead;
    t = performance.now();
    await service.refreshTags();
    const changeMs = performance.now() - t;
    const changeRows = service.stats().tagRowsRead - rowsAfterFull;
    // A periodic full read: as the start-up one, without sorting every name for the first time.
    const fullReader = new SegmentService({
      store,
      clock: new SystemClock(),
      tagRefreshMs: 0,
      tagFullRefreshMs: 0,
    });
    await fullReader.start();
    const full = await longestBlock(() => fullReader.refreshTags());

    await fullReader.close();
    await service.close();
    await store.close();
    await server.close();

    // p99.9 at a fixed rate, open loop, of the bare Fastify route and of a real node on the same
    // store: alone, scraped every 100 ms, and reading every tag back to back. This process, the
    // load generator now, drops what it held first.
    globalThis.gc?.();
    const bare = await startTarget('bare');
    const bareP999Ms = await fixedRateP999(`${bare.url}/bare/get/tag-0`).finally(() =>
      stopTargets([bare]),
    );
    const serveEnv = {
      IDMINT_SEGMENT_STORE: url,
      IDMINT_SEGMENT_TABLE: table,
      IDMINT_WORKER_STATE_DIR: dir,
    };
    const alone = await serverP999(serveEnv, 'nothing', tags);
    const scraped = await serverP999(serveEnv, 'scrapes', tags);
    const reading = await serverP999(serveEnv, 'full reads', tags);
    return {
      store: kind,
      tags,
      insertMs,
      startupMs,
      rssMb,
      fullRows: rowsAfterFull,
      firstMs: first.ms,
      firstBlockMs: first.blockMs,
      idleBlockMs: idle.blockMs,
      fullMs: full.ms,
      fullBlockMs: full.blockMs,
      changeRows,
      changeMs,
      metricsKb: metrics.body.length / 1024,
      series: metrics.body.split('\n').filter((line) => line !== '' && !line.startsWith('#'))
        .length,
      scrapeMs: scrape.ms,
      blockMs: scrape.blockMs,
      statusMs,
      bareP999Ms,
      p999AloneMs: alone.p999,
      p999ScrapedMs: scraped.p999,
      scrapes: scraped.scrapes,
      p999ReadingMs: reading.p999,
      fullReads: reading.fullReads,
    };
  } finally {
    if (kind === 'postgres') await dropSqlTable(url, table).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

const childAt = process.argv.indexOf('--child');
if (childAt >= 0) {
  const [kind, tags] = (process.argv[childAt + 1] ?? '').split(':');
  process.stdout.write(`${JSON.stringify(await child(kind as StoreKind, Number(tags)))}\n`);
} else {
  const option = (name: string, fallback: string) => {
    const at = process.argv.indexOf(name);
    return at >= 0 ? (process.argv[at + 1] ?? fallback) : fallback;
  };
  const sizes = option('--tags', '1000,100000').split(',').map(Number);
  const stores = option('--stores', 'sqlite,postgres').split(',') as StoreKind[];
  const rows: Figures[] = [];
  for (const kind of stores) {
    for (const tags of sizes) {
      const run = spawnSync(
        process.execPath,
        [
          '--expose-gc',
          '--max-old-space-size=8192',
          '--disable-warning=ExperimentalWarning',
          fileURLToPath(import.meta.url),
          '--child',
          `${kind}:${tags}`,
        ],
        { encoding: 'utf8', maxBuffer: 1 << 20 },
      );
      if (run.status !== 0) throw new Error(`${kind}, ${tags} tags: ${run.stderr}`);
      rows.push(JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '') as Figures);
      process.stderr.write(`${kind} ${tags}: done\n`);
    }
  }
  const f = (n: number, digits = 0) =>
    n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const costs = markdownTable(
    [
      'store',
      'tags in store',
      'fill ms',
      'start-up ms',
      'RSS after start-up MB',
      'bytes/tag',
      '/metrics KB',
      'series',
      'scrape ms',
      'scrape: loop blocked ms',
      'idle: loop blocked ms',
      '/v1/status?limit=50 ms',
    ],
    rows.map((r) => [
      r.store,
      f(r.tags),
      f(r.insertMs),
      f(r.startupMs),
      f(r.rssMb, 1),
      f((r.rssMb * 1e6) / r.tags),
      f(r.metricsKb, 1),
      f(r.series),
      f(r.scrapeMs, 1),
      f(r.blockMs, 1),
      f(r.idleBlockMs, 1),
      f(r.statusMs, 1),
    ]),
  );
  const refresh = markdownTable(
    [
      'store',
      'tags in store',
      'full read: rows',
      'first full read ms',
      'loop blocked ms',
      'periodic full read ms',
      'loop blocked ms',
      'incremental read: rows',
      'incremental read ms',
      'rows read per node per minute (defaults)',
    ],
    rows.map((r) => [
      r.store,
      f(r.tags),
      f(r.fullRows),
      f(r.firstMs),
      f(r.firstBlockMs, 1),
      f(r.fullMs),
      f(r.fullBlockMs, 1),
      f(r.changeRows),
      f(r.changeMs, 1),
      f(r.changeRows + r.fullRows / 60),
    ]),
  );
  const latency = markdownTable(
    [
      'store',
      'tags in store',
      'bare route',
      'idmint alone',
      'vs bare',
      'idmint scraped',
      'scrapes',
      'vs alone',
      'idmint reading all tags',
      'full reads',
      'vs alone',
    ],
    rows.map((r) => [
      r.store,
      f(r.tags),
      f(r.bareP999Ms, 2),
      f(r.p999AloneMs, 2),
      f(r.p999AloneMs / r.bareP999Ms, 2),
      f(r.p999ScrapedMs, 2),
      f(r.scrapes),
      f(r.p999ScrapedMs / r.p999AloneMs, 2),
      f(r.p999ReadingMs, 2),
      f(r.fullReads),
      f(r.p999ReadingMs / r.p999AloneMs, 2),
    ]),
  );
  const markdown = `${machineLine()} Absolute times drift on this shared virtual machine: read the \
ratios between rows, and the blocks against the idle floor.

${IN_USE} tags in use (drawn from), the rest idle (last written an hour before); \
metrics.maxTagSeries at its default (500); the second scrape is timed (the first compiles the \
code); "loop blocked" is the longest gap of a 1 ms timer during it; "idle: loop blocked" is the \
same timer's longest gap over a second in which the process does nothing, the floor of that \
measure on this machine.

${costs}

The tag refresh as a node runs it: the full read, page by page, at start-up (the first, which also \
sorts every name for the status route's index, before the node is ready) and every \
segment.tagFullRefreshMs (1 h; periodic), and the incremental read (every segment.tagRefreshMs, 60 \
s), which here finds the ${IN_USE} tags the draws wrote. "Rows read per node per minute" is one \
incremental read plus a sixtieth of a full read.

${refresh}

Single-ID requests (\`/api/segment/get/tag-0\`) to a real \`idmint serve\` on the same store, open \
loop at ${f(RATE)} req/s for ${SECONDS} s after ${WARMUP} s of warm-up \
(bench/support/open-loop.ts, latency from each request's intended send time), p99.9 in ms: a node \
doing nothing else, one scraped every 100 ms (150 times Prometheus's usual rate), and one reading \
every tag back to back (\`segment.tagRefreshMs\` 1 ms, every refresh a full read: the hourly read, \
without pause); the bare Fastify route at the same rate beside them. Each in a fresh process. The \
generator shares the 2 cores with the server.

${latency}`;
  // What docs/benchmarks.md keeps: the cost table, and the refresh and the latency as ranges over
  // the rows.
  const range = (values: readonly number[], digits: number) => {
    const [low, high] = [f(Math.min(...values), digits), f(Math.max(...values), digits)];
    return low === high ? low : `${low} to ${high}`;
  };
  const largest = rows.filter((r) => r.tags === Math.max(...rows.map((row) => row.tags)));
  const page = `${machineLine()} ${IN_USE} tags in use, the rest idle; "loop blocked" is the \
longest gap of \
a 1 ms timer during the operation, "idle" the same over a second of doing nothing (this machine's \
floor).

${costs}

- tag refresh: the incremental read found the ${IN_USE} tags written in ${range(
    rows.map((r) => r.changeMs),
    1,
  )} \
ms; a periodic full read took ${range(
    rows.map((r) => r.fullMs),
    0,
  )} ms and blocked the loop at most \
${f(Math.max(...rows.map((r) => r.fullBlockMs)), 1)} ms at a time (the first, which also sorts \
every name, \
${f(Math.max(...rows.map((r) => r.firstBlockMs)), 1)} ms); rows read per node per minute at \
${f(largest[0]?.tags ?? 0)} tags: \
${largest.map((r) => `${f(r.changeRows + r.fullRows / 60)} (${r.store})`).join(', ')}
- p99.9 of a real \`idmint serve\` at ${f(RATE)} req/s (open loop): alone \
${range(
  rows.map((r) => r.p999AloneMs),
  2,
)} ms, ${range(
    rows.map((r) => r.p999AloneMs / r.bareP999Ms),
    2,
  )} times \
the bare Fastify route's; scraped every 100 ms, ${range(
    rows.map((r) => r.p999ScrapedMs / r.p999AloneMs),
    2,
  )} times \
alone; reading every tag back to back, ${range(
    rows.map((r) => r.p999ReadingMs / r.p999AloneMs),
    2,
  )} times alone`;
  process.stdout.write(`${markdown}\n`);
  if (process.argv.includes('--write')) writeSection('scale', page);
}
