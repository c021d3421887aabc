// Cluster-ordered tags through the HTTP routes: two servers on one real SQLite file, the issuer
// lease in the in-memory double shared by both (until every store keeps it: see
// segment-ordered-processes.test.ts for real stores). The node that does not hold the lease
// forwards every route's requests to the one that does and answers in its own route's format.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { IdMintClient } from '../src/client/client.ts';
import { isIdMintError } from '../src/core/errors.ts';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { MemoryIssuerLeases } from './support/memory-issuer-leases.ts';
import { orderedStore } from './support/ordered-store.ts';
import { testServer, type TestServer } from './support/server.ts';

const directory = mkdtempSync(join(tmpdir(), 'idmint-server-ordered-'));
const path = join(directory, 'tags.db');
const leases = new MemoryIssuerLeases(() => performance.now());
let issuer: TestServer;
let other: TestServer;
let issuerUrl: string;
let otherUrl: string;

async function node(host = '127.0.0.1'): Promise<{ server: TestServer; url: string }> {
  const server = await testServer(
    {
      host,
      port: 0,
      segment: { store: `sqlite:${path}`, waitTimeoutMs: 1000 },
      snowflake: { enabled: false },
    },
    { wrapSegmentStore: (store) => orderedStore(store, ['orders', 'wild'], leases) },
  );
  return { server, url: await server.listen() };
}

before(async () => {
  const setup = new SqliteSegmentStore({ path });
  await setup.init();
  await setup.createTag({ tag: 'orders', step: 1000, startId: 1n });
  await setup.createTag({ tag: 'wild', step: 1000, startId: 1n });
  await setup.close();
  ({ server: issuer, url: issuerUrl } = await node());
  ({ server: other, url: otherUrl } = await node());
});

after(async () => {
  await other?.close();
  await issuer?.close();
  rmSync(directory, { recursive: true, force: true });
});

async function get(base: string, path: string, headers: Record<string, string> = {}) {
  const response = await fetch(new URL(path, base), { headers });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

describe('cluster-ordered tag over HTTP', () => {
  it('every route on the other node is answered by the issuer, in order', async () => {
    // The first request claims the lease on the issuer.
    const first = await get(issuerUrl, '/api/segment/get/orders');
    assert.equal(first.text, '1');
    let last = 1n;
    const after = (ids: bigint[], what: string) => {
      assert.ok(ids.length > 0, what);
      for (const id of ids) {
        assert.ok(id > last, `${what}: ${id} after ${last}`);
        last = id;
      }
    };
    after([BigInt((await get(otherUrl, '/api/segment/get/orders')).text)], 'Leaf');
    const json = JSON.parse((await get(otherUrl, '/v1/segment/orders?count=5')).text) as {
      ids: string[];
    };
    after(json.ids.map(BigInt), 'v1 batch');
    const octets = await fetch(new URL('/v1/segment/orders?count=3', otherUrl), {
      headers: { accept: 'application/octet-stream' },
    });
    const bytes = Buffer.from(await octets.arrayBuffer());
    after(
      [0, 1, 2].map((i) => bytes.readBigUInt64BE(i * 8)),
      'v1 binary batch',
    );
    const range = await get(otherUrl, '/v1/segment/orders/range?size=4');
    assert.equal(range.headers.get('x-idmint-ordering'), 'cluster');
    const run = JSON.parse(range.text) as { start: string; last: string; size: number };
    assert.equal(run.size, 4);
    after([BigInt(run.start), BigInt(run.last)], 'range');
    const tinyId = JSON.parse(
      (await get(otherUrl, '/tinyid/id/nextId?bizType=orders&batchSize=2&token=x')).text,
    ) as { data: number[] };
    after(tinyId.data.map(BigInt), 'TinyId nextId');
    const simple = await get(otherUrl, '/tinyid/id/nextIdSimple?bizType=orders&batchSize=2');
    after(simple.text.split(',').map(BigInt), 'TinyId nextIdSimple');
    after([BigInt((await get(issuerUrl, '/api/segment/get/orders')).text)], 'the issuer itself');
  });

  it('merges concurrent forwarded requests, each answer whole and unique', async () => {
    const answers = await Promise.all(
      Array.from({ length: 200 }, () => get(otherUrl, '/v1/segment/orders?count=3')),
    );
    const ids = answers.flatMap((a) => (JSON.parse(a.text) as { ids: string[] }).ids);
    assert.equal(new Set(ids).size, 600);
  });

  it('answers a forwarded request it does not issue 503, never forwarding it', async () => {
    const answer = await get(otherUrl, '/api/segment/get/orders', { 'x-idmint-forwarded': '1' });
    assert.equal(answer.status, 503);
    assert.match(answer.text, /ISSUER_UNAVAILABLE/);
  });

  it("refuses the client's local mode, which would issue a held range later", async () => {
    for (const url of [issuerUrl, otherUrl]) {
      const client = new IdMintClient({ url, local: { initialSize: 10, minSize: 10 } });
      await assert.rejects(client.nextId('orders'), (error) =>
        isIdMintError(error, 'ORDERED_RANGE_REFUSED'),
      );
      assert.equal(client.nextIdSync('orders'), undefined);
    }
  });

  it('a node on a wildcard address issues no ordered tag; its log says why', async () => {
    const { server, url } = await node('0.0.0.0');
    try {
      const port = new URL(url).port;
      const answer = await get(`http://127.0.0.1:${port}`, '/api/segment/get/wild');
      assert.equal(answer.status, 503);
      assert.match(answer.text, /ISSUER_UNAVAILABLE/);
      assert.ok(
        server.logs.some((line) => /set segment\.advertiseUrl/.test(JSON.stringify(line))),
        `the log names the fix: ${JSON.stringify(server.logs.filter((l) => l.level === 50))}`,
      );
      // Nobody took the lease: another node can.
      assert.equal((await get(otherUrl, '/api/segment/get/wild')).status, 200);
    } finally {
      await server.close();
    }
  });

  it("refuses TinyId's segments of a cluster-ordered tag", async () => {
    const answer = await get(issuerUrl, '/tinyid/id/nextSegmentId?bizType=orders&token=x');
    assert.match(answer.text, /ORDERED_RANGE_REFUSED/);
  });

  it('shows who issues the tag in /status', async () => {
    const mine = JSON.parse((await get(issuerUrl, '/v1/status')).text) as Record<string, unknown>;
    const theirs = JSON.parse((await get(otherUrl, '/v1/status')).text) as Record<string, unknown>;
    const ordered = (status: Record<string, unknown>) =>
      (status.segment as { ordered?: { tag: string; issuer: string }[] }).ordered?.filter(
        (entry) => entry.tag === 'orders',
      );
    assert.deepEqual(
      ordered(mine)?.map((s) => [s.tag, s.issuer]),
      [['orders', 'self']],
    );
    assert.deepEqual(
      ordered(theirs)?.map((s) => [s.tag, s.issuer]),
      [['orders', issuerUrl]],
    );
    const metrics = (await get(otherUrl, '/metrics')).text;
    assert.match(metrics, /idmint_segment_issuer_self\{tag="orders"\} 0/);
    assert.match(metrics, /idmint_segment_issuer_forwarded\{tag="orders"\} [1-9]/);
    assert.match(
      (await get(issuerUrl, '/metrics')).text,
      /idmint_segment_issuer_self\{tag="orders"\} 1/,
    );
  });

  // Last: it closes the issuer.
  it('a graceful close hands the tag over before draining its connections', async () => {
    const before = BigInt((await get(issuerUrl, '/api/segment/get/orders')).text);
    // That request's connection stays open, idle: the drain waits for it (its grace period).
    let drained = false;
    const closing = issuer.close().then(() => {
      drained = true;
    });
    const taken = await get(otherUrl, '/api/segment/get/orders');
    assert.equal(taken.status, 200);
    assert.ok(BigInt(taken.text) > before);
    const status = JSON.parse((await get(otherUrl, '/v1/status')).text) as {
      segment: { ordered: { tag: string; issuer: string }[] };
    };
    assert.deepEqual(
      status.segment.ordered.filter((entry) => entry.tag === 'orders').map((e) => e.issuer),
      ['self'],
      'the other node issues the tag while the old issuer is still draining',
    );
    assert.equal(drained, false, 'the old issuer was still draining');
    await closing;
  });
});
