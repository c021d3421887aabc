import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { seededRandom } from '../../test/support/random.ts';
import { ManualClock } from '../clocks/manual-clock.ts';
import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import type { RollbackPolicyOptions } from './clock-policy.ts';
import { isIdMintError, type ErrorCode } from './errors.ts';
import { decomposeId, defineLayout, getLayout } from './layout.ts';
import { SnowflakeGenerator, maxBatchFor, type SnowflakeOptions } from './snowflake.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);
const layout = getLayout('idmint');
const PER_UNIT = layout.maxSequence + 1;

function generator(
  clock: ManualClock,
  rollback?: RollbackPolicyOptions,
  extra: Partial<SnowflakeOptions> = {},
): SnowflakeGenerator {
  return new SnowflakeGenerator({ clock, rollback, workerId: 5, ...extra });
}

function throwsCode(fn: () => unknown, code: ErrorCode, pattern?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(isIdMintError(error, code), `expected ${code}, got ${String(error)}`);
    if (pattern) assert.match(error.message, pattern);
    return true;
  });
}

/** Draws `count` IDs and asserts each is strictly greater than the one before. */
function drawIncreasing(gen: SnowflakeGenerator, count: number, previous = -1n): bigint {
  let last = previous;
  for (let i = 0; i < count; i++) {
    const id = gen.next();
    if (id <= last) assert.fail(`ID ${id} after ${last} at draw ${i}: not strictly increasing`);
    last = id;
  }
  return last;
}

describe('SnowflakeGenerator: uniqueness and order', () => {
  it('issues 3 million increasing IDs on a frozen clock by moving to later units', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock);
    const last = drawIncreasing(gen, 3_000_000);
    // 3M IDs need ceil(3M / 4096) = 733 time units: the generator waited (slept) for each one.
    const parts = decomposeId(last, layout);
    assert.equal(parts.timestamp, T0 + Math.ceil(3_000_000 / PER_UNIT) - 1);
    assert.equal(parts.workerId, 5);
    assert.ok(clock.now() >= parts.timestamp, 'wait policy never issues ahead of the clock');
  });

  it('the 4097th ID in one millisecond moves to the next, never repeats', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'refuse' });
    const ids = Array.from({ length: PER_UNIT * 3 + 7 }, () => gen.next());
    assert.equal(new Set(ids).size, ids.length);
    const parts = ids.map((id) => decomposeId(id, layout));
    assert.deepEqual([parts[0]?.timestamp, parts[0]?.sequence], [T0, 0]);
    assert.deepEqual([parts[PER_UNIT - 1]?.timestamp, parts[PER_UNIT - 1]?.sequence], [T0, 4095]);
    assert.deepEqual([parts[PER_UNIT]?.timestamp, parts[PER_UNIT]?.sequence], [T0 + 1, 0]);
    assert.equal(clock.now(), T0 + 3);
  });

  it('stays strictly increasing over 2 million IDs on the real monotonic clock', () => {
    const gen = new SnowflakeGenerator({ clock: new MonotonicClock(), workerId: 1023 });
    drawIncreasing(gen, 2_000_000);
  });

  it('nextBatch gives the same increasing, unique sequence as next()', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock);
    let last = -1n;
    for (const size of [1, 7, 4095, 4096, 4097, 10_000, 100_000]) {
      const batch = gen.nextBatch(size);
      assert.equal(batch.length, size);
      for (const id of batch) {
        assert.ok(id > last, `batch of ${size}: ${id} after ${last}`);
        last = id;
      }
      const single = gen.next();
      assert.ok(single > last);
      last = single;
    }
  });

  it('nextBatch and nextString validate and format', () => {
    const gen = generator(new ManualClock(T0));
    for (const bad of [0, -1, 1.5, Number.NaN, 10_000_001])
      throwsCode(() => gen.nextBatch(bad), 'INVALID_ARGUMENT', /count must be an integer/);
    const text = gen.nextString();
    assert.match(text, /^[1-9][0-9]*$/);
    assert.ok(BigInt(text) < gen.next());
  });

  it('different workers never collide, even on the same clock and millisecond', () => {
    const clock = new ManualClock(T0);
    const seen = new Set<bigint>();
    const gens = [0, 1, 2, 1023].map((workerId) => new SnowflakeGenerator({ clock, workerId }));
    for (let round = 0; round < 10_000; round++) {
      for (const gen of gens) seen.add(gen.next());
    }
    assert.equal(seen.size, 40_000);
  });
});

describe('SnowflakeGenerator: clock rollback policies', () => {
  it('refuse: throws CLOCK_MOVED_BACKWARDS with the size of the jump, small or large', () => {
    for (const jump of [1, 3_600_000]) {
      const clock = new ManualClock(T0);
      const gen = generator(clock, { policy: 'refuse' });
      const before = gen.next();
      clock.advance(-jump);
      assert.throws(
        () => gen.next(),
        (error: unknown) =>
          isIdMintError(error, 'CLOCK_MOVED_BACKWARDS') &&
          error.details?.['offsetMs'] === jump &&
          error.retryable,
      );
      assert.equal(gen.rollbackCount(), 1);
      clock.advance(jump);
      assert.ok(gen.next() > before, 'resumes once the clock is back');
    }
  });

  it('wait: waits out a rollback within the bound (twice the offset, as Leaf)', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'wait' });
    const before = gen.next();
    clock.advance(-3);
    const after = gen.next();
    assert.ok(after > before);
    assert.equal(clock.sleptMs, 6);
  });

  it('wait: refuses a rollback beyond the bound without waiting', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'wait' });
    gen.next();
    clock.advance(-6);
    throwsCode(
      () => gen.next(),
      'CLOCK_MOVED_BACKWARDS',
      /6 ms behind .* policy "wait" tolerates up to 5 ms/,
    );
    assert.equal(clock.sleptMs, 0);
  });

  it('wait: the bound is configurable', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'wait', maxBackwardMs: 50 });
    const before = gen.next();
    clock.advance(-40);
    assert.ok(gen.next() > before);
    assert.equal(clock.sleptMs, 80);
  });

  it('wait: refuses when the clock is still behind after the wait', () => {
    const clock = new ManualClock(T0);
    const gen = new SnowflakeGenerator({
      clock: {
        now: () => clock.now(),
        sleep: (ms) => {
          clock.sleptMs += ms;
        },
      }, // time does not pass
      workerId: 5,
      rollback: { policy: 'wait' },
    });
    gen.next();
    clock.advance(-2);
    throwsCode(() => gen.next(), 'CLOCK_MOVED_BACKWARDS', /2 ms behind/);
    assert.equal(clock.sleptMs, 4);
  });

  it('borrow: issues on the last timestamp through a rollback within the lead', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'borrow', maxLeadMs: 1000 });
    let last = drawIncreasing(gen, 10);
    clock.advance(-500);
    // Past one unit's sequence, the generator moves to T0+1, T0+2 ... ahead of the clock.
    last = drawIncreasing(gen, PER_UNIT * 3, last);
    const parts = decomposeId(last, layout);
    assert.equal(parts.timestamp, T0 + 3);
    assert.equal(clock.sleptMs, 0, 'borrowing never waits while within the lead');
  });

  it('borrow: issued time never leads the clock by more than maxLeadMs', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'borrow', maxLeadMs: 3 });
    for (let i = 0; i < PER_UNIT * 20; i++) {
      const ts = decomposeId(gen.next(), layout).timestamp;
      assert.ok(ts - clock.now() <= 3, `ID at ${ts} leads clock ${clock.now()} by more than 3 ms`);
    }
    // 20 units of IDs on a clock that only moves while waiting: 3 units borrowed, 16 waited for.
    assert.equal(clock.now(), T0 + 16);
  });

  it('borrow: past the lead, waits up to maxWaitMs for the clock, then refuses', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'borrow', maxLeadMs: 1000, maxWaitMs: 10 });
    gen.next();
    clock.advance(-3_600_000);
    throwsCode(
      () => gen.next(),
      'CLOCK_MOVED_BACKWARDS',
      /policy "borrow" leads the clock by at most 1000 ms and waits at most 10 ms/,
    );
    assert.ok(clock.sleptMs <= 12, `slept ${clock.sleptMs} ms`);
  });

  it('borrow: a rollback just past the lead is waited out', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'borrow', maxLeadMs: 100, maxWaitMs: 10 });
    const before = gen.next();
    clock.advance(-105);
    assert.ok(gen.next() > before);
    assert.ok(clock.sleptMs >= 5 && clock.sleptMs <= 10, `slept ${clock.sleptMs} ms`);
  });

  it("history: after a rollback inside the window, continues each unit's sequence", () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'history', historyMs: 2000 });
    const seen = new Set<bigint>();
    const draw = (n: number): bigint[] =>
      Array.from({ length: n }, () => {
        const id = gen.next();
        assert.ok(!seen.has(id), `duplicate ${id}`);
        seen.add(id);
        return id;
      });
    for (let ms = 0; ms < 10; ms++) {
      draw(5);
      clock.advance(1);
    }
    clock.set(T0 + 4); // back 6 ms: units T0+4 .. T0+9 were used, 5 IDs each
    const [first] = draw(1);
    assert.deepEqual(
      { ...decomposeId(first ?? 0n, layout), date: undefined },
      { timestamp: T0 + 4, date: undefined, workerId: 5, sequence: 5 },
    );
    for (let ms = 4; ms < 12; ms++) {
      draw(PER_UNIT); // exhausts each revisited unit: overflow waits for the next, never repeats
      clock.set(Math.max(clock.now(), T0 + ms + 1));
    }
    assert.equal(gen.policy.monotonic, false);
  });

  it('history: refuses a rollback beyond its window or before its start', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'history', historyMs: 2000 });
    gen.next();
    clock.advance(5000);
    gen.next();
    clock.advance(-2500);
    throwsCode(
      () => gen.next(),
      'CLOCK_MOVED_BACKWARDS',
      /continues only inside its 2000 ms window/,
    );

    const restarted = generator(
      new ManualClock(T0 - 100),
      { policy: 'history' },
      { lastTimestamp: T0 },
    );
    throwsCode(() => restarted.next(), 'CLOCK_MOVED_BACKWARDS', /100 ms behind/);
  });

  it('rejects unknown policies and bad bounds, naming them', () => {
    const clock = new ManualClock(T0);
    throwsCode(
      () => generator(clock, { policy: 'sleep' as never }),
      'INVALID_ARGUMENT',
      /one of refuse, wait, borrow, history, got "sleep"/,
    );
    throwsCode(
      () => generator(clock, { policy: 'wait', maxBackwardMs: -1 }),
      'INVALID_ARGUMENT',
      /maxBackwardMs must be an integer from 0 to 1000/,
    );
    throwsCode(
      () => generator(clock, { policy: 'borrow', maxWaitMs: 5000 }),
      'INVALID_ARGUMENT',
      /maxWaitMs/,
    );
  });

  it("defaults to wait with Leaf's 5 ms bound", () => {
    const gen = generator(new ManualClock(T0));
    assert.equal(gen.policy.name, 'wait');
    assert.equal(gen.policy.maxBackwardMs, 5);
  });
});

describe('SnowflakeGenerator: restart, time overflow and fencing', () => {
  it('a restarted worker starts after lastTimestamp, waiting out a clock behind it', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, undefined, { lastTimestamp: T0 });
    const parts = decomposeId(gen.next(), layout);
    assert.equal(parts.timestamp, T0 + 1);

    // 2 ms behind: Leaf's rule waits twice the offset, so the first ID lands at T0 + 2.
    const behind = new ManualClock(T0 - 2);
    assert.equal(
      decomposeId(generator(behind, undefined, { lastTimestamp: T0 }).next(), layout).timestamp,
      T0 + 2,
    );
    throwsCode(
      () => generator(new ManualClock(T0 - 60_000), undefined, { lastTimestamp: T0 }).next(),
      'CLOCK_MOVED_BACKWARDS',
      /60000 ms behind/,
    );
  });

  it('reports the latest time unit used, for the worker registry', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock);
    assert.equal(gen.lastTimestamp(), -1);
    gen.next();
    clock.advance(7);
    gen.next();
    assert.equal(gen.lastTimestamp(), T0 + 7);
  });

  const tiny = defineLayout({
    name: 'tiny',
    timeBits: 12,
    workerBits: 31,
    sequenceBits: 20,
    epoch: T0 - 4000,
  });

  it('refuses with TIME_OVERFLOW instead of wrapping when the time field runs out', () => {
    assert.equal(tiny.expiresAtMs, T0 + 96);
    const clock = new ManualClock(T0 + 95);
    const gen = generator(clock, undefined, { layout: tiny });
    const last = gen.next();
    assert.ok(last > 0n && last <= tiny.maxId);
    assert.equal(decomposeId(last, tiny).timestamp, T0 + 95);
    clock.advance(1);
    throwsCode(
      () => gen.next(),
      'TIME_OVERFLOW',
      /layout "tiny" ran out of time at .*: its 12-bit time field counts 1 ms units from /,
    );
  });

  it("refuses TIME_OVERFLOW when the last unit's sequence runs out, even when borrowing", () => {
    const clock = new ManualClock(T0 + 95);
    const gen = generator(clock, { policy: 'borrow' }, { layout: tiny });
    gen.nextBatch(tiny.maxSequence + 1);
    throwsCode(() => gen.next(), 'TIME_OVERFLOW');
  });

  it("refuses a layout that already ran out (Baidu's default since 2024-11-20)", () => {
    const baidu = () =>
      new SnowflakeGenerator({ clock: new ManualClock(T0), layout: 'baidu', workerId: 0 });
    throwsCode(baidu, 'TIME_OVERFLOW', /2024-11-20/);
  });

  it('refuses an epoch in the future and a clock before the epoch', () => {
    const early = () =>
      new SnowflakeGenerator({ clock: new ManualClock(Date.UTC(2025, 0, 1)), workerId: 0 });
    throwsCode(early, 'LAYOUT_INVALID', /epoch .* is in the future/);
    const clock = new ManualClock(layout.epochMs);
    const gen = new SnowflakeGenerator({ clock, workerId: 0, rollback: { policy: 'refuse' } });
    gen.next();
    clock.set(layout.epochMs - 10);
    throwsCode(() => gen.next(), 'CLOCK_MOVED_BACKWARDS', /before the epoch/);
  });

  it('fencing: issues nothing once the clock reaches validUntil, resumes when extended', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock);
    const before = gen.next();
    gen.setValidUntil(T0 + 10);
    clock.advance(10);
    throwsCode(() => gen.next(), 'LEASE_LOST', /worker 5 is fenced/);
    throwsCode(() => gen.nextBatch(5), 'LEASE_LOST');
    gen.setValidUntil(T0 + 20);
    assert.ok(gen.next() > before);
  });

  it('fencing applies on the fast path too, in the middle of a time unit', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock);
    gen.next();
    gen.setValidUntil(T0);
    throwsCode(() => gen.next(), 'LEASE_LOST');
  });

  it('validates worker and datacenter IDs against the layout', () => {
    const clock = new ManualClock(T0);
    throwsCode(
      () => generator(clock, undefined, { workerId: 1024 }),
      'INVALID_ARGUMENT',
      /workerId must be an integer from 0 to 1023 for layout "idmint", got 1024/,
    );
    throwsCode(() => generator(clock, undefined, { workerId: -1 }), 'INVALID_ARGUMENT');
    throwsCode(
      () => generator(clock, undefined, { datacenterId: 1 }),
      'INVALID_ARGUMENT',
      /datacenterId must be an integer from 0 to 0/,
    );
    const twitter = new SnowflakeGenerator({
      clock,
      layout: 'twitter',
      datacenterId: 3,
      workerId: 31,
    });
    assert.deepEqual(
      [
        decomposeId(twitter.next(), twitter.layout).datacenterId,
        decomposeId(twitter.next(), twitter.layout).workerId,
      ],
      [3, 31],
    );
    throwsCode(
      () => new SnowflakeGenerator({} as SnowflakeOptions),
      'INVALID_ARGUMENT',
      /needs options with a clock/,
    );
  });

  it('never assumes a worker ID: one left out is INVALID_ARGUMENT saying how to get one', () => {
    const clock = new ManualClock(T0);
    const without = (options: object) => () => new SnowflakeGenerator(options as SnowflakeOptions);
    throwsCode(without({ clock }), 'INVALID_ARGUMENT', /needs a workerId.*SnowflakeWorker\.start/);
    throwsCode(without({ clock, workerId: undefined }), 'INVALID_ARGUMENT', /needs a workerId/);
    assert.equal(new SnowflakeGenerator({ clock, workerId: 0 }).workerId, 0);
  });
});

describe('SnowflakeGenerator: low-traffic spread', () => {
  it('starts each unit at a random sequence below the spread', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, undefined, { sequenceSpread: 100, random: seededRandom(7) });
    const firstSequences: number[] = [];
    for (let i = 0; i < 1000; i++) {
      firstSequences.push(decomposeId(gen.next(), layout).sequence);
      clock.advance(1);
    }
    assert.ok(firstSequences.every((s) => s >= 0 && s < 100));
    const odd = firstSequences.filter((s) => s % 2 === 1).length;
    assert.ok(odd > 400 && odd < 600, `${odd} of 1000 odd`);
    assert.ok(new Set(firstSequences).size > 90);
  });

  it('a spread unit still holds at least 2^sequenceBits - spread + 1 IDs and never repeats', () => {
    const clock = new ManualClock(T0);
    const gen = generator(
      clock,
      { policy: 'refuse' },
      { sequenceSpread: 100, random: () => 0.999 },
    );
    const ids = gen.nextBatch(PER_UNIT);
    assert.equal(new Set(ids).size, PER_UNIT);
    assert.equal(decomposeId(ids[0] ?? 0n, layout).sequence, 99);
    assert.equal(decomposeId(ids[PER_UNIT - 99] ?? 0n, layout).timestamp, T0 + 1);
  });

  it("leaf starts each millisecond's sequence at a random 0-99 by default, as Leaf", () => {
    const leaf = getLayout('leaf');
    assert.equal(leaf.sequenceSpread, 100);
    assert.equal(getLayout('idmint').sequenceSpread, 0);
    assert.equal(maxBatchFor(leaf), (4096 - 99) * 100, "the bound counts the layout's spread");
    const firstOfEachMs = (extra: Partial<SnowflakeOptions>, layoutName: string): number[] => {
      const clock = new ManualClock(T0);
      const gen = generator(clock, undefined, { layout: layoutName, ...extra });
      const sequences: number[] = [];
      for (let i = 0; i < 200; i++) {
        sequences.push(decomposeId(gen.next(), layoutName).sequence);
        clock.advance(1);
      }
      return sequences;
    };
    const spread = firstOfEachMs({ random: seededRandom(3) }, 'leaf');
    assert.ok(spread.every((s) => s >= 0 && s < 100));
    assert.ok(new Set(spread).size > 50, 'spread over 0-99');
    // Off where asked, and for the other layouts.
    const off = firstOfEachMs({ random: seededRandom(3), sequenceSpread: 0 }, 'leaf');
    assert.ok(off.every((s) => s === 0));
    assert.ok(firstOfEachMs({ random: seededRandom(3) }, 'idmint').every((s) => s === 0));
  });

  it('rejects a spread above half the sequence space', () => {
    throwsCode(
      () => generator(new ManualClock(T0), undefined, { sequenceSpread: 2049 }),
      'INVALID_ARGUMENT',
      /sequenceSpread must be an integer from 0 to 2048/,
    );
  });
});

describe('SnowflakeGenerator: nextReady, batches that never wait for the clock', () => {
  const sixtyFour = defineLayout({
    name: 'sixty-four',
    timeBits: 41,
    workerBits: 6,
    sequenceBits: 6,
    epoch: '2026-01-01T00:00:00Z',
    totalBits: 53,
  });

  it('takes what the current unit holds and stops; readyAt is the next unit', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, undefined, { layout: sixtyFour });
    const ids = new Array<bigint>(200);
    assert.equal(gen.nextReady(ids, 0, 200), 64, 'one unit of 64');
    assert.equal(clock.sleptMs, 0, 'never asked the clock to sleep');
    assert.equal(gen.readyAt(), T0 + 1);
    assert.equal(gen.nextReady(ids, 64, 200), 64, 'nothing more until the clock moves');
    clock.advance(1);
    assert.equal(gen.nextReady(ids, 64, 200), 128);
    clock.advance(5);
    assert.equal(gen.nextReady(ids, 128, 200), 192);
    clock.advance(1);
    assert.equal(gen.nextReady(ids, 192, 200), 200, 'stops at the end asked for, mid-unit');
    assert.ok(
      ids.every((id, i) => i === 0 || id > (ids[i - 1] ?? 0n)),
      'strictly increasing',
    );
    assert.deepEqual(
      [0, 63, 64, 127, 128, 199].map((i) => decomposeId(ids[i] ?? 0n, sixtyFour).timestamp - T0),
      [0, 0, 1, 1, 6, 7],
    );
    // The rest of the unit is still there for next(), after the batch.
    assert.ok(gen.next() > (ids[199] ?? 0n));
    assert.equal(clock.sleptMs, 0);
  });

  it('borrow: runs ahead up to the lead, then stops; readyAt is when the lead allows', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'borrow', maxLeadMs: 3 }, { layout: sixtyFour });
    const ids = new Array<bigint>(1000);
    // Units T0 to T0 + 3: four of 64.
    assert.equal(gen.nextReady(ids, 0, 1000), 256);
    assert.equal(clock.sleptMs, 0);
    assert.equal(decomposeId(ids[255] ?? 0n, sixtyFour).timestamp, T0 + 3);
    assert.equal(gen.readyAt(), T0 + 1);
    clock.advance(1);
    assert.equal(gen.nextReady(ids, 256, 1000), 320);
  });

  it('borrow: a rollback past the lead waits only maxWaitMs, then refuses at once', () => {
    const clock = new ManualClock(T0);
    const gen = generator(
      clock,
      { policy: 'borrow', maxLeadMs: 3, maxWaitMs: 10 },
      { layout: sixtyFour },
    );
    const ids = new Array<bigint>(100);
    assert.equal(gen.nextReady(ids, 0, 10), 10);
    // 8 ms back: the lead (3) plus 5 ms, within maxWaitMs: not ready yet, ask again at T0 - 3.
    clock.advance(-8);
    assert.equal(gen.nextReady(ids, 10, 100), 10);
    assert.equal(gen.readyAt(), T0 - 3);
    // 20 ms back: the lead plus 17 ms, more than next() would wait: refused now, not waited for.
    clock.advance(-12);
    throwsCode(() => gen.nextReady(ids, 10, 100), 'CLOCK_MOVED_BACKWARDS');
    assert.equal(clock.sleptMs, 0);
    throwsCode(() => gen.next(), 'CLOCK_MOVED_BACKWARDS');
  });

  it('wait: a small rollback is not slept through; readyAt is where the clock is back', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, { policy: 'wait', maxBackwardMs: 5 }, { layout: sixtyFour });
    const ids = new Array<bigint>(100);
    assert.equal(gen.nextReady(ids, 0, 10), 10);
    clock.advance(-3);
    assert.equal(gen.nextReady(ids, 10, 100), 10);
    assert.equal(clock.sleptMs, 0);
    assert.equal(gen.readyAt(), T0);
    clock.advance(3);
    assert.equal(gen.nextReady(ids, 10, 100), 64, 'the rest of the unit it had begun');
    // Beyond what wait tolerates: refused at once, as next() does.
    clock.advance(-50);
    throwsCode(() => gen.nextReady(ids, 64, 100), 'CLOCK_MOVED_BACKWARDS');
  });

  it('is fenced like next(): LEASE_LOST once the clock reaches validUntil', () => {
    const clock = new ManualClock(T0);
    const gen = generator(clock, undefined, { layout: sixtyFour });
    gen.setValidUntil(T0 + 1);
    const ids = new Array<bigint>(100);
    assert.equal(gen.nextReady(ids, 0, 100), 64);
    clock.advance(1);
    throwsCode(() => gen.nextReady(ids, 64, 100), 'LEASE_LOST');
  });

  it('maxBatchFor: the IDs a layout issues in 100 ms, less what a sequence spread may skip', () => {
    assert.equal(maxBatchFor(getLayout('js-safe')), 6400);
    assert.equal(maxBatchFor(getLayout('idmint')), 409_600);
    assert.equal(
      maxBatchFor(getLayout('baidu')),
      8192,
      'one unit at least, for units longer than the window',
    );
    assert.equal(maxBatchFor(getLayout('idmint'), 100), (4096 - 99) * 100);
  });
});
