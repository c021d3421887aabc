import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MonotonicClock } from './monotonic-clock.ts';

/** A wall clock and a monotonic timer the test moves by hand. */
function fakeTime(wallStart: number) {
  const time = { wall: wallStart, mono: 1000.25 };
  const clock = new MonotonicClock({
    wallNow: () => time.wall,
    monotonicNow: () => time.mono,
    resyncIntervalMs: 1000,
  });
  const tick = (ms: number) => {
    time.wall += ms;
    time.mono += ms;
  };
  return { time, clock, tick };
}

describe('MonotonicClock', () => {
  it('follows the wall clock while it runs normally', () => {
    const { clock, tick } = fakeTime(1_000_000);
    assert.equal(clock.now(), 1_000_000);
    tick(1500);
    assert.equal(clock.now(), 1_001_500);
    assert.equal(clock.lagMs(), 0);
  });

  it('never goes back when the wall clock steps back; reports how far ahead it runs', () => {
    const { time, clock, tick } = fakeTime(1_000_000);
    tick(10);
    const before = clock.now();
    time.wall -= 60_000; // NTP or an operator steps the wall clock back a minute
    let last = before;
    for (let i = 0; i < 5000; i++) {
      tick(1);
      const now = clock.now();
      assert.ok(now >= last, `went back from ${last} to ${now}`);
      last = now;
    }
    assert.equal(last, before + 5000);
    assert.equal(clock.lagMs(), 60_000);
  });

  it('follows a forward step at the next re-sync', () => {
    const { time, clock, tick } = fakeTime(1_000_000);
    time.wall += 30_000;
    tick(1000);
    assert.equal(clock.now(), 1_031_000);
  });

  it('catches up with the wall clock once it has passed the anchored time again', () => {
    const { time, clock, tick } = fakeTime(1_000_000);
    time.wall -= 2000;
    tick(1000);
    clock.now();
    assert.equal(clock.lagMs(), 2000);
    time.wall += 5000; // the wall clock overtakes
    tick(1000);
    assert.equal(clock.now(), time.wall);
    assert.equal(clock.lagMs(), 0);
  });

  it('reads the real clocks by default, within a few ms of Date.now()', () => {
    const clock = new MonotonicClock();
    assert.ok(Math.abs(clock.now() - Date.now()) < 50);
    assert.ok(Number.isInteger(clock.now()));
  });
});
