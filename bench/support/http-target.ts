// A server for bench/http.bench.ts, in a process of its own so the load generator does not share
// its event loop. `bare`: Fastify answering a constant (the ceiling on this machine). `idmint`:
// the real server with its defaults (SQLite store, static worker, metrics on, auth off), a tag
// `bench` and an opaque tag `bench-opaque`. Prints one JSON line `{ "url": ... }` once it listens; stops on SIGTERM.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { ROUTING_OPTIONS, buildServer } from '../../src/server/app.ts';
import { defineConfig } from '../../src/config/load.ts';

const kind = process.argv[2];
let stop: () => Promise<void>;

if (kind === 'bare') {
  // Routed exactly as idmint's server is (no HEAD routes, the same router options), so the ratio
  // measures what idmint's routes do per request, not a difference in Fastify's configuration.
  const app = Fastify({ logger: false, ...ROUTING_OPTIONS });
  // The same shape as the Leaf routes (a path parameter, text/plain), answering a constant.
  app.get('/bare/get/:tag', (_request, reply) => {
    reply.type('text/plain; charset=utf-8').send('117600667735949312');
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  process.stdout.write(`${JSON.stringify({ url })}\n`);
  stop = () => app.close();
} else if (kind === 'idmint') {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-bench-http-'));
  const server = await buildServer(
    defineConfig({
      port: 0,
      segment: { store: `sqlite:${join(dir, 'idmint.db')}` },
      snowflake: { registry: 'static:1', stateDir: dir },
      log: { level: 'warn' },
      // A throwaway key for the opaque tag below (never a real one in a benchmark).
      opaque: { keys: '000102030405060708090a0b0c0d0e0f' },
    }),
  );
  for (const tag of [{ tag: 'bench', step: 1000 }, { tag: 'bench-opaque', step: 1000, opaque: true }]) {
    const created = await server.app.inject({ method: 'POST', url: '/v1/tags', payload: tag });
    if (created.statusCode !== 201) throw new Error(`creating the bench tag failed: ${created.body}`);
  }
  const url = await server.listen();
  process.stdout.write(`${JSON.stringify({ url })}\n`);
  stop = async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  };
} else {
  throw new Error(`usage: http-target.ts bare|idmint, got ${kind}`);
}

process.once('SIGTERM', () => {
  void stop().then(() => process.exit(0));
});
