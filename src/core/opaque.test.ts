import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isIdMintError, type ErrorCode } from './errors.ts';
import {
  OPAQUE_SEGMENT_DOMAIN,
  OPAQUE_SNOWFLAKE_DOMAIN,
  OpaqueCodec,
  parseOpaqueKeys,
  type OpaqueKey,
} from './opaque.ts';

function throwsCode(fn: () => unknown, code: ErrorCode, pattern?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(isIdMintError(error, code), `expected ${code}, got ${String(error)}`);
    if (pattern) assert.match(error.message, pattern);
    return true;
  });
}

/** A fixed key per ID, so every statistic below is deterministic, not a matter of luck per run. */
function key(id: number, length = 16, salt = 0): OpaqueKey {
  return { id, key: Uint8Array.from({ length }, (_, i) => (i * 37 + id * 101 + salt * 7) & 0xff) };
}

const MILLION = 1_000_000;
const BIGINT_MAX = 2n ** 63n - 1n;

/** Chi-square statistic of `counts` against a uniform distribution. */
function chiSquare(counts: readonly number[]): number {
  const total = counts.reduce((a, b) => a + b, 0);
  const expected = total / counts.length;
  return counts.reduce((sum, c) => sum + (c - expected) ** 2 / expected, 0);
}

/** Fraction of neighbours where the next value is greater. */
function increasingFraction(values: readonly string[]): number {
  let up = 0;
  for (let i = 1; i < values.length; i++)
    if (BigInt(values[i] ?? '0') > BigInt(values[i - 1] ?? '0')) up++;
  return up / (values.length - 1);
}

describe('OpaqueCodec: a keyed bijection that hides volume and order', () => {
  const codec = new OpaqueCodec({ keys: [key(1)] });
  const ids = codec.encodeRange(1n, MILLION, 'orders');

  it('1,000,000 dense IDs give distinct 19-digit opaque IDs within a signed BIGINT', () => {
    assert.equal(new Set(ids).size, MILLION);
    for (const id of ids) {
      if (id.length !== 19 || id[0] !== '1' || !/^[0-9]+$/.test(id) || BigInt(id) > BIGINT_MAX)
        assert.fail(`bad opaque ID ${id}`);
    }
  });

  it('they decode back to their dense IDs (every 97th, and the ends)', () => {
    for (let i = 0; i < MILLION; i += 97)
      assert.equal(codec.decode(ids[i] ?? '', 'orders').dense, BigInt(i + 1));
    assert.deepEqual(codec.decode(BigInt(ids.at(-1) ?? '0'), 'orders'), {
      dense: BigInt(MILLION),
      keyId: 1,
    });
  });

  it('show no order: about half of neighbours increase (dense IDs: all of them)', () => {
    const fraction = increasingFraction(ids);
    // For a random permutation the fraction is 1/2 with sd 0.0005; 0.005 is 10 sd.
    assert.ok(Math.abs(fraction - 0.5) < 0.005, `fraction of increasing neighbours ${fraction}`);
    const dense = Array.from({ length: 1000 }, (_, i) => String(i + 1));
    assert.equal(increasingFraction(dense), 1, 'the statistic does tell order apart');
  });

  it('show no volume: the last and the leading FF1 digit are uniform (chi-square)', () => {
    const last = new Array<number>(10).fill(0);
    const lead = new Array<number>(10).fill(0);
    for (const id of ids) {
      const l = id.charCodeAt(18) - 48;
      const f = id.charCodeAt(1) - 48;
      last[l] = (last[l] ?? 0) + 1;
      lead[f] = (lead[f] ?? 0) + 1;
    }
    // 27.88 is the 0.1% critical value: a uniform source exceeds it once in a thousand keys.
    assert.ok(
      chiSquare(last) < 27.88,
      `last digits ${last.join(',')}: chi-square ${chiSquare(last)}`,
    );
    assert.ok(
      chiSquare(lead) < 27.88,
      `leading digits ${lead.join(',')}: chi-square ${chiSquare(lead)}`,
    );
    // The same check on the dense IDs' leading digit (all 0 when written with 18 digits) fails.
    assert.ok(chiSquare([MILLION, 0, 0, 0, 0, 0, 0, 0, 0, 0]) > 27.88);
  });

  it('encode(), encodeRange() and an encoder window agree', () => {
    const encoder = codec.encoder('orders', { window: 64 });
    for (let i = 0; i < 3000; i += 7) {
      const dense = BigInt(i + 1);
      assert.equal(codec.encode(dense, 'orders'), ids[i]);
      assert.equal(encoder.encode(dense), ids[i]);
    }
    for (let i = 0; i < 500; i++)
      assert.equal(encoder.encode(i + 1), ids[i], 'consecutive, through several windows');
  });
});

describe('OpaqueCodec: wrong key, other tag, tampering', () => {
  const codec = new OpaqueCodec({ keys: [key(1)] });
  const issued = codec.encodeRange(1n, 10_000, 'orders');

  it('a tampered digit is refused: ~999 in 1,000 without a bound, all with issuedUpTo', () => {
    let acceptedUnbounded = 0;
    for (const [i, id] of issued.entries()) {
      const position = 1 + (i % 18);
      const digit = (id.charCodeAt(position) - 48 + 1 + (i % 9)) % 10;
      const tampered = `${id.slice(0, position)}${digit}${id.slice(position + 1)}`;
      assert.notEqual(tampered, id);
      try {
        codec.decode(tampered, 'orders');
        acceptedUnbounded++;
      } catch (error) {
        assert.ok(
          isIdMintError(error, 'INVALID_ID') &&
            /is not an ID of "orders" under key 1/.test(error.message),
          String(error),
        );
      }
      throwsCode(() => codec.decode(tampered, 'orders', { issuedUpTo: 10_000n }), 'INVALID_ID');
    }
    // 10,000 tries at 1/1000 each: about 10 (sd 3.2).
    assert.ok(acceptedUnbounded <= 25, `${acceptedUnbounded} tampered IDs decoded`);
  });

  it("another tag's IDs do not decode as this tag's: the tag is the tweak", () => {
    let accepted = 0;
    for (const id of issued) {
      try {
        codec.decode(id, 'users');
        accepted++;
      } catch (error) {
        assert.ok(isIdMintError(error, 'INVALID_ID'));
      }
      throwsCode(() => codec.decode(id, 'users', { issuedUpTo: 1_000_000n }), 'INVALID_ID');
    }
    assert.ok(accepted <= 25, `${accepted} IDs of "orders" decoded as "users"`);
    assert.notEqual(codec.encode(1n, 'users'), codec.encode(1n, 'orders'));
  });

  it('refuses a wrong key under the same key ID, names a key ID not configured', () => {
    const wrong = new OpaqueCodec({ keys: [key(1, 16, 99)] });
    let accepted = 0;
    for (const id of issued) {
      try {
        wrong.decode(id, 'orders');
        accepted++;
      } catch (error) {
        assert.ok(isIdMintError(error, 'INVALID_ID'));
      }
    }
    assert.ok(accepted <= 25, `${accepted} IDs decoded under the wrong key`);
    const other = new OpaqueCodec({ keys: [key(2)] });
    throwsCode(
      () => other.decode(issued[0] ?? '', 'orders'),
      'INVALID_ID',
      /made under key 1, which is not configured \(configured: 2\)/,
    );
  });

  it('malformed opaque IDs are INVALID_ID naming the expected shape', () => {
    for (const bad of [
      '',
      '123',
      `0${'1'.repeat(18)}`,
      `9${'1'.repeat(18)}`,
      `1${'1'.repeat(17)}`,
      `1${'1'.repeat(19)}`,
      `1${'1'.repeat(17)}x`,
      -1n,
    ]) {
      throwsCode(
        () => codec.decode(bad as string, 'orders'),
        'INVALID_ID',
        /not an opaque segment ID: expected 19 decimal digits|not configured/,
      );
    }
  });
});

describe('OpaqueCodec: keys and rotation', () => {
  it('key rotation: new IDs under the new digit; old ones decode until dropped', () => {
    const before = new OpaqueCodec({ keys: [key(1)] });
    const old = before.encodeRange(1n, 100, 'orders');
    const rotated = new OpaqueCodec({ keys: [key(1), key(2, 32)] });
    assert.equal(rotated.activeKeyId, 2);
    const fresh = rotated.encode(101n, 'orders');
    assert.equal(fresh[0], '2');
    assert.deepEqual(rotated.decode(fresh, 'orders'), { dense: 101n, keyId: 2 });
    old.forEach((id, i) => {
      assert.deepEqual(rotated.decode(id, 'orders'), { dense: BigInt(i + 1), keyId: 1 });
    });
    assert.equal(rotated.encode(5n, 'orders', 1), old[4], 'the old key still encodes the same');
    const dropped = new OpaqueCodec({ keys: [key(2, 32)] });
    throwsCode(
      () => dropped.decode(old[0] ?? '', 'orders'),
      'INVALID_ID',
      /made under key 1, which is not configured/,
    );
  });

  it('AES-128, -192 and -256 keys all work; bad key sets are INVALID_ARGUMENT', () => {
    for (const length of [16, 24, 32]) {
      const codec = new OpaqueCodec({ keys: [key(3, length)] });
      assert.equal(codec.decode(codec.encode(42n, 't'), 't').dense, 42n);
    }
    throwsCode(() => new OpaqueCodec({ keys: [] }), 'INVALID_ARGUMENT', /at least one key/);
    throwsCode(() => new OpaqueCodec({ keys: [key(9)] }), 'INVALID_ARGUMENT', /from 1 to 8/);
    throwsCode(
      () => new OpaqueCodec({ keys: [key(1), key(1)] }),
      'INVALID_ARGUMENT',
      /given twice/,
    );
    throwsCode(
      () => new OpaqueCodec({ keys: [key(1, 20)] }),
      'INVALID_ARGUMENT',
      /opaque key 1: FF1 key must be 16, 24 or 32 bytes/,
    );
    throwsCode(
      () => new OpaqueCodec({ keys: [key(1)], activeKeyId: 2 }),
      'INVALID_ARGUMENT',
      /active opaque key ID 2/,
    );
    throwsCode(
      () => new OpaqueCodec({ keys: [key(1)] }).encode(1n, 'orders', 3),
      'INVALID_ARGUMENT',
      /key ID 3 is not configured/,
    );
  });

  it('parseOpaqueKeys reads "<id>:<hex>" lists and never echoes a key in an error', () => {
    const hex32 = '00112233445566778899aabbccddeeff';
    assert.deepEqual(parseOpaqueKeys(hex32), [
      { id: 1, key: Uint8Array.from(Buffer.from(hex32, 'hex')) },
    ]);
    const keys = parseOpaqueKeys(`1:${hex32}, 2:${hex32}${hex32}`);
    assert.deepEqual(
      keys.map((k) => [k.id, k.key.length]),
      [
        [1, 16],
        [2, 32],
      ],
    );
    const secret = 'deadbeefcafebabe0011223344556677889'; // 35 hex digits: malformed
    for (const bad of [
      secret,
      `1:${secret}`,
      `1:${hex32},${hex32}`,
      `x:${hex32}`,
      '',
      `1:${hex32.replace('a', 'g')}`,
    ]) {
      assert.throws(
        () => parseOpaqueKeys(bad),
        (error: unknown) =>
          isIdMintError(error, 'INVALID_ARGUMENT') &&
          !error.message.includes('deadbeef') &&
          !error.message.includes('00112233'),
        bad,
      );
    }
  });
});

describe('OpaqueCodec: domains', () => {
  it('segment domain: up to 10^15 - 1, then OPAQUE_DOMAIN_EXHAUSTED, never a wrap', () => {
    const codec = new OpaqueCodec({ keys: [key(8)] });
    const last = 10n ** 15n - 1n;
    assert.equal(codec.decode(codec.encode(last, 'orders'), 'orders').dense, last);
    throwsCode(
      () => codec.encode(last + 1n, 'orders'),
      'OPAQUE_DOMAIN_EXHAUSTED',
      /no opaque segment form: the domain ends at 999999999999999$/,
    );
    throwsCode(() => codec.encodeRange(last - 1n, 3, 'orders'), 'OPAQUE_DOMAIN_EXHAUSTED');
    assert.equal(codec.encodeRange(last - 1n, 2, 'orders').length, 2);
    throwsCode(() => codec.encode(-1n, 'orders'), 'INVALID_ARGUMENT', /never negative/);
    const encoder = codec.encoder('orders');
    assert.equal(
      encoder.encode(last),
      codec.encode(last, 'orders'),
      'the window stops at the limit',
    );
    throwsCode(() => encoder.encode(last + 1n), 'OPAQUE_DOMAIN_EXHAUSTED');
    encoder.encode(1);
    throwsCode(() => encoder.encode(1.5), 'INVALID_ARGUMENT', /bigint or a safe integer/);
    throwsCode(() => encoder.encode(-1), 'INVALID_ARGUMENT');
    // With key 8 the largest possible opaque ID is 8 followed by 18 nines: below 2^63 - 1.
    assert.ok(
      BigInt(`8${'9'.repeat(18)}`) < BIGINT_MAX && BigInt(`9${'0'.repeat(18)}`) < BIGINT_MAX,
    );
    assert.equal(OPAQUE_SEGMENT_DOMAIN.maxKeyId, 8);
  });

  it('snowflake domain: every ID below 2^63 has a 25-digit opaque form, which decodes back', () => {
    const codec = new OpaqueCodec({ keys: [key(9)], domain: OPAQUE_SNOWFLAKE_DOMAIN });
    const ids = [0n, 1n, 2n ** 62n + 12_345n, BIGINT_MAX];
    for (const dense of ids) {
      const opaque = codec.encode(dense, 'snowflake');
      assert.match(opaque, /^9[0-9]{24}$/);
      assert.equal(codec.decode(opaque, 'snowflake').dense, dense);
    }
    throwsCode(() => codec.encode(2n ** 63n, 'snowflake'), 'OPAQUE_DOMAIN_EXHAUSTED');
    const range = codec.encodeRange(2n ** 62n, 1000, 'snowflake');
    assert.equal(new Set(range).size, 1000);
    range.forEach((opaque, i) => {
      assert.equal(codec.decode(opaque, 'snowflake').dense, 2n ** 62n + BigInt(i));
    });
  });
});
