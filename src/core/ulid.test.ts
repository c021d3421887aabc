import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decodeTime,
  encodeTime,
  incrementBase32,
  isValid as ulidIsValid,
  monotonicFactory,
} from 'ulid';
import { ManualClock } from '../clocks/manual-clock.ts';
import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import { isIdMintError, type ErrorCode } from './errors.ts';
import {
  CROCKFORD_BASE32,
  UlidGenerator,
  decodeUlid,
  isUlid,
  ulidFromBytes,
  ulidToBytes,
} from './ulid.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);

function throwsCode(fn: () => unknown, code: ErrorCode, pattern?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(isIdMintError(error, code), `expected ${code}, got ${String(error)}`);
    if (pattern) assert.match(error.message, pattern);
    return true;
  });
}

/** A random source whose first 10 bytes (the first ULID's random part) are `first`, zeros after. */
function firstRandom(first: readonly number[]): (bytes: Uint8Array) => void {
  return (bytes) => {
    bytes.fill(0);
    bytes.set(first, 0);
  };
}

describe('UlidGenerator: agrees with the ulid package and the ULID spec', () => {
  it('200,000 ULIDs: ulid validates and dates them; each random part is its +1', () => {
    const clock = new ManualClock(T0);
    const gen = new UlidGenerator({ clock });
    let previous = '';
    for (let i = 0; i < 200_000; i++) {
      const newMs = i % 1000 === 0;
      if (newMs) clock.advance(1);
      const id = gen.nextString();
      if (
        !ulidIsValid(id) ||
        decodeTime(id) !== clock.now() ||
        decodeUlid(id).timestamp !== clock.now()
      ) {
        assert.fail(`ulid disagrees on ${id} at ${clock.now()}: decodeTime ${decodeTime(id)}`);
      }
      if (id.slice(0, 10) !== encodeTime(clock.now(), 10)) assert.fail(`time part of ${id}`);
      // The spec's monotonic rule, checked with ulid's own increment.
      if (!newMs && id.slice(10) !== incrementBase32(previous.slice(10)))
        assert.fail(`${id} after ${previous} is not the previous random part + 1`);
      previous = id;
    }
  });

  it('ulid parses our bytes and we parse its strings: 48-bit time, 80 random bits', () => {
    const clock = new ManualClock(T0);
    const gen = new UlidGenerator({ clock });
    for (let i = 0; i < 10_000; i++) {
      const bytes = gen.next();
      const id = ulidFromBytes(bytes);
      assert.ok(ulidIsValid(id));
      assert.equal(decodeTime(id), T0);
      assert.deepEqual(ulidToBytes(id), bytes);
    }
    const theirs = monotonicFactory();
    for (let i = 0; i < 10_000; i++) {
      const id = theirs(T0 + i);
      const decoded = decodeUlid(id);
      assert.equal(decoded.timestamp, T0 + i);
      assert.equal(decoded.id, id);
      assert.equal(ulidFromBytes(ulidToBytes(id)), id);
    }
  });

  it('reads lower case, rejects I, L, O, U, a wrong length and a first character above 7', () => {
    const id = '01ARZ3NDEKTSV4RRFFQ69G5FAV';
    assert.equal(decodeUlid(id.toLowerCase()).id, id);
    assert.equal(decodeUlid(id).timestamp, decodeTime(id));
    assert.equal(isUlid('7ZZZZZZZZZZZZZZZZZZZZZZZZZ'), true);
    assert.equal(decodeUlid('7ZZZZZZZZZZZZZZZZZZZZZZZZZ').timestamp, 2 ** 48 - 1);
    for (const bad of [
      '8ZZZZZZZZZZZZZZZZZZZZZZZZZ',
      '01ARZ3NDEKTSV4RRFFQ69G5FAI',
      '01ARZ3NDEKTSV4RRFFQ69G5FAL',
      '01ARZ3NDEKTSV4RRFFQ69G5FAO',
      '01ARZ3NDEKTSV4RRFFQ69G5FAU',
      '01ARZ3NDEKTSV4RRFFQ69G5FA',
      '',
    ]) {
      assert.equal(isUlid(bad), false, bad);
      throwsCode(() => ulidToBytes(bad), 'INVALID_ID', /is not a ULID/);
    }
    throwsCode(() => ulidFromBytes(new Uint8Array(12)), 'INVALID_ID', /16 bytes, got 12/);
    assert.equal(CROCKFORD_BASE32.length, 32);
  });
});

describe('UlidGenerator: uniqueness and order', () => {
  it('1,200,000 ULIDs on the real monotonic clock: all distinct, strictly increasing', () => {
    const gen = new UlidGenerator({ clock: new MonotonicClock() });
    const seen = new Set<string>();
    let last = '';
    for (let i = 0; i < 1_200_000; i++) {
      const id = gen.nextString();
      if (id <= last) assert.fail(`${id} after ${last}`);
      seen.add(id);
      last = id;
    }
    assert.equal(seen.size, 1_200_000);
  });

  it('carries across 20-bit blocks and from the low 40 random bits into the high 40', () => {
    // Low 40 bits 0x00000ffffd: the 3rd ULID carries out of the low 20-bit block (the string's
    // cached prefix changes). Low 40 bits 2^40 - 3: the 4th carries into the high 40 bits.
    const cases = [
      { bytes: [0, 0, 0, 0, 1, 0, 0, 0x0f, 0xff, 0xfd], start: (1n << 40n) + 0xffffdn },
      {
        bytes: [0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xfd],
        start: (1n << 40n) + (1n << 40n) - 3n,
      },
    ];
    for (const { bytes, start } of cases) {
      const gen = new UlidGenerator({ clock: new ManualClock(T0), random: firstRandom(bytes) });
      const ids = [...gen.nextBatch(3), ulidFromBytes(gen.next()), ...gen.nextBatch(20)];
      ids.forEach((id, i) => {
        assert.equal(BigInt(`0x${decodeUlid(id).random}`), start + BigInt(i), `ULID ${i} (${id})`);
        if (i > 0) assert.ok(id > (ids[i - 1] ?? ''), `${id} after ${ids[i - 1]}`);
      });
    }
  });

  it('random part at 2^80 - 1: MONOTONIC_OVERFLOW, never a wrap; next ms works', () => {
    const clock = new ManualClock(T0);
    const gen = new UlidGenerator({ clock, random: firstRandom(new Array<number>(10).fill(0xff)) });
    const max = gen.nextString();
    assert.equal(max, `${encodeTime(T0, 10)}ZZZZZZZZZZZZZZZZ`);
    throwsCode(
      () => gen.nextString(),
      'MONOTONIC_OVERFLOW',
      /80-bit random part is at its maximum/,
    );
    throwsCode(() => gen.next(), 'MONOTONIC_OVERFLOW');
    clock.advance(1);
    const next = gen.nextString();
    assert.ok(next > max);
    assert.equal(decodeTime(next), T0 + 1);
  });

  it('clock step back (borrow): keeps the last millisecond, as monotonicFactory', () => {
    const clock = new ManualClock(T0);
    const gen = new UlidGenerator({ clock });
    const before = gen.nextBatch(100);
    clock.set(T0 - 400);
    const during = gen.nextBatch(100);
    assert.ok(during.every((id) => decodeTime(id) === T0));
    clock.set(T0 + 5);
    const after = gen.nextString();
    assert.equal(decodeTime(after), T0 + 5);
    const all = [...before, ...during, after];
    for (let i = 1; i < all.length; i++) assert.ok((all[i] ?? '') > (all[i - 1] ?? ''));
    assert.equal(gen.rollbackCount(), 100);
  });

  it('refuse and wait policies, and no history', () => {
    const clock = new ManualClock(T0);
    const refusing = new UlidGenerator({ clock, rollback: { policy: 'refuse' } });
    refusing.nextString();
    clock.set(T0 - 1);
    throwsCode(() => refusing.nextString(), 'CLOCK_MOVED_BACKWARDS', /ULID: .*policy "refuse"/);
    const waiting = new UlidGenerator({ clock, rollback: { policy: 'wait' } });
    const first = waiting.nextString();
    clock.set(T0 - 3);
    assert.ok(waiting.nextString() > first);
    throwsCode(
      () => new UlidGenerator({ clock, rollback: { policy: 'history' } }),
      'INVALID_ARGUMENT',
      /must be one of borrow, wait, refuse \(strict order\), got "history"/,
    );
  });

  it('refuses times past its 48-bit field (TIME_OVERFLOW)', () => {
    const clock = new ManualClock(2 ** 48);
    throwsCode(() => new UlidGenerator({ clock }).nextString(), 'TIME_OVERFLOW', /ULID/);
  });
});
