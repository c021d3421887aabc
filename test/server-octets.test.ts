import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { wantsOctets, writeRunOctets } from '../src/server/routes/shared.ts';
import { testServer } from './support/server.ts';

// Binary batches (issue 13): `Accept: application/octet-stream` on /v1/segment/{tag} and
// /v1/snowflake answers the IDs as big-endian unsigned 64-bit integers. Over a real socket, since
// the point is the bytes on the wire.

const KEY = '000102030405060708090a0b0c0d0e0f';
const dir = mkdtempSync(join(tmpdir(), 'idmint-octets-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const OCTETS = { accept: 'application/octet-stream' };

/** The body's 8-byte big-endian integers, after checking the type and that the length is exact. */
async function octets(response: Response, count: number): Promise<bigint[]> {
  assert.equal(response.status, 200, await response.clone().text());
  assert.equal(response.headers.get('content-type'), 'application/octet-stream');
  const bytes = Buffer.from(await response.arrayBuffer());
  assert.equal(bytes.length, count * 8);
  return Array.from({ length: count }, (_, i) => bytes.readBigUInt64BE(i * 8));
}

function assertIncreasing(ids: readonly bigint[]): void {
  for (let i = 1; i < ids.length; i++)
    assert.ok(
      ids[i - 1]! < ids[i]!,
      `ID ${i} (${ids[i]}) is not above ID ${i - 1} (${ids[i - 1]})`,
    );
}

describe('binary batches over HTTP (Accept: application/octet-stream)', () => {
  it('segment: exactly count IDs, increasing, no overlap with JSON draws', async () => {
    const server = await testServer();
    try {
      const url = await server.listen();
      assert.equal(
        (
          await server.app.inject({
            method: 'POST',
            url: '/v1/tags',
            payload: { tag: 'order', step: 100, startId: '5000' },
          })
        ).statusCode,
        201,
      );
      const json = (await (await fetch(`${url}/v1/segment/order?count=3`)).json()) as {
        ids: string[];
      };
      const first = await octets(
        await fetch(`${url}/v1/segment/order?count=250`, { headers: OCTETS }),
        250,
      );
      const single = BigInt(await (await fetch(`${url}/api/segment/get/order`)).text());
      const second = await octets(
        await fetch(`${url}/v1/segment/order?count=1`, { headers: OCTETS }),
        1,
      );
      // Dense from the start: the JSON batch took 5000-5002, the binary one the next 250 across
      // three ranges.
      assert.deepEqual(json.ids, ['5000', '5001', '5002']);
      assert.deepEqual(
        first,
        Array.from({ length: 250 }, (_, i) => 5003n + BigInt(i)),
      );
      assert.equal(single, 5253n);
      assert.deepEqual(second, [5254n]);
    } finally {
      await server.close();
    }
  });

  it("snowflake: exactly count IDs, increasing, of this server's worker", async () => {
    const server = await testServer({ snowflake: { registry: 'static:7' } });
    try {
      const url = await server.listen();
      const ids = await octets(
        await fetch(`${url}/v1/snowflake?count=5000`, { headers: OCTETS }),
        5000,
      );
      assertIncreasing(ids);
      for (const id of [ids[0]!, ids[4999]!]) {
        const parts = (await (await fetch(`${url}/v1/snowflake/decode/${id}`)).json()) as {
          workerId: number;
        };
        assert.equal(parts.workerId, 7);
      }
      const later = await octets(
        await fetch(`${url}/v1/snowflake?count=1`, { headers: OCTETS }),
        1,
      );
      assert.ok(later[0]! > ids[4999]!);
    } finally {
      await server.close();
    }
  });

  it('an opaque tag: distinct opaque IDs, each decoding to a dense one', async () => {
    const server = await testServer({ opaque: { keys: KEY } });
    try {
      const url = await server.listen();
      assert.equal(
        (
          await server.app.inject({
            method: 'POST',
            url: '/v1/tags',
            payload: { tag: 'secret', step: 50, opaque: true },
          })
        ).statusCode,
        201,
      );
      const ids = await octets(
        await fetch(`${url}/v1/segment/secret?count=120`, { headers: OCTETS }),
        120,
      );
      assert.equal(new Set(ids).size, 120);
      // The opaque form: 19 digits, a signed BIGINT (10^18 <= id < 2^63).
      for (const id of ids)
        assert.ok(id >= 10n ** 18n && id < 2n ** 63n, `${id} is not an opaque segment ID`);
      const dense = await Promise.all(
        [ids[0]!, ids[119]!].map(
          async (id) =>
            (
              (await (await fetch(`${url}/v1/opaque/segment/secret/${id}`)).json()) as {
                dense: string;
              }
            ).dense,
        ),
      );
      assert.deepEqual(dense, ['1', '120']);
    } finally {
      await server.close();
    }
  });

  it('a tag made opaque on another node: opaque IDs, never dense ones', async () => {
    const store = `sqlite:${join(dir, 'shared.db')}`;
    const reader = await testServer({ segment: { store }, opaque: { keys: KEY } });
    const writer = await testServer({ segment: { store }, opaque: { keys: KEY } });
    try {
      const url = await reader.listen();
      // Created after the reader started: the reader first hears of the tag from this request.
      assert.equal(
        (
          await writer.app.inject({
            method: 'POST',
            url: '/v1/tags',
            payload: { tag: 'late', step: 20, opaque: true },
          })
        ).statusCode,
        201,
      );
      const ids = await octets(
        await fetch(`${url}/v1/segment/late?count=30`, { headers: OCTETS }),
        30,
      );
      assert.equal(new Set(ids).size, 30);
      for (const id of ids) assert.ok(id >= 10n ** 18n && id < 2n ** 63n, `${id} is a dense ID`);
    } finally {
      await writer.close();
      await reader.close();
    }
  });

  it('errors stay JSON, and JSON stays the default for every other Accept', async () => {
    const server = await testServer();
    try {
      const url = await server.listen();
      const bad = await fetch(`${url}/v1/segment/nope?count=0`, { headers: OCTETS });
      assert.equal(bad.status, 400);
      assert.match(bad.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(
        ((await bad.json()) as { error: { code: string } }).error.code,
        'INVALID_ARGUMENT',
      );
      const unknown = await fetch(`${url}/v1/segment/nope?count=2`, { headers: OCTETS });
      assert.equal(unknown.status, 404);
      assert.match(unknown.headers.get('content-type') ?? '', /^application\/json/);
      for (const accept of [
        undefined,
        '*/*',
        'application/json',
        'application/*',
        'application/json, application/octet-stream;q=0.5',
      ]) {
        const response = await fetch(
          `${url}/v1/snowflake?count=2`,
          accept === undefined ? {} : { headers: { accept } },
        );
        assert.match(
          response.headers.get('content-type') ?? '',
          /^application\/json/,
          String(accept),
        );
        assert.equal(((await response.json()) as { ids: string[] }).ids.length, 2);
      }
    } finally {
      await server.close();
    }
  });

  it('writeRunOctets writes a run exactly, with a stride, below and above 2^53', () => {
    for (const start of [7n, 2n ** 32n - 2n, 2n ** 53n - 10n, 2n ** 63n - 100n]) {
      const bytes = Buffer.alloc(6 * 8);
      assert.equal(writeRunOctets(bytes, 1, { start, stride: 3, count: 5 }), 6);
      assert.deepEqual(
        Array.from({ length: 6 }, (_, i) => bytes.readBigUInt64BE(i * 8)),
        [0n, ...Array.from({ length: 5 }, (_, i) => start + BigInt(i * 3))],
      );
    }
  });

  it('writeRunOctets carries into the high word, unaligned buffers too', () => {
    // Runs that cross 2^32 boundaries (several, with a stride that does not divide 2^32), and
    // low words at and above 2^31 (negative as int32).
    const cases = [
      { start: 2n ** 32n - 4n, stride: 1, count: 9 },
      { start: 2n ** 31n - 2n, stride: 1, count: 5 },
      { start: 5n * 2n ** 32n - 1000n, stride: 7, count: 2000 },
      { start: 2n ** 62n - 3n, stride: 2 ** 30, count: 40 },
    ];
    for (const run of cases) {
      const expected = Array.from(
        { length: run.count },
        (_, i) => run.start + BigInt(i) * BigInt(run.stride),
      );
      const aligned = Buffer.alloc((run.count + 2) * 8);
      assert.equal(writeRunOctets(aligned, 2, run), run.count + 2);
      assert.deepEqual(
        Array.from({ length: run.count }, (_, i) => aligned.readBigUInt64BE((i + 2) * 8)),
        expected,
      );
      const unaligned = Buffer.alloc(run.count * 8 + 1).subarray(1);
      assert.equal(writeRunOctets(unaligned, 0, run), run.count);
      assert.deepEqual(
        Array.from({ length: run.count }, (_, i) => unaligned.readBigUInt64BE(i * 8)),
        expected,
      );
    }
  });

  it('wantsOctets ranks Accept ranges as RFC 9110 does', () => {
    assert.equal(wantsOctets(undefined), false);
    assert.equal(wantsOctets('*/*'), false);
    assert.equal(wantsOctets('application/octet-stream'), true);
    assert.equal(wantsOctets('application/json;q=0.9, application/octet-stream'), true);
    assert.equal(wantsOctets('application/octet-stream;q=0.5, application/json'), false);
    assert.equal(wantsOctets('*/*, application/octet-stream'), true);
    assert.equal(wantsOctets('application/octet-stream;q=0'), false);
  });
});
