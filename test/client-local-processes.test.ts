// Local mode across OS processes against real `idmint serve` processes: client processes draw
// from two servers on one PostgreSQL database of this test's own while the servers are killed
// (SIGKILL: no give-back) and restarted; every ID is distinct and each client's IDs increase.
// Then a client with every server down serves its held IDs, fails with RANGES_EXHAUSTED, and
// recovers by itself when a server returns.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { IdMintClient } from '../src/client/client.ts';
import { isIdMintError } from '../src/core/errors.ts';
import { openSegmentStore } from '../src/backends/open-segment-store.ts';
import { startServe, type ServeProcess } from './support/serve-process.ts';
import { SERVICES, describeWithServices, uniqueName } from './support/services.ts';

const DRAW = fileURLToPath(new URL('./support/local-draw.ts', import.meta.url));
const CLIENTS = 3;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function pgQuery(url: string, statement: string): Promise<void> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** A PostgreSQL database of this test's own, dropped afterwards. */
async function ownDatabase(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const name = uniqueName('ranges_local')
    .replace(/[^a-z0-9_]/gi, '_')
    .toLowerCase();
  await pgQuery(SERVICES.postgres.url, `CREATE DATABASE ${name}`);
  t.after(() => pgQuery(SERVICES.postgres.url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  const url = new URL(SERVICES.postgres.url);
  url.pathname = `/${name}`;
  return url.href;
}

/** `idmint serve` on the database, on `port` (0: any), segment mode only. */
function serve(store: string, port = 0): Promise<ServeProcess> {
  return startServe(
    [
      '--no-snowflake-enabled',
      '--segment-store',
      store,
      '--port',
      String(port),
      '--segment-timeout-ms',
      '2000',
    ],
    { timeoutMs: 30_000 },
  );
}

function drawInProcess(urls: readonly string[]): {
  ready: Promise<void>;
  stop(): void;
  ids: Promise<bigint[]>;
  stderr(): string;
} {
  const child = spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', DRAW, urls.join(','), 'shared'],
    { stdio: ['pipe', 'pipe', 'pipe'], timeout: 180_000 },
  );
  const out: Buffer[] = [];
  let err = '';
  let ready!: () => void;
  const readiness = new Promise<void>((resolve) => (ready = resolve));
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString();
    if (err.includes('ready\n')) ready();
  });
  const ids = new Promise<bigint[]>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`local-draw exited ${code}: ${err}`));
      else
        resolve(
          Buffer.concat(out)
            .toString()
            .trimEnd()
            .split('\n')
            .filter((line) => line !== '')
            .map((line) => BigInt(line)),
        );
    });
  });
  return {
    ready: Promise.race([readiness, ids.then(() => undefined)]),
    stop: () => child.stdin.end('stop\n'),
    ids,
    stderr: () => err,
  };
}

/**
 * Two `idmint serve` processes on a PostgreSQL database of the test's own, holding tag `shared`
 * of `step`; both are killed when the test ends, whichever processes `servers` then holds.
 */
async function cluster(
  t: { after(fn: () => Promise<void>): void },
  step: number,
): Promise<{ store: string; servers: ServeProcess[] }> {
  const store = await ownDatabase(t);
  const admin = await openSegmentStore(store);
  await admin.init();
  await admin.createTag({ tag: 'shared', step });
  await admin.close();
  const servers = [await serve(store), await serve(store)];
  t.after(async () => {
    for (const server of servers) await server.stop('SIGKILL');
  });
  return { store, servers };
}

const portOf = (server: ServeProcess) => Number(new URL(server.url).port);

await describeWithServices(
  'local mode: client processes, two idmint serve processes on one PostgreSQL database',
  ['postgres'],
  () => {
    it(`${CLIENTS} clients draw through server kills: distinct, each increasing`, {
      timeout: 180_000,
    }, async (t) => {
      const { store, servers } = await cluster(t, 100);
      const urls = servers.map((server) => server.url);
      const clients = Array.from({ length: CLIENTS }, () => drawInProcess(urls));
      await Promise.all(clients.map((client) => client.ready));
      await sleep(1500);
      // Each server in turn: killed (no give-back), then started again on its port while clients
      // draw.
      for (const index of [0, 1]) {
        await servers[index]?.stop('SIGKILL');
        await sleep(1000);
        servers[index] = await serve(store, Number(new URL(urls[index] as string).port));
        await sleep(1000);
      }
      await sleep(500);
      for (const client of clients) client.stop();
      const results = await Promise.all(clients.map((client) => client.ids));
      const all = new Set<bigint>();
      let total = 0;
      for (const [index, ids] of results.entries()) {
        assert.ok(
          ids.length > 1000,
          `client ${index} drew ${ids.length} IDs: ${clients[index]?.stderr()}`,
        );
        for (let i = 1; i < ids.length; i++)
          assert.ok(
            (ids[i] as bigint) > (ids[i - 1] as bigint),
            `client ${index} not increasing at ${i}: ${ids[i - 1]} then ${ids[i]}`,
          );
        for (const id of ids) all.add(id);
        total += ids.length;
      }
      assert.equal(all.size, total, 'an ID was issued to two clients (or twice to one)');
      // The servers really were replaced: the restarted ones answer on the same ports.
      assert.deepEqual(
        servers.map(portOf),
        urls.map((url) => Number(new URL(url).port)),
      );
    });

    it('every server down: held IDs, then RANGES_EXHAUSTED, then recovery', {
      timeout: 120_000,
    }, async (t) => {
      const { store, servers } = await cluster(t, 1000);
      const urls = servers.map((server) => server.url);
      const client = new IdMintClient({
        urls,
        timeoutMs: 1000,
        local: {
          initialSize: 100,
          minSize: 100,
          maxSize: 100,
          prefetchThreshold: 0.5,
          backoffMs: 50,
          maxBackoffMs: 200,
        },
      });
      const seen: bigint[] = [];
      const take = async () => {
        const id = client.nextIdSync('shared') ?? (await client.nextId('shared'));
        assert.ok(
          seen.length === 0 || id > (seen.at(-1) as bigint),
          `not increasing: ${seen.at(-1)} then ${id}`,
        );
        seen.push(id);
      };
      for (let i = 0; i < 60; i++) await take();
      await sleep(300); // the prefetch started past the threshold lands
      const held = client.localStats().tags[0]?.buffered ?? 0;
      assert.equal(held, 140);
      for (const server of servers) await server.stop('SIGKILL');
      for (let i = 0; i < held; i++) await take();
      await assert.rejects(
        client.nextId('shared'),
        (error) => isIdMintError(error, 'RANGES_EXHAUSTED') && error.retryable,
      );
      servers[0] = await serve(store, Number(new URL(urls[0] as string).port));
      let recovered = false;
      for (let attempt = 0; attempt < 100 && !recovered; attempt++) {
        try {
          await take();
          recovered = true;
        } catch (error) {
          assert.ok(isIdMintError(error, 'RANGES_EXHAUSTED'), String(error));
          await sleep(50);
        }
      }
      assert.ok(recovered, 'the client recovered by itself once a server returned');
      assert.equal(new Set(seen).size, seen.length);
    });
  },
);
