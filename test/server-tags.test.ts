import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertError } from './support/http.ts';
import { testServer } from './support/server.ts';

const json = (method: 'POST' | 'PATCH', url: string, payload: unknown) => ({
  method,
  url,
  payload: payload as Record<string, unknown>,
});

describe('tag administration routes (in-process, SQLite)', () => {
  it('delta and remainder: only IDs of the class on every route; bad pairs refused', async () => {
    const server = await testServer();
    try {
      const created = await server.app.inject(
        json('POST', '/v1/tags', { tag: 'odd', step: 4, delta: 2, remainder: 1, startId: 10 }),
      );
      assert.equal(created.statusCode, 201, created.body);
      const body = created.json() as { delta: number; remainder: number };
      assert.deepEqual([body.delta, body.remainder], [2, 1]);
      // Leaf's route, idmint's batch and range routes: odd IDs from 11 on, none twice.
      const leaf = await server.app.inject('/api/segment/get/odd');
      const batch = (await server.app.inject('/v1/segment/odd?count=5')).json() as {
        ids: string[];
      };
      const ids = [leaf.body, ...batch.ids].map(BigInt);
      assert.deepEqual(ids, [11n, 13n, 15n, 17n, 19n, 21n]);
      const range = (await server.app.inject('/v1/segment/odd/range?size=3')).json() as {
        start: string;
        stride: number;
      };
      assert.equal(BigInt(range.start) % 2n, 1n);
      assert.ok(BigInt(range.start) > 21n);
      assert.equal(range.stride, 2);
      // A new sequence takes effect from the next range: 1, 4, 7, ... above what was issued.
      const changed = await server.app.inject(
        json('PATCH', '/v1/tags/odd', { delta: 3, remainder: 1 }),
      );
      assert.equal(changed.statusCode, 200, changed.body);
      // Refused: a remainder of delta or more (TinyId would never find an ID), a delta past 64.
      for (const bad of [{ delta: 2, remainder: 2 }, { delta: 65 }, { remainder: 1 }]) {
        const refused = await server.app.inject(
          json('POST', '/v1/tags', { tag: 'bad', step: 10, ...bad }),
        );
        assertError(refused, 400, 'INVALID_ARGUMENT');
      }
    } finally {
      await server.close();
    }
  });

  it('creates, lists, reads and changes tags; decimal maxId, ISO dates', async () => {
    const server = await testServer();
    try {
      const created = await server.app.inject(
        json('POST', '/v1/tags', { tag: 'order', step: 1000, description: 'Orders' }),
      );
      assert.equal(created.statusCode, 201);
      const order = created.json() as Record<string, unknown>;
      assert.deepEqual(
        { ...order, updatedAt: typeof order['updatedAt'] },
        {
          tag: 'order',
          maxId: '1',
          step: 1000,
          description: 'Orders',
          updatedAt: 'string',
          opaque: false,
          delta: 1,
          remainder: 0,
        },
      );
      assert.ok(!Number.isNaN(Date.parse(String(order['updatedAt']))));

      const huge = await server.app.inject(
        json('POST', '/v1/tags', { tag: 'huge', step: 10, startId: '9223372036854775000' }),
      );
      assert.equal(huge.statusCode, 201);
      assert.equal((huge.json() as { maxId: string }).maxId, '9223372036854775000');
      const numeric = await server.app.inject(
        json('POST', '/v1/tags', { tag: 'numeric', step: 10, startId: 500, description: null }),
      );
      assert.equal((numeric.json() as { maxId: string; description: null }).maxId, '500');

      const list = (await server.app.inject('/v1/tags')).json() as { tags: { tag: string }[] };
      assert.deepEqual(
        list.tags.map((t) => t.tag),
        ['huge', 'numeric', 'order'],
      );

      const patched = await server.app.inject(json('PATCH', '/v1/tags/order', { step: 5000 }));
      assert.equal(patched.statusCode, 200);
      assert.deepEqual(
        [
          (patched.json() as { step: number }).step,
          (patched.json() as { description: string }).description,
        ],
        [5000, 'Orders'],
      );
      const cleared = await server.app.inject(
        json('PATCH', '/v1/tags/order', { description: null }),
      );
      assert.equal((cleared.json() as { description: null }).description, null);
      const read = (await server.app.inject('/v1/tags/order')).json() as {
        step: number;
        description: null;
      };
      assert.equal(read.step, 5000);
      assert.equal(read.description, null);
      // The IDs of a tag near the top of the range come out exact, as strings.
      assert.equal((await server.app.inject('/api/segment/get/huge')).body, '9223372036854775000');
    } finally {
      await server.close();
    }
  });

  it('answers 409 TAG_EXISTS for a duplicate, 404 for an unknown tag', async () => {
    const server = await testServer();
    try {
      await server.app.inject(json('POST', '/v1/tags', { tag: 'dup', step: 1 }));
      assert.match(
        assertError(
          await server.app.inject(json('POST', '/v1/tags', { tag: 'dup', step: 2 })),
          409,
          'TAG_EXISTS',
        ),
        /"dup" already exists/,
      );
      assertError(await server.app.inject('/v1/tags/ghost'), 404, 'TAG_NOT_FOUND');
      assertError(
        await server.app.inject(json('PATCH', '/v1/tags/ghost', { step: 3 })),
        404,
        'TAG_NOT_FOUND',
      );
    } finally {
      await server.close();
    }
  });

  it('checks bodies strictly: types, ranges, unknown fields, size and media type', async () => {
    const server = await testServer({ api: { bodyLimit: 1024 } });
    try {
      const cases: [unknown, RegExp][] = [
        [{ step: 10 }, /missing the field "tag"/],
        [{ tag: 'x' }, /missing the field "step"/],
        [{ tag: 'x', step: '10' }, /body\.step must be integer/],
        [{ tag: 'x', step: 0 }, /body\.step must be >= 1/],
        [{ tag: 'x', step: 2 ** 31 }, /body\.step must be <= 2147483647/],
        [{ tag: 'x', step: 1.5 }, /body\.step must be integer/],
        [{ tag: 'bad tag', step: 1 }, /body\.tag must match pattern/],
        [{ tag: 'x', step: 1, startId: '-1' }, /body\.startId/],
        [{ tag: 'x', step: 1, startId: '01' }, /body\.startId/],
        [{ tag: 'x', step: 1, startId: 1.5 }, /body\.startId/],
        [{ tag: 'x', step: 1, startId: '9223372036854775808' }, /startId|start/],
        [
          { tag: 'x', step: 1, description: 'd'.repeat(257) },
          /body\.description must NOT have more than 256 characters/,
        ],
        [{ tag: 'x', step: 1, owner: 'me' }, /unknown field "owner"/],
        // A choice names what is allowed (it said "must be equal to constant").
        [{ tag: 'x', step: 1, ordering: 'global' }, /^body\.ordering must be "cluster"$/],
        [
          { tag: 'x', step: 1, periodic: { period: 'week', timeZone: 'UTC', template: '{seq:3}' } },
          /^body\.periodic\.period must be one of "day", "month"$/,
        ],
        // PostgreSQL refuses NUL with a driver error (a 503 before), SQLite stored it: one rule, a
        // 400.
        [{ tag: 'x', step: 1, description: 'a\u0000b' }, /^description .*U\+0000/],
        [['x'], /body must be object/],
      ];
      for (const [payload, message] of cases) {
        const response = await server.app.inject({
          method: 'POST',
          url: '/v1/tags',
          payload: JSON.stringify(payload),
          headers: { 'content-type': 'application/json' },
        });
        assert.match(
          assertError(response, 400, 'INVALID_ARGUMENT'),
          message,
          JSON.stringify(payload),
        );
      }
      await server.app.inject(json('POST', '/v1/tags', { tag: 'p', step: 1 }));
      assert.match(
        assertError(
          await server.app.inject(json('PATCH', '/v1/tags/p', {})),
          400,
          'INVALID_ARGUMENT',
        ),
        /must set at least one field/,
      );
      assert.match(
        assertError(
          await server.app.inject(json('PATCH', '/v1/tags/p', { tag: 'q' })),
          400,
          'INVALID_ARGUMENT',
        ),
        /unknown field "tag"/,
      );
      assertError(
        await server.app.inject(json('PATCH', '/v1/tags/bad%00tag', { step: 2 })),
        400,
        'INVALID_ARGUMENT',
      );
      assert.match(
        assertError(
          await server.app.inject(json('PATCH', '/v1/tags/p', { description: '\u0000' })),
          400,
          'INVALID_ARGUMENT',
        ),
        /^description .*U\+0000/,
      );

      const raw = (payload: string, type = 'application/json') =>
        server.app.inject({
          method: 'POST',
          url: '/v1/tags',
          payload,
          headers: { 'content-type': type },
        });
      assert.match(assertError(await raw('{"tag":'), 400, 'INVALID_ARGUMENT'), /not valid JSON/);
      assert.match(assertError(await raw(''), 400, 'INVALID_ARGUMENT'), /empty/);
      assertError(await raw('{"__proto__":{"x":1},"tag":"a","step":1}'), 400, 'INVALID_ARGUMENT');
      assertError(
        await raw('tag=a&step=1', 'application/x-www-form-urlencoded'),
        415,
        'UNSUPPORTED_MEDIA_TYPE',
      );
      // JSON sent as text/plain (curl -d without a content type header) is refused, saying what to
      // send.
      assert.equal(
        assertError(await raw('{"tag":"a","step":1}', 'text/plain'), 415, 'UNSUPPORTED_MEDIA_TYPE'),
        'request body must be JSON sent with Content-Type: application/json (Content-Type ' +
          'was text/plain)',
      );
      assertError(
        await raw(JSON.stringify({ tag: 'big', step: 1, description: 'x'.repeat(2000) })),
        413,
        'PAYLOAD_TOO_LARGE',
      );
      // Nothing above created a tag.
      assert.deepEqual(
        ((await server.app.inject('/v1/tags')).json() as { tags: { tag: string }[] }).tags.map(
          (t) => t.tag,
        ),
        ['p'],
      );
    } finally {
      await server.close();
    }
  });

  it('a new step applies from the next range the server loads', async () => {
    const server = await testServer();
    try {
      await server.app.inject(json('POST', '/v1/tags', { tag: 'grow', step: 10 }));
      assert.equal((await server.app.inject('/api/segment/get/grow')).body, '1');
      await server.app.inject(json('PATCH', '/v1/tags/grow', { step: 100_000 }));
      await server.app.inject('/v1/segment/grow?count=50');
      const metrics = (await server.app.inject('/metrics')).body;
      assert.match(metrics, /^idmint_segment_tag_step\{tag="grow"\} 100000$/m);
      assert.match(metrics, /^idmint_segment_step\{tag="grow"\} (\d{6,})$/m);
    } finally {
      await server.close();
    }
  });
});
