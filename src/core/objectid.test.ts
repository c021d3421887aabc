import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ObjectId } from 'bson';
import { ManualClock } from '../clocks/manual-clock.ts';
import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import { isIdMintError, type ErrorCode } from './errors.ts';
import {
  ObjectIdGenerator,
  decodeObjectId,
  isObjectId,
  objectIdFromBytes,
  objectIdToBytes,
} from './objectid.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const COUNTERS = 2 ** 24;

function throwsCode(fn: () => unknown, code: ErrorCode, pattern?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(isIdMintError(error, code), `expected ${code}, got ${String(error)}`);
    if (pattern) assert.match(error.message, pattern);
    return true;
  });
}

/** A random source yielding `bytes` first (process random, then counter), zeros after. */
function fixedRandom(bytes: readonly number[]): (target: Uint8Array) => void {
  return (target) => {
    target.fill(0);
    target.set(bytes, 0);
  };
}

describe('ObjectIdGenerator: agrees with bson and the ObjectId spec', () => {
  it('200,000 ObjectIds: bson validates, dates and reads them as we do', () => {
    const clock = new ManualClock(T0);
    const gen = new ObjectIdGenerator({ clock });
    for (let i = 0; i < 200_000; i++) {
      if (i % 5000 === 0) clock.advance(250);
      const id = i % 2 === 0 ? gen.nextString() : objectIdFromBytes(gen.next());
      const second = Math.floor(clock.now() / 1000) * 1000;
      if (!ObjectId.isValid(id)) assert.fail(`bson rejects ${id}`);
      const theirs = new ObjectId(id);
      const ours = decodeObjectId(id);
      if (
        theirs.getTimestamp().getTime() !== second ||
        ours.timestamp !== second ||
        theirs.toHexString() !== id
      ) {
        assert.fail(
          `bson disagrees on ${id}: ${theirs.getTimestamp().toISOString()} vs ` +
            `${ours.date.toISOString()}`,
        );
      }
      if (Buffer.compare(theirs.id, objectIdToBytes(id)) !== 0) assert.fail(`bytes of ${id}`);
      if (
        ours.processRandom !== gen.processRandom ||
        ours.counter !== Number.parseInt(id.slice(18), 16)
      )
        assert.fail(`parts of ${id}`);
    }
  });

  it('the counter starts at random and counts up by one; the 5 random bytes stay', () => {
    const clock = new ManualClock(T0);
    const gen = new ObjectIdGenerator({
      clock,
      random: fixedRandom([1, 2, 3, 4, 5, 0xab, 0xcd, 0xef]),
    });
    const first = decodeObjectId(gen.nextString());
    assert.equal(first.processRandom, '0102030405');
    assert.equal(first.counter, 0xabcdef + 1);
    assert.equal(decodeObjectId(gen.nextString()).counter, 0xabcdef + 2);
    assert.equal(gen.nextString().slice(0, 8), (T0 / 1000).toString(16));
    // Two generators draw different process randoms (real randomness), so they never collide.
    assert.notEqual(
      new ObjectIdGenerator({ clock }).processRandom,
      new ObjectIdGenerator({ clock }).processRandom,
    );
  });
});

describe('ObjectIdGenerator: uniqueness and order', () => {
  it('1,200,000 ObjectIds on the real monotonic clock: all distinct', () => {
    const gen = new ObjectIdGenerator({ clock: new MonotonicClock() });
    const ids = gen.nextBatch(1_200_000);
    assert.equal(new Set(ids).size, ids.length);
  });

  it('never wraps into a used second: 2^24 ObjectIds fill one, the next waits', () => {
    const clock = new ManualClock(T0);
    // Counter starts at 0xfffff0, so it wraps from 0xffffff to 0 sixteen IDs in.
    const gen = new ObjectIdGenerator({
      clock,
      random: fixedRandom([9, 9, 9, 9, 9, 0xff, 0xff, 0xef]),
    });
    let last = '';
    let wraps = 0;
    let firstOfSecond = '';
    for (let i = 0; i < COUNTERS; i++) {
      const id = gen.nextString();
      if (i === 0) firstOfSecond = id;
      if (id <= last) {
        wraps++;
        if (!id.endsWith('000000') || !last.endsWith('ffffff'))
          assert.fail(`${id} after ${last}: not a counter wrap`);
      }
      last = id;
    }
    assert.equal(wraps, 1);
    assert.equal(clock.now(), T0, 'all 2^24 ObjectIds fit the first second');
    assert.equal(
      decodeObjectId(last).counter,
      0xffffef,
      'the last counter value before the start again',
    );
    const next = gen.nextString();
    assert.equal(
      decodeObjectId(next).timestamp,
      T0 + 1000,
      'the 2^24+1st ObjectId is in the next second',
    );
    assert.ok(clock.now() >= T0 + 1000, 'it waited for the clock (never borrowed a second ahead)');
    assert.equal(
      next.slice(8),
      firstOfSecond.slice(8),
      'same counter as the first second began with: a new second, so no repeat',
    );
    assert.notEqual(next, firstOfSecond);
  });

  it('clock step back (borrow): stays in the last second; the used-up guard holds', () => {
    const clock = new ManualClock(T0 + 999);
    const gen = new ObjectIdGenerator({ clock });
    const before = gen.nextBatch(10);
    clock.set(T0 - 300);
    const during = gen.nextBatch(10);
    assert.ok(during.every((id) => decodeObjectId(id).timestamp === T0));
    const all = new Set([...before, ...during]);
    assert.equal(all.size, 20);
    assert.ok(gen.rollbackCount() > 0);
  });

  it('refuse policy throws on a step back across a second; history is refused', () => {
    const clock = new ManualClock(T0 + 10);
    const gen = new ObjectIdGenerator({ clock, rollback: { policy: 'refuse' } });
    gen.nextString();
    clock.set(T0 - 10);
    throwsCode(() => gen.nextString(), 'CLOCK_MOVED_BACKWARDS', /ObjectId/);
    clock.set(T0 + 5); // back inside the same second: no rollback at second granularity
    assert.ok(isObjectId(gen.nextString()));
    throwsCode(
      () => new ObjectIdGenerator({ clock, rollback: { policy: 'history' } }),
      'INVALID_ARGUMENT',
      /history/,
    );
  });

  it('refuses seconds past its unsigned 32-bit field (2106), rather than wrap', () => {
    const clock = new ManualClock((2 ** 32 - 1) * 1000);
    const gen = new ObjectIdGenerator({ clock });
    assert.equal(gen.nextString().slice(0, 8), 'ffffffff');
    clock.advance(1000);
    throwsCode(() => gen.nextString(), 'TIME_OVERFLOW', /ObjectId/);
  });
});

describe('ObjectId parsing', () => {
  it('accepts 24 hex digits in either case, and nothing else', () => {
    assert.equal(decodeObjectId('507F1F77BCF86CD799439011').id, '507f1f77bcf86cd799439011');
    assert.equal(
      decodeObjectId('507f1f77bcf86cd799439011').timestamp,
      new ObjectId('507f1f77bcf86cd799439011').getTimestamp().getTime(),
    );
    for (const bad of [
      '',
      '507f1f77bcf86cd79943901',
      '507f1f77bcf86cd7994390111',
      '507f1f77bcf86cd79943901g',
    ]) {
      assert.equal(isObjectId(bad), false);
      throwsCode(() => objectIdToBytes(bad), 'INVALID_ID', /is not an ObjectId/);
    }
    throwsCode(() => objectIdFromBytes(new Uint8Array(16)), 'INVALID_ID', /12 bytes/);
  });
});
