// A server for bench/http.bench.ts and bench/latency.bench.ts, in a process of its own so the
// load generator does not share its event loop. `bare`: Fastify answering a constant (the ceiling
// on this machine), and `/bare/batch?count=N` answering N x 8 prebuilt bytes (the ceiling for a
// binary batch). `idmint`: the real server with its defaults (SQLite store, static worker,
// metrics on, auth off), a tag `bench`, an opaque tag `bench-opaque` and a tag `bench-batch` with
// a large step for batches (api.maxBatch 1,000,000). Prints one JSON line `{ "url": ... }` once it
// listens; stops on SIGTERM.
//
// BENCH_PROCESSES=N (N > 1) starts `idmint serve --processes N` from the CLI instead of an
// in-process server, with the same store, keys and tags, and the embedded worker registry so
// every process gets a worker ID of its own.
//
// BENCH_TWIN=1 (in-process idmint only): the bare Fastify app also listens in idmint's process,
// on a port of its own (`"twin"` in the JSON line): a reference that shares idmint's event loop,
// heap and CPU placement, so a ratio to it holds what idmint's routes do per request and not how
// the scheduler placed two processes.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { LISTEN_BACKLOG, ROUTING_OPTIONS, buildServer } from '../../src/server/app.ts';
import { defineConfig } from '../../src/config/load.ts';

const kind = process.argv[2];
let stop: () => Promise<void>;

/** idmint processes: 1 runs the server in this process; more start the CLI's `--processes`. */
const PROCESSES = Number(process.env['BENCH_PROCESSES'] ?? 1);
/**
 * Batches up to 1,000,000 IDs per request (the default api.maxBatch is 10,000; 1,000,000 is its
 * bound).
 */
const MAX_BATCH = 1_000_000;
/** A throwaway key for the opaque tag (never a real one in a benchmark). */
const OPAQUE_KEY = '000102030405060708090a0b0c0d0e0f';
const TAGS = [
  { tag: 'bench', step: 1000 },
  { tag: 'bench-opaque', step: 1000, opaque: true },
  // Batches of 100,000 should cost a store round trip per many requests, not several per request.
  { tag: 'bench-batch', step: 10_000_000 },
];

/**
 * A port free now, for a server that cannot be told to pick one itself (several processes share
 * it).
 */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() =>
        typeof address === 'object' && address !== null
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}

/** Resolves once `/readyz` answers 200 (within 30 s). */
async function ready(url: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = await fetch(`${url}/readyz`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`idmint at ${url} not ready after 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** The bare Fastify app: the ceiling on this machine. Resolves once it listens. */
async function startBare(): Promise<{ url: string; close: () => Promise<void> }> {
  // Routed exactly as idmint's server is (no HEAD routes, the same router options), so the ratio
  // measures what idmint's routes do per request, not a difference in Fastify's configuration.
  const app = Fastify({ logger: false, ...ROUTING_OPTIONS });
  // The same shape as the Leaf routes (a path parameter, text/plain), answering a constant.
  app.get('/bare/get/:tag', (_request, reply) => {
    reply.type('text/plain; charset=utf-8').send('117600667735949312');
  });
  // The transfer ceiling for binary batches: the same number of bytes, built once and sent again.
  const bodies = new Map<number, Buffer>();
  app.get<{ Querystring: { count: string } }>('/bare/batch', (request, reply) => {
    const count = Number(request.query.count);
    const body = bodies.get(count) ?? Buffer.alloc(count * 8, 1);
    bodies.set(count, body);
    reply.type('application/octet-stream').send(body);
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0, backlog: LISTEN_BACKLOG });
  return { url, close: () => app.close() };
}

if (kind === 'bare') {
  const bare = await startBare();
  process.stdout.write(`${JSON.stringify({ url: bare.url })}\n`);
  stop = bare.close;
} else if (kind === 'idmint' && PROCESSES > 1) {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-bench-http-'));
  const port = await freePort();
  const cli = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
  const child = spawn(
    process.execPath,
    [...process.execArgv, cli, 'serve', '--processes', String(PROCESSES)],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        ...process.env,
        IDMINT_HOST: '127.0.0.1',
        IDMINT_PORT: String(port),
        IDMINT_SEGMENT_STORE: `sqlite:${join(dir, 'idmint.db')}`,
        IDMINT_WORKER_STATE_DIR: dir,
        IDMINT_LOG_LEVEL: 'warn',
        IDMINT_MAX_BATCH: String(MAX_BATCH),
        IDMINT_OPAQUE_KEYS: OPAQUE_KEY,
      },
    },
  );
  child.once('exit', (code) => {
    process.stderr.write(`idmint serve --processes ${PROCESSES} exited with ${code}\n`);
    process.exit(1);
  });
  const url = `http://127.0.0.1:${port}`;
  await ready(url);
  for (const tag of TAGS) {
    const created = await fetch(`${url}/v1/tags`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(tag),
    });
    if (created.status !== 201)
      throw new Error(`creating the bench tag failed: ${await created.text()}`);
  }
  process.stdout.write(`${JSON.stringify({ url })}\n`);
  stop = async () => {
    child.removeAllListeners('exit');
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
} else if (kind === 'idmint') {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-bench-http-'));
  const server = await buildServer(
    defineConfig({
      port: 0,
      segment: { store: `sqlite:${join(dir, 'idmint.db')}` },
      snowflake: { registry: 'static:1', stateDir: dir, lockDir: dir },
      log: { level: 'warn' },
      api: { maxBatch: MAX_BATCH },
      opaque: { keys: OPAQUE_KEY },
    }),
  );
  for (const tag of TAGS) {
    const created = await server.app.inject({ method: 'POST', url: '/v1/tags', payload: tag });
    if (created.statusCode !== 201)
      throw new Error(`creating the bench tag failed: ${created.body}`);
  }
  const url = await server.listen();
  const twin = process.env['BENCH_TWIN'] === '1' ? await startBare() : undefined;
  process.stdout.write(
    `${JSON.stringify({ url, ...(twin === undefined ? {} : { twin: twin.url }) })}\n`,
  );
  stop = async () => {
    await twin?.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  };
} else {
  throw new Error(`usage: [BENCH_PROCESSES=N] http-target.ts bare|idmint, got ${kind}`);
}

process.once('SIGTERM', () => {
  void stop().then(() => process.exit(0));
});
