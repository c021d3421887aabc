// Cost curves by tag count (issue 13): what a node pays for the tags that exist against the tags
// in use. Each size runs in a child process of its own, so RSS is that size's alone.
//   npm run bench:scale                                   1,000 and 100,000 tags in SQLite and PostgreSQL
//   npm run bench:scale -- --tags 1000,1000000 --stores sqlite   other sizes and stores
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
import { openSegmentStore } from '../src/stores/open-segment-store.ts';
import { dropSqlTable } from '../test/support/registry-admin.ts';
import { machineLine, markdownTable, writeSection } from './support/report.ts';
import { idleFor, timerGaps } from './support/timer-gaps.ts';

/** Tags drawn from in each run: the tags in use. */
const IN_USE = 100;
/** Single-ID requests timed for each p99.9 (20 samples above it: 3,000 gave a p99.9 of 3). */
const REQUESTS = 20_000;
const POSTGRES_URL = process.env['IDMINT_BENCH_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

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
  p999AloneMs: number;
  p999BusyMs: number;
}

/** The longest gap of a 1 ms ticker while `run` runs: how long the event loop was blocked. */
async function longestBlock<T>(run: () => Promise<T>): Promise<{ value: T; blockMs: number; ms: number }> {
  const { value, ms, maxGapMs } = await timerGaps(run);
  return { value, blockMs: maxGapMs, ms };
}

/** p99.9 of REQUESTS single-ID requests, one after another, over the in-use tags. */
async function p999(inject: (url: string) => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t = performance.now();
    await inject(`/v1/segment/tag-${i % IN_USE}`);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.min(times.length - 1, Math.floor(times.length * 0.999))] as number;
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
    const insert = db.prepare(`INSERT INTO ${table} (biz_tag, max_id, step, update_time) VALUES (?, 1, 1000, datetime('now', '-1 hour'))`);
    for (let i = 0; i < tags; i++) insert.run(`tag-${i}`);
    db.exec('COMMIT');
    db.close();
    return;
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`INSERT INTO ${table} (biz_tag, max_id, step, update_time) SELECT 'tag-' || g, 1, 1000, (now() AT TIME ZONE 'UTC') - interval '1 hour' FROM generate_series(0, ${tags - 1}) g`);
  await client.query(`ANALYZE ${table}`);
  await client.end();
}

/** Runs one size on one store: fill, start a server, draw from IN_USE tags, refresh, scrape, read the status. */
async function child(kind: StoreKind, tags: number): Promise<Figures> {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-bench-scale-'));
  const table = kind === 'sqlite' ? 'leaf_alloc' : `bench_scale_${process.pid}`;
  const url = kind === 'sqlite' ? `sqlite:${join(dir, 'tags.db')}` : POSTGRES_URL;
  const silent = new Writable({ write: (_chunk, _encoding, done) => done() });
  const config = defineConfig({ segment: { store: url, table }, snowflake: { stateDir: dir }, log: { level: 'warn' } });
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
    const fullReader = new SegmentService({ store, clock: new SystemClock(), tagRefreshMs: 0, tagFullRefreshMs: 0 });
    await fullReader.start();
    const full = await longestBlock(() => fullReader.refreshTags());

    // p99.9 of single-ID requests alone, and while scrapes and full reads run back to back; a
    // first pass warms the code up.
    await p999(inject);
    // Each phase starts from a collected heap, so neither pays for the other's garbage (at
    // 1,000,000 tags this process holds three copies of the tag list: server, reader, refresher).
    globalThis.gc?.();
    const p999AloneMs = await p999(inject);
    globalThis.gc?.();
    let busy = true;
    const background = (async () => {
      while (busy) await Promise.all([inject('/metrics'), fullReader.refreshTags()]);
      await fullReader.close();
    })();
    const p999BusyMs = await p999(inject);
    busy = false;
    await background;
    await service.close();
    await store.close();
    await server.close();
    return {
      store: kind, tags, insertMs, startupMs, rssMb,
      fullRows: rowsAfterFull, firstMs: first.ms, firstBlockMs: first.blockMs, idleBlockMs: idle.blockMs, fullMs: full.ms, fullBlockMs: full.blockMs, changeRows, changeMs,
      metricsKb: metrics.body.length / 1024,
      series: metrics.body.split('\n').filter((line) => line !== '' && !line.startsWith('#')).length,
      scrapeMs: scrape.ms, blockMs: scrape.blockMs, statusMs, p999AloneMs, p999BusyMs,
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
      const run = spawnSync(process.execPath, ['--expose-gc', '--max-old-space-size=8192', '--disable-warning=ExperimentalWarning', fileURLToPath(import.meta.url), '--child', `${kind}:${tags}`], { encoding: 'utf8', maxBuffer: 1 << 20 });
      if (run.status !== 0) throw new Error(`${kind}, ${tags} tags: ${run.stderr}`);
      rows.push(JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '') as Figures);
      process.stderr.write(`${kind} ${tags}: done\n`);
    }
  }
  const f = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const costs = markdownTable(
    ['store', 'tags in store', 'fill ms', 'start-up ms', 'RSS after start-up MB', 'bytes/tag', '/metrics KB', 'series', 'scrape ms', 'scrape: loop blocked ms', 'idle: loop blocked ms', '/v1/status?limit=50 ms'],
    rows.map((r) => [r.store, f(r.tags), f(r.insertMs), f(r.startupMs), f(r.rssMb, 1), f((r.rssMb * 1e6) / r.tags), f(r.metricsKb, 1), f(r.series), f(r.scrapeMs, 1), f(r.blockMs, 1), f(r.idleBlockMs, 1), f(r.statusMs, 1)]),
  );
  const refresh = markdownTable(
    ['store', 'tags in store', 'full read: rows', 'first full read ms', 'loop blocked ms', 'periodic full read ms', 'loop blocked ms', 'incremental read: rows', 'incremental read ms', 'rows read per node per minute (defaults)', 'p99.9 single ID ms', 'p99.9 during scrapes + full reads ms'],
    rows.map((r) => [r.store, f(r.tags), f(r.fullRows), f(r.firstMs), f(r.firstBlockMs, 1), f(r.fullMs), f(r.fullBlockMs, 1), f(r.changeRows), f(r.changeMs, 1), f(r.changeRows + r.fullRows / 60), f(r.p999AloneMs, 2), f(r.p999BusyMs, 2)]),
  );
  const markdown = `${machineLine()} Absolute times drift on this shared virtual machine: read the ratios between rows, and the blocks against the idle floor.

${IN_USE} tags in use (drawn from), the rest idle (last written an hour before); metrics.maxTagSeries at its default (500); the second scrape is timed (the first compiles the code); "loop blocked" is the longest gap of a 1 ms timer during it; "idle: loop blocked" is the same timer's longest gap over a second in which the process does nothing, the floor of that measure on this machine.

${costs}

The tag refresh as a node runs it: the full read, page by page, at start-up (the first, which also sorts every name for the status route's index, before the node is ready) and every segment.tagFullRefreshMs (1 h; periodic), and the incremental read (every segment.tagRefreshMs, 60 s), which here finds the ${IN_USE} tags the draws wrote. "Rows read per node per minute" is one incremental read plus a sixtieth of a full read. The p99.9 columns time ${f(REQUESTS)} single-ID requests one after another (in process, \`inject\`), alone and while /metrics scrapes and full tag reads run back to back, each after a garbage collection; this process holds the tag list three times (server, refresher, reader), a node once.

${refresh}`;
  process.stdout.write(`${markdown}\n`);
  if (process.argv.includes('--write')) writeSection('scale', markdown);
}
