// The Forwarder against a real HTTP server standing for the issuer (it answers binary batches of
// a counter, a few ms late, so that requests meet while one is in flight): merging, its order,
// the marks it sends, large requests, and the issuer's errors.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, it } from 'node:test';
import { orderViolations, type TimedAnswer } from '../../test/support/ordering-check.ts';
import { isIdMintError } from '../core/errors.ts';
import { FORWARDED_HEADER, Forwarder, TINYID_TOKEN_HEADER } from './forwarding.ts';

let server: Server;
let address: string;
let next = 1n;
let inFlight = 0;
let mostInFlight = 0;
const batches: {
  count: number;
  forwarded: boolean;
  authorization: string | undefined;
  tinyIdToken: string | string[] | undefined;
}[] = [];
let failWith: string | undefined;

before(async () => {
  server = createServer((request, response) => {
    const count = Number(new URL(request.url ?? '', 'http://x').searchParams.get('count'));
    batches.push({
      count,
      forwarded: request.headers[FORWARDED_HEADER] === '1',
      authorization: request.headers.authorization,
      tinyIdToken: request.headers[TINYID_TOKEN_HEADER],
    });
    inFlight++;
    mostInFlight = Math.max(mostInFlight, inFlight);
    // The IDs are taken when the request arrives, as an issuer takes them from its buffer.
    const first = next;
    next += BigInt(count);
    setTimeout(() => {
      inFlight--;
      if (failWith !== undefined) {
        response.writeHead(503, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { code: failWith, message: 'no' } }));
        return;
      }
      const body = Buffer.alloc(count * 8);
      for (let i = 0; i < count; i++) body.writeBigUInt64BE(first + BigInt(i), i * 8);
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      response.end(body);
    }, 3);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => {
  server.closeAllConnections();
  server.close();
});

it('merges concurrent requests, at most two batches in flight, each answer whole', async () => {
  const forwarder = new Forwarder({ maxBatch: 1000, timeoutMs: 2000 });
  try {
    batches.length = 0;
    mostInFlight = 0;
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => forwarder.ids(address, 'orders', 1 + (i % 3), 'B x')),
    );
    for (const [i, ids] of answers.entries()) {
      assert.equal(ids.length, 1 + (i % 3));
      for (let k = 1; k < ids.length; k++) assert.equal(ids[k], (ids[k - 1] as bigint) + 1n);
    }
    assert.equal(new Set(answers.flat()).size, answers.flat().length);
    assert.ok(batches.length < 20, `${batches.length} upstream batches for 200 requests`);
    assert.ok(mostInFlight <= 2, `${mostInFlight} batches in flight at once`);
    assert.ok(batches.every((b) => b.forwarded && b.authorization === 'B x'));
  } finally {
    forwarder.close();
  }
});

it('answers a request sent after another one arrived with greater IDs', async () => {
  const forwarder = new Forwarder({ maxBatch: 1000, timeoutMs: 2000 });
  try {
    const answers: TimedAnswer[] = [];
    const client = async () => {
      for (let i = 0; i < 40; i++) {
        const sent = performance.now();
        const ids = await forwarder.ids(address, 'orders', 1 + (i % 4), undefined);
        const received = performance.now();
        answers.push({
          sent,
          received,
          min: ids[0] as bigint,
          max: ids.at(-1) as bigint,
          node: 'f',
        });
      }
    };
    await Promise.all(Array.from({ length: 16 }, client));
    assert.deepEqual(orderViolations(answers), []);
  } finally {
    forwarder.close();
  }
});

it('sends a request larger than a batch as batches, one after the other', async () => {
  const forwarder = new Forwarder({ maxBatch: 100, timeoutMs: 2000 });
  try {
    batches.length = 0;
    const ids = await forwarder.ids(address, 'orders', 250, undefined);
    assert.equal(ids.length, 250);
    for (let k = 1; k < ids.length; k++) assert.ok((ids[k] as bigint) > (ids[k - 1] as bigint));
    assert.deepEqual(
      batches.map((b) => b.count),
      [100, 100, 50],
    );
  } finally {
    forwarder.close();
  }
});

it("rejects with the issuer's code, or SERVER_UNAVAILABLE when it does not answer", async () => {
  const forwarder = new Forwarder({ maxBatch: 100, timeoutMs: 2000 });
  try {
    failWith = 'ISSUER_UNAVAILABLE';
    await assert.rejects(forwarder.ids(address, 'orders', 1, undefined), (error) =>
      isIdMintError(error, 'ISSUER_UNAVAILABLE'),
    );
    failWith = undefined;
    await assert.rejects(forwarder.ids('http://127.0.0.1:1', 'orders', 1, undefined), (error) =>
      isIdMintError(error, 'SERVER_UNAVAILABLE'),
    );
  } finally {
    failWith = undefined;
    forwarder.close();
  }
});

it("carries TinyId's token in its own header, never merged with a bearer token's", async () => {
  const forwarder = new Forwarder({ maxBatch: 1000, timeoutMs: 2000 });
  try {
    batches.length = 0;
    const token = 'free text ✓';
    await Promise.all([
      forwarder.ids(address, 'orders', 2, undefined, token),
      forwarder.ids(address, 'orders', 2, undefined, token),
      forwarder.ids(address, 'orders', 2, 'Bearer x'),
      forwarder.ids(address, 'orders', 2, undefined, 'other'),
    ]);
    const sent = (b: (typeof batches)[number]) => [b.authorization, b.tinyIdToken];
    const encoded = Buffer.from(token, 'utf8').toString('base64url');
    // A token's requests share batches; each credential has batches of its own.
    assert.deepEqual(
      new Set(batches.map((b) => JSON.stringify(sent(b)))),
      new Set([
        JSON.stringify([undefined, encoded]),
        JSON.stringify(['Bearer x', undefined]),
        JSON.stringify([undefined, Buffer.from('other').toString('base64url')]),
      ]),
    );
    assert.ok(batches.every((b) => b.forwarded && b.count <= 4));
    assert.equal(
      batches.reduce((sum, b) => sum + b.count, 0),
      8,
    );
  } finally {
    forwarder.close();
  }
});
