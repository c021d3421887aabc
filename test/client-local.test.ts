// IdMintClient's local mode against real servers in this process (two servers on one SQLite file):
// the warm synchronous path, prefetch, range sizes that follow the rate, failover, an answer that
// comes after the timeout never used, every server down (held IDs first, then RANGES_EXHAUSTED)
// and recovery. The multi-process version, with `idmint serve` processes killed while clients draw,
// is test/client-local-processes.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { IdMintClient } from '../src/client/client.ts';
import { isIdMintError } from '../src/core/errors.ts';
import { openSegmentStores } from '../src/backends/open-segment-store.ts';
import { modulesLoadedBy } from './support/modules-loaded.ts';
import { seededRandom, testSeed } from './support/random.ts';
import { testServer } from './support/server.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-client-local-'));
after(() => rmSync(root, { recursive: true, force: true }));
let files = 0;

/** `n` servers on one SQLite file, with tag `orders` (step 50). */
async function servers(n: number) {
  const store = `sqlite:${join(root, `store-${++files}.db`)}`;
  const list = [];
  for (let i = 0; i < n; i++) {
    const server = await testServer({ port: 0, segment: { store }, snowflake: { enabled: false } });
    list.push({ server, url: await server.listen() });
  }
  const created = await fetch(`${list[0]?.url}/v1/tags`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tag: 'orders', step: 50 }),
  });
  assert.equal(created.status, 201);
  return list;
}

/** Draws `count` IDs the way a caller does, asserting each is new and above the one before. */
async function drawChecked(
  client: IdMintClient,
  count: number,
  seen: Set<bigint>,
  last: { id: bigint },
): Promise<void> {
  for (let i = 0; i < count; i++) {
    const id = client.nextIdSync('orders') ?? (await client.nextId('orders'));
    assert.ok(!seen.has(id), `ID ${id} issued twice`);
    assert.ok(id > last.id, `ID ${id} not above ${last.id}`);
    seen.add(id);
    last.id = id;
  }
}

/** A proxy that holds each answer of `target` for `delayMs` and records the ranges it carried. */
async function slowProxy(
  target: string,
  delayMs: number,
): Promise<{ url: string; ranges: { start: bigint; end: bigint }[]; server: Server }> {
  const ranges: { start: bigint; end: bigint }[] = [];
  const server = createServer((req, res) => {
    const upstream = httpRequest(
      `${target}${req.url ?? '/'}`,
      { method: req.method, headers: req.headers },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          if (answer.statusCode === 200 && body.includes('"start"')) {
            const range = JSON.parse(body) as { start: string; end: string };
            ranges.push({ start: BigInt(range.start), end: BigInt(range.end) });
          }
          setTimeout(() => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.end(body);
          }, delayMs).unref();
        });
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('clientError', (_error, socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    url: `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`,
    ranges,
    server,
  };
}

describe('IdMintClient local mode', () => {
  it('serves IDs synchronously from a held range, prefetches, grows it', async () => {
    const [one] = await servers(1);
    assert.ok(one);
    try {
      const client = new IdMintClient({
        url: one.url,
        local: { initialSize: 100, minSize: 10, maxSize: 1000, rangeDurationMs: 60_000 },
      });
      assert.equal(client.nextIdSync('orders'), undefined, 'nothing held before the first range');
      const seen = new Set<bigint>();
      const last = { id: 0n };
      await drawChecked(client, 1, seen, last);
      // The first range holds at most 50 (the rest of the server's stored range); the rest of it is
      // synchronous.
      let sync = 0;
      while (client.nextIdSync('orders') !== undefined && sync < 10_000) sync++;
      assert.ok(sync >= 1, 'IDs of a held range come without a Promise');
      await drawChecked(client, 3000, seen, last);
      const stats = client.localStats().tags[0];
      assert.ok(
        stats !== undefined && stats.size > 100,
        `ranges fetched fast grow (size ${stats?.size})`,
      );
      assert.ok(stats.size <= 1000, 'up to maxSize');
    } finally {
      await one.server.close();
    }
  });

  it('fails over, drops answers after the timeout, never repeats', async () => {
    const [a, b] = await servers(2);
    assert.ok(a && b);
    const slow = await slowProxy(a.url, 600);
    try {
      const client = new IdMintClient({
        urls: [slow.url, b.url],
        timeoutMs: 200,
        local: { initialSize: 20, minSize: 20, maxSize: 20, backoffMs: 60_000, firstServer: 0 },
      });
      const seen = new Set<bigint>();
      const last = { id: 0n };
      // The slow server is asked first: it reserves a range, the client gives up on it and moves
      // on.
      await drawChecked(client, 500, seen, last);
      await new Promise((resolve) => setTimeout(resolve, 700)); // the slow answers arrive, unread
      await drawChecked(client, 100, seen, last);
      assert.ok(slow.ranges.length >= 1, 'the slow server reserved a range the client gave up on');
      for (const range of slow.ranges) {
        for (const id of seen)
          assert.ok(
            id < range.start || id >= range.end,
            `ID ${id} came from a range answered after the timeout`,
          );
      }
      const states = client.localStats().servers;
      assert.equal(states[0]?.down, true, 'the slow server is marked down');
      assert.equal(states[1]?.down, false);
    } finally {
      await new Promise<void>((resolve) => slow.server.close(() => resolve()));
      slow.server.closeAllConnections();
      await a.server.close();
      await b.server.close();
    }
  });

  it('every server down: held IDs, then RANGES_EXHAUSTED, then recovery', async () => {
    const store = `sqlite:${join(root, `store-${++files}.db`)}`;
    let server = await testServer({ port: 0, segment: { store }, snowflake: { enabled: false } });
    const url = await server.listen();
    const port = new URL(url).port;
    await fetch(`${url}/v1/tags`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tag: 'orders', step: 1000 }),
    });
    try {
      const client = new IdMintClient({
        url,
        timeoutMs: 500,
        local: {
          initialSize: 100,
          minSize: 100,
          maxSize: 100,
          prefetchThreshold: 0.5,
          backoffMs: 50,
          maxBackoffMs: 100,
        },
      });
      const seen = new Set<bigint>();
      const last = { id: 0n };
      await drawChecked(client, 60, seen, last); // past the threshold: the second range is fetched
      await new Promise((resolve) => setTimeout(resolve, 100));
      const held = client.localStats().tags[0]?.buffered ?? 0;
      assert.equal(held, 140, 'the rest of the current range and the whole next one are held');
      await server.close();
      // Every held ID still comes, synchronously or not, with no server.
      await drawChecked(client, held, seen, last);
      await assert.rejects(
        client.nextId('orders'),
        (error) =>
          isIdMintError(error, 'RANGES_EXHAUSTED') &&
          error.retryable &&
          /no idmint server answered/.test(error.message),
      );
      assert.equal(client.nextIdSync('orders'), undefined);
      // The server returns on the same port (same store): the client recovers by itself.
      server = await testServer({
        port: Number(port),
        segment: { store },
        snowflake: { enabled: false },
      });
      await server.listen();
      let recovered: bigint | undefined;
      for (let attempt = 0; attempt < 50 && recovered === undefined; attempt++) {
        recovered = await client.nextId('orders').catch((error: unknown) => {
          assert.ok(isIdMintError(error, 'RANGES_EXHAUSTED'), String(error));
          return new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 50));
        });
      }
      assert.ok(
        recovered !== undefined && !seen.has(recovered) && recovered > last.id,
        `recovered with a new ID (${recovered})`,
      );
    } finally {
      await server.close();
    }
  });

  it('over two SQLite databases: only IDs of ranges received, none twice', async () => {
    // The issue's case: a range of the other database, trimmed to its part above the client's
    // highest ID, can hold none; the client once switched to it and returned its end, an ID the
    // server then handed to another caller. Built exactly first, then a seeded random mix.
    const stores = [1, 2].map((n) => `sqlite:${join(root, `set-${++files}-${n}.db`)}`);
    const admin = await openSegmentStores(stores, { verify: false });
    await admin.join();
    await admin.createTag({ tag: 'orders', step: 1000 });
    await admin.close();
    const segment = { store: undefined, stores, maxStep: 1000 };
    const server = await testServer({ port: 0, segment, snowflake: { enabled: false } });
    const url = await server.listen();
    const seed = testSeed();
    const random = seededRandom(seed);
    const runs: { start: bigint; end: bigint }[] = [];
    const received = new Set<bigint>();
    // Every range answer the client reads, recorded as it passes.
    const recording: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (response.ok && String(input).includes('/range?')) {
        const body = (await response.clone().json()) as {
          start: string;
          end: string;
          stride: number;
        };
        runs.push({ start: BigInt(body.start), end: BigInt(body.end) });
        for (let id = BigInt(body.start); id < BigInt(body.end); id += BigInt(body.stride))
          received.add(id);
      }
      return response;
    };
    const others: bigint[] = [];
    const other = async (count: number) => {
      if (count === 0) return;
      const answer = (await (await fetch(`${url}/v1/segment/orders?count=${count}`)).json()) as {
        ids: string[];
      };
      for (const id of answer.ids) others.push(BigInt(id));
    };
    try {
      // Ranges of 37 fetched only when the last is used up, so the requests come in this order.
      const local = { initialSize: 37, minSize: 37, maxSize: 37, prefetchThreshold: 1 };
      const client = new IdMintClient({ url, fetch: recording, local });
      const mine: bigint[] = [];
      // Each ID checked when returned: one of a range already received (a later range may hold it
      // too).
      const outside: bigint[] = [];
      const draw = async () => {
        const id = client.nextIdSync('orders') ?? (await client.nextId('orders'));
        if (!received.has(id)) outside.push(id);
        mine.push(id);
      };
      await draw();
      // The server's first range (1000 IDs of one class, from a) gave the client [a, a + 74): its
      // highest is then a + 74. Other callers take the rest of that range, then k IDs of the other
      // database's range (from b), so that the client's next run ends at a + 75: all below the
      // client's highest, bar the end.
      const a = runs[0]?.start as bigint;
      const b = a % 2n === 0n ? a - 1n : a + 1n;
      await other(963);
      await other(Number((a + 1n - b) / 2n));
      for (let i = 0; i < 40; i++) await draw();
      while (mine.length < 4000) {
        for (let i = Math.floor(random() * 60); i > 0; i--) await draw();
        await other(1 + Math.floor(random() * 40));
      }
      const replay = `seed ${seed}; IDMINT_TEST_SEED replays`;
      const outsideAll = `${outside.length} of ${mine.length} IDs outside every range received`;
      assert.deepEqual(outside.slice(0, 5), [], `${outsideAll} (${replay})`);
      const everything = [...mine, ...others];
      const twice = `an ID issued twice among ${everything.length} (${replay})`;
      assert.equal(new Set(everything).size, everything.length, twice);
      for (let i = 1; i < mine.length; i++) {
        const [before, id] = [mine[i - 1] as bigint, mine[i] as bigint];
        assert.ok(id > before, `ordering increasing: ${id} after ${before}`);
      }
      const dropped = client.localStats().tags[0]?.droppedIds ?? 0;
      assert.ok(dropped >= 37, "the other database's runs below the client's IDs were dropped");
    } finally {
      await server.close();
    }
  });

  it("passes on a server's own error without marking it down", async () => {
    const [one] = await servers(1);
    assert.ok(one);
    try {
      const client = new IdMintClient({ url: one.url });
      await assert.rejects(client.nextId('ghost'), (error) =>
        isIdMintError(error, 'TAG_NOT_FOUND'),
      );
      assert.equal(client.localStats().servers[0]?.down, false);
      await assert.rejects(
        client.nextId(''),
        (error) => isIdMintError(error, 'INVALID_ARGUMENT') && /tag must be/.test(error.message),
      );
      assert.throws(
        () => new IdMintClient({ url: one.url, local: { minSize: 0 } }),
        (error) => isIdMintError(error, 'INVALID_ARGUMENT') && /local\.minSize/.test(error.message),
      );
      assert.throws(
        () => new IdMintClient({ urls: [] }),
        (error) => isIdMintError(error, 'INVALID_ARGUMENT'),
      );
    } finally {
      await one.server.close();
    }
  });

  it('loads no Node-only module from the client entry (it runs wherever fetch does)', () => {
    const { urls } = modulesLoadedBy("await import('./src/client/client.ts');");
    const builtins = urls.filter((url) => url.startsWith('node:'));
    assert.deepEqual(builtins, []);
    assert.ok(
      urls.some((url) => url.endsWith('/src/client/local-ranges.ts')),
      'the import log saw the client modules',
    );
  });
});
