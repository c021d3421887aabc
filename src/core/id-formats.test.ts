import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../clocks/manual-clock.ts';
import { isIdMintError } from './errors.ts';
import { decodeAny, detectFormat } from './id-formats.ts';
import { composeId, getLayout } from './layout.ts';
import { ObjectIdGenerator } from './objectid.ts';
import { OPAQUE_SNOWFLAKE_DOMAIN, OpaqueCodec } from './opaque.ts';
import { UlidGenerator } from './ulid.ts';
import { UuidV4Generator, UuidV7Generator } from './uuid.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);

describe('detectFormat and decodeAny', () => {
  const clock = new ManualClock(T0 + 123);
  const uuid7 = new UuidV7Generator({ clock }).nextString();
  const uuid4 = new UuidV4Generator().nextString();
  const ulid = new UlidGenerator({ clock }).nextString();
  const objectId = new ObjectIdGenerator({ clock }).nextString();
  const snowflake = composeId(getLayout('idmint'), {
    timestamp: T0,
    workerId: 7,
    sequence: 9,
  }).toString();

  it('tells every format apart by its shape', () => {
    assert.equal(detectFormat(uuid7), 'uuid');
    assert.equal(detectFormat(uuid4.toUpperCase()), 'uuid');
    assert.equal(detectFormat(ulid), 'ulid');
    assert.equal(detectFormat(ulid.toLowerCase()), 'ulid');
    assert.equal(detectFormat(objectId), 'objectid');
    assert.equal(detectFormat(snowflake), 'decimal');
    assert.equal(detectFormat('0'), 'decimal');
    // All-digit strings of the other lengths: 24 digits is hex (ObjectId), 26 is base32 (ULID);
    // decimal IDs never have more than 19 digits, and opaque snowflake IDs have 25.
    assert.equal(detectFormat('1'.repeat(24)), 'objectid');
    assert.equal(detectFormat('1'.repeat(26)), 'ulid');
    const opaque = new OpaqueCodec({
      keys: [{ id: 1, key: new Uint8Array(16) }],
      domain: OPAQUE_SNOWFLAKE_DOMAIN,
    }).encode(5n, 'x');
    assert.equal(detectFormat(opaque), undefined, 'an opaque snowflake ID has a length of its own');
    for (const none of [
      '',
      '01',
      '1'.repeat(20),
      'hello',
      uuid7.slice(1),
      `${objectId}0`,
      42,
      null,
    ])
      assert.equal(detectFormat(none), undefined, String(none));
  });

  it('decodes each to its time and parts', () => {
    assert.deepEqual(
      (({ format, timestamp, version }) => ({ format, timestamp, version }))(
        decodeAny(uuid7) as { format: string; timestamp: number; version: number },
      ),
      { format: 'uuid', timestamp: T0 + 123, version: 7 },
    );
    const v4 = decodeAny(uuid4);
    assert.ok(v4.format === 'uuid' && v4.version === 4 && v4.timestamp === undefined);
    const u = decodeAny(ulid);
    assert.ok(u.format === 'ulid' && u.timestamp === T0 + 123);
    const o = decodeAny(objectId);
    assert.ok(o.format === 'objectid' && o.timestamp === T0);
    const s = decodeAny(snowflake);
    assert.ok(
      s.format === 'snowflake' &&
        s.timestamp === T0 &&
        s.workerId === 7 &&
        s.sequence === 9 &&
        s.layout === 'idmint',
    );
    // Plain JSON: what a decode route sends as it is.
    for (const id of [uuid7, uuid4, ulid, objectId, snowflake])
      assert.equal(
        typeof JSON.parse(JSON.stringify(decodeAny(id))).timestamp === 'number' || id === uuid4,
        true,
      );
    const leaf = decodeAny(snowflake, { layout: 'leaf' });
    assert.ok(leaf.format === 'snowflake' && leaf.layout === 'leaf');
  });

  it('an explicit format must match; unknown shapes are INVALID_ID naming the forms', () => {
    assert.throws(
      () => decodeAny(objectId, { format: 'uuid' }),
      (e: unknown) => isIdMintError(e, 'INVALID_ID') && /is not a UUID/.test(e.message),
    );
    assert.throws(
      () => decodeAny('not-an-id'),
      (e: unknown) =>
        isIdMintError(e, 'INVALID_ID') &&
        /"not-an-id" is not an ID idmint can decode: expected a UUID, an ObjectId, a/.test(
          e.message,
        ),
    );
    assert.throws(
      () => decodeAny('1', { format: 'base64' as never }),
      (e: unknown) =>
        isIdMintError(e, 'INVALID_ARGUMENT') && /format must be one of/.test(e.message),
    );
    assert.throws(
      () => decodeAny('9'.repeat(19)),
      (e: unknown) => isIdMintError(e, 'INVALID_ID') && /above/.test(e.message),
    );
  });
});
