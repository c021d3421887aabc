import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../clocks/manual-clock.ts';
import { isIdMintError, type ErrorCode } from './errors.ts';
import { MonotonicTime } from './monotonic-time.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);

function throwsCode(fn: () => unknown, code: ErrorCode, pattern?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(isIdMintError(error, code), `expected ${code}, got ${String(error)}`);
    if (pattern) assert.match(error.message, pattern);
    return true;
  });
}

function timeline(
  clock: ManualClock,
  unitMs = 1,
  rollback?: ConstructorParameters<typeof MonotonicTime>[0]['rollback'],
) {
  return new MonotonicTime({ clock, unitMs, maxUnit: 2 ** 48 - 1, family: 'Test', rollback });
}

describe('MonotonicTime', () => {
  it('follows the clock forwards, unit by unit', () => {
    const clock = new ManualClock(T0);
    const time = timeline(clock, 1000);
    assert.equal(time.current(clock.now()), Math.floor(T0 / 1000));
    clock.advance(999);
    assert.equal(time.current(clock.now()), Math.floor(T0 / 1000));
    clock.advance(1);
    assert.equal(time.current(clock.now()), Math.floor(T0 / 1000) + 1);
    assert.equal(time.policy.name, 'borrow');
  });

  it('borrow: keeps the last unit within maxLeadMs; beyond, waits maxWaitMs, refuses', () => {
    const clock = new ManualClock(T0);
    const time = timeline(clock, 1, { maxLeadMs: 50, maxWaitMs: 20 });
    time.current(clock.now());
    assert.equal(time.current(T0 - 50), T0);
    assert.equal(time.rollbackCount(), 1);
    clock.set(T0 - 60); // 10 ms past the lead: waited out
    assert.equal(time.current(clock.now()), T0);
    assert.ok(clock.sleptMs >= 10 && clock.sleptMs <= 21, `slept ${clock.sleptMs}`);
    clock.set(T0 - 5000);
    const slept = clock.sleptMs;
    throwsCode(
      () => time.current(clock.now()),
      'CLOCK_MOVED_BACKWARDS',
      /policy "borrow" leads the clock by at most 50 ms and waits at most 20 ms/,
    );
    assert.ok(clock.sleptMs - slept <= 21, 'never sleeps for the whole rollback');
  });

  it('following(true) under borrow: next unit at once within the lead, waits beyond', () => {
    const clock = new ManualClock(T0);
    const time = timeline(clock, 1, { maxLeadMs: 2, maxWaitMs: 10 });
    time.current(clock.now());
    assert.equal(time.following(true), T0 + 1);
    assert.equal(time.following(true), T0 + 2);
    assert.equal(clock.sleptMs, 0);
    assert.equal(time.following(true), T0 + 3, 'the third unit ahead needed the clock to move');
    assert.ok(clock.now() >= T0 + 1);
  });

  it('following(false) always waits for the clock to reach the next unit', () => {
    const clock = new ManualClock(T0 + 200);
    const time = timeline(clock, 1000);
    const unit = time.current(clock.now());
    assert.equal(time.following(false), unit + 1);
    assert.ok(clock.now() >= (unit + 1) * 1000);
    assert.ok(clock.sleptMs >= 800);
  });

  it("wait: Leaf's rule for small steps back, refusal for large ones; refuse: at once", () => {
    const clock = new ManualClock(T0);
    const waiting = timeline(clock, 1, { policy: 'wait', maxBackwardMs: 5 });
    waiting.current(clock.now());
    clock.set(T0 - 4);
    assert.equal(waiting.current(clock.now()), T0 + 4);
    assert.equal(clock.sleptMs, 8);
    throwsCode(() => waiting.current(T0 - 100), 'CLOCK_MOVED_BACKWARDS', /tolerates up to 5 ms/);
    const refusing = timeline(new ManualClock(T0), 1, { policy: 'refuse' });
    refusing.current(T0);
    throwsCode(() => refusing.current(T0 - 1), 'CLOCK_MOVED_BACKWARDS', /refuses any rollback/);
  });

  it('TIME_OVERFLOW past the last unit, both from the clock and from following()', () => {
    const clock = new ManualClock(99);
    const time = new MonotonicTime({ clock, unitMs: 1, maxUnit: 99, family: 'Tiny' });
    assert.equal(time.current(99), 99);
    throwsCode(
      () => time.following(true),
      'TIME_OVERFLOW',
      /Tiny: its time field cannot hold times from/,
    );
    throwsCode(() => time.current(100), 'TIME_OVERFLOW');
  });

  it('rejects history and bad bounds', () => {
    const clock = new ManualClock(T0);
    throwsCode(
      () => timeline(clock, 1, { policy: 'history' }),
      'INVALID_ARGUMENT',
      /must be one of borrow, wait, refuse/,
    );
    throwsCode(() => timeline(clock, 1, { maxLeadMs: -1 }), 'INVALID_ARGUMENT', /maxLeadMs/);
  });
});
