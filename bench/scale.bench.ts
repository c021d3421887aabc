// Cost curves by tag count (issue 13): what a node pays for the tags that exist against the tags
// in use. Each size runs in a child process of its own, so RSS is that size's alone.
//   npm run bench:scale                         1,000 and 100,000 tags in SQLite
//   npm run bench:scale -- --tags 1000,1000000  other sizes
//   npm run bench:scale -- --write              (--write: update docs/benchmarks.md)
// Not yet measured here (see docs/operations.md, Sizing): PostgreSQL, registries, batch sizes
// and connections, p99.9 of ID requests during a scrape.
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
import { openSegmentStore } from '../src/stores/open-segment-store.ts';
import { machineLine, markdownTable, writeSection } from './support/report.ts';

/** Tags drawn from in each run: the tags in use. */
const IN_USE = 100;

interface Figures {
  tags: number;
  insertMs: number;
  startupMs: number;
  rssMb: number;
  refreshMs: number;
  refreshRows: number;
  metricsKb: number;
  series: number;
  scrapeMs: number;
  blockMs: number;
  statusMs: number;
}

/** Runs one size: bulk insert, start a server, draw from IN_USE tags, scrape, read the status. */
async function child(tags: number): Promise<Figures> {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-bench-scale-'));
  const file = join(dir, 'tags.db');
  const silent = new Writable({ write: (_chunk, _encoding, done) => done() });
  const config = defineConfig({ segment: { store: `sqlite:${file}` }, snowflake: { stateDir: dir }, log: { level: 'warn' } });
  try {
    await (await buildServer(config, { logStream: silent })).close(); // creates the table
    const db = new DatabaseSync(file);
    let t = performance.now();
    // One transaction: 1,000,000 single-row commits would take minutes.
    db.exec('BEGIN');
    const insert = db.prepare('INSERT INTO leaf_alloc (biz_tag, max_id, step, update_time) VALUES (?, 1, 1000, CURRENT_TIMESTAMP)');
    for (let i = 0; i < tags; i++) insert.run(`tag-${i}`);
    db.exec('COMMIT');
    db.close();
    const insertMs = performance.now() - t;
    globalThis.gc?.();
    const rss0 = process.memoryUsage().rss;
    t = performance.now();
    const server = await buildServer(config, { logStream: silent });
    const startupMs = performance.now() - t;
    globalThis.gc?.();
    const rssMb = (process.memoryUsage().rss - rss0) / 1e6;
    for (let i = 0; i < IN_USE; i++) await server.app.inject(`/v1/segment/tag-${i}`);
    // The longest gap of a 1 ms ticker during the scrape: how long the event loop was blocked.
    let last = performance.now();
    let blockMs = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      blockMs = Math.max(blockMs, now - last);
      last = now;
    }, 1);
    await server.app.inject('/metrics'); // the first scrape compiles the code: measure the second
    await new Promise((resolve) => setTimeout(resolve, 20));
    blockMs = 0;
    last = performance.now();
    t = performance.now();
    const metrics = await server.app.inject('/metrics');
    const scrapeMs = performance.now() - t;
    await new Promise((resolve) => setTimeout(resolve, 5));
    clearInterval(ticker);
    t = performance.now();
    await server.app.inject('/v1/status?limit=50');
    const statusMs = performance.now() - t;
    await server.close();
    // The periodic refresh reads the whole list today: time one read of it.
    const store = await openSegmentStore(`sqlite:${file}`);
    t = performance.now();
    const refreshRows = (await store.listTags()).length;
    const refreshMs = performance.now() - t;
    await store.close();
    return {
      tags, insertMs, startupMs, rssMb, refreshMs, refreshRows,
      metricsKb: metrics.body.length / 1024,
      series: metrics.body.split('\n').filter((line) => line !== '' && !line.startsWith('#')).length,
      scrapeMs, blockMs, statusMs,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const childAt = process.argv.indexOf('--child');
if (childAt >= 0) {
  process.stdout.write(`${JSON.stringify(await child(Number(process.argv[childAt + 1])))}\n`);
} else {
  const tagsAt = process.argv.indexOf('--tags');
  const sizes = (tagsAt >= 0 ? (process.argv[tagsAt + 1] ?? '') : '1000,100000').split(',').map(Number);
  const rows: Figures[] = [];
  for (const tags of sizes) {
    const run = spawnSync(process.execPath, ['--expose-gc', '--disable-warning=ExperimentalWarning', fileURLToPath(import.meta.url), '--child', String(tags)], { encoding: 'utf8', maxBuffer: 1 << 20 });
    if (run.status !== 0) throw new Error(`${tags} tags: ${run.stderr}`);
    rows.push(JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '') as Figures);
  }
  const f = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const table = markdownTable(
    ['tags in store', 'bulk insert ms', 'start-up ms', 'RSS after start-up MB', 'bytes/tag', 'refresh: rows read', 'refresh ms', '/metrics KB', 'series', 'scrape ms', 'loop blocked ms', '/v1/status ms'],
    rows.map((r) => [f(r.tags), f(r.insertMs), f(r.startupMs), f(r.rssMb, 1), f((r.rssMb * 1e6) / r.tags), f(r.refreshRows), f(r.refreshMs), f(r.metricsKb, 1), f(r.series), f(r.scrapeMs, 1), f(r.blockMs, 1), f(r.statusMs, 1)]),
  );
  const markdown = `${machineLine()} The machine was shared with other jobs: absolute times drift; read the ratios between rows.\n\nSQLite, ${IN_USE} tags in use (drawn from), the rest idle; metrics.maxTagSeries at its default (500); the second scrape is timed (the first compiles the code); "loop blocked" is the longest gap of a 1 ms timer during it.\n\n${table}`;
  process.stdout.write(`${markdown}\n`);
  if (process.argv.includes('--write')) writeSection('scale', markdown);
}
