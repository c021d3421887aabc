import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  parse as uuidParse,
  stringify as uuidStringify,
  validate as uuidValidate,
  version as uuidVersion,
} from 'uuid';
import { ManualClock } from '../clocks/manual-clock.ts';
import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import { isIdMintError, type ErrorCode } from './errors.ts';
import {
  UuidV4Generator,
  UuidV7Generator,
  decodeUuid,
  isUuid,
  uuidFromBytes,
  uuidToBytes,
} from './uuid.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);

function throwsCode(fn: () => unknown, code: ErrorCode, pattern?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(isIdMintError(error, code), `expected ${code}, got ${String(error)}`);
    if (pattern) assert.match(error.message, pattern);
    return true;
  });
}

/** A random source that always yields `byte`: drives the counter seed to an edge. */
function constantRandom(byte: number): (bytes: Uint8Array) => void {
  return (bytes) => {
    bytes.fill(byte);
  };
}

/** The 48-bit timestamp read straight from the hex, independently of decodeUuid. */
function hexTime(id: string): number {
  return Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}

describe('UuidV7Generator: agrees with the uuid package and RFC 9562', () => {
  it('200,000 IDs: the uuid package validates and parses them as we do', () => {
    const clock = new ManualClock(T0);
    const gen = new UuidV7Generator({ clock });
    for (let i = 0; i < 200_000; i++) {
      if (i % 1000 === 0) clock.advance(1);
      const id = gen.nextString();
      if (!uuidValidate(id) || uuidVersion(id) !== 7) assert.fail(`uuid rejects ${id}`);
      const bytes = uuidToBytes(id);
      if (Buffer.compare(bytes, uuidParse(id)) !== 0)
        assert.fail(`bytes of ${id} differ from uuid.parse`);
      if (uuidStringify(bytes) !== id || uuidFromBytes(bytes) !== id)
        assert.fail(`stringify round trip of ${id}`);
      const decoded = decodeUuid(id);
      if (
        decoded.version !== 7 ||
        decoded.variant !== 'rfc9562' ||
        decoded.timestamp !== clock.now() ||
        hexTime(id) !== clock.now()
      ) {
        assert.fail(`decode of ${id}: ${JSON.stringify(decoded)} at ${clock.now()}`);
      }
    }
  });

  it('lays out version, variant and counter: below 2^25 per new ms, then +1', () => {
    const clock = new ManualClock(T0);
    const gen = new UuidV7Generator({ clock });
    const first = decodeUuid(gen.nextString());
    const second = decodeUuid(gen.nextString());
    assert.equal(first.id[14], '7');
    assert.match(first.id[19] ?? '', /[89ab]/);
    assert.ok(
      (first.counter ?? -1) >= 0 && (first.counter ?? 2 ** 25) < 2 ** 25,
      `seed ${first.counter} has its top bit set`,
    );
    assert.equal(second.counter, (first.counter ?? 0) + 1);
    // rand_a is the counter's top 12 bits, rand_b's first 14 bits its low 14.
    assert.equal(first.randA, Math.floor((first.counter ?? 0) / 2 ** 14));
    assert.equal(Number(BigInt(`0x${first.randB}`) >> 48n), (first.counter ?? 0) % 2 ** 14);
    assert.equal(
      first.randB,
      first.id
        .slice(19)
        .replace('-', '')
        .replace(/^./, (c) => (Number.parseInt(c, 16) & 3).toString(16))
        .padStart(16, '0'),
    );
  });

  it('binary form: next() bytes are the ID of their string; uuid.stringify reads them', () => {
    const clock = new ManualClock(T0);
    const gen = new UuidV7Generator({ clock });
    let previous: Uint8Array = new Uint8Array(16);
    for (let i = 0; i < 50_000; i++) {
      const bytes = gen.next();
      const id = uuidStringify(bytes);
      assert.ok(uuidValidate(id) && uuidVersion(id) === 7, id);
      assert.equal(decodeUuid(bytes).timestamp, T0);
      assert.ok(Buffer.compare(bytes, previous) > 0, `bytes of ${id} not above the previous ID`);
      previous = bytes;
    }
    const target = new Uint8Array(40);
    gen.nextInto(target, 20);
    assert.ok(uuidValidate(uuidStringify(target.subarray(20, 36))));
    throwsCode(() => gen.nextInto(target, 30), 'INVALID_ARGUMENT', /room for 16 bytes/);
  });
});

describe('UuidV7Generator: uniqueness and order', () => {
  it('1,200,000 IDs on the monotonic clock: distinct, increasing as strings and bytes', () => {
    const gen = new UuidV7Generator({ clock: new MonotonicClock() });
    const seen = new Set<string>();
    let last = '';
    let lastBytes = uuidToBytes('00000000-0000-0000-0000-000000000000');
    for (let i = 0; i < 1_200_000; i++) {
      const id = gen.nextString();
      if (id <= last) assert.fail(`${id} after ${last}: not increasing`);
      if (i % 97 === 0) {
        const bytes = uuidToBytes(id);
        if (Buffer.compare(bytes, lastBytes) <= 0) assert.fail(`bytes of ${id} not increasing`);
        lastBytes = bytes;
      }
      seen.add(id);
      last = id;
    }
    assert.equal(seen.size, 1_200_000);
  });

  it('string, bytes and batch calls share one sequence', () => {
    const clock = new ManualClock(T0);
    const gen = new UuidV7Generator({ clock });
    const ids = [
      gen.nextString(),
      uuidFromBytes(gen.next()),
      ...gen.nextBatch(3),
      gen.nextString(),
    ];
    for (let i = 1; i < ids.length; i++)
      assert.ok((ids[i] ?? '') > (ids[i - 1] ?? ''), `${ids[i]} after ${ids[i - 1]}`);
    assert.deepEqual(
      ids.map((id) => decodeUuid(id).counter),
      ids.map((_, i) => (decodeUuid(ids[0] ?? '').counter ?? 0) + i),
    );
    throwsCode(() => gen.nextBatch(0), 'INVALID_ARGUMENT', /count/);
  });

  it('the counter carries into rand_a every 2^14 IDs; the string keeps increasing', () => {
    const clock = new ManualClock(T0);
    // A seed of 0x1ffffff - 2: a carry out of the low 14 bits comes within 3 IDs.
    const gen = new UuidV7Generator({ clock, random: constantRandom(0xff) });
    const ids = gen.nextBatch(3 * 16_384);
    assert.equal(decodeUuid(ids[0] ?? '').counter, 0x1ff_ffff);
    for (let i = 1; i < ids.length; i++) {
      if ((ids[i] ?? '') <= (ids[i - 1] ?? ''))
        assert.fail(`${ids[i]} after ${ids[i - 1]} at ${i}`);
    }
    assert.equal(decodeUuid(ids[1] ?? '').randA, 0x800, 'the second ID moved to the next rand_a');
    assert.equal(decodeUuid(ids.at(-1) ?? '').counter, 0x1ff_ffff + ids.length - 1);
  });

  it('2^25 IDs in one frozen ms: the counter runs out; the next ID takes the next ms', () => {
    const clock = new ManualClock(T0);
    const gen = new UuidV7Generator({ clock, random: constantRandom(0xff) });
    const first = gen.nextString();
    assert.equal(decodeUuid(first).counter, 0x1ff_ffff);
    // Seeded at 2^25 - 1, the counter reaches 2^26 - 1 after 2^25 more IDs.
    let last = first;
    for (let i = 0; i < 2 ** 25; i++) last = gen.nextString();
    const lastDecoded = decodeUuid(last);
    assert.equal(lastDecoded.counter, 0x3ff_ffff);
    assert.equal(lastDecoded.timestamp, T0);
    const next = gen.nextString();
    assert.ok(next > last, `${next} after ${last}`);
    assert.equal(decodeUuid(next).timestamp, T0 + 1, 'borrowed the next millisecond');
    assert.equal(clock.now(), T0, 'without waiting: the clock has not moved');
  });
});

describe('UuidV7Generator: clock steps back (ManualClock)', () => {
  it('borrow (default): stays on the last ms and counts on; follows the clock again', () => {
    const clock = new ManualClock(T0);
    const gen = new UuidV7Generator({ clock });
    const ids: string[] = [];
    for (let i = 0; i < 1000; i++) ids.push(gen.nextString());
    clock.set(T0 - 500); // a 500 ms step back, inside the 1000 ms lead
    for (let i = 0; i < 1000; i++) ids.push(gen.nextString());
    assert.equal(
      decodeUuid(ids.at(-1) ?? '').timestamp,
      T0,
      'issued time did not follow the clock back',
    );
    clock.set(T0 + 1);
    ids.push(gen.nextString());
    assert.equal(decodeUuid(ids.at(-1) ?? '').timestamp, T0 + 1);
    for (let i = 1; i < ids.length; i++)
      assert.ok((ids[i] ?? '') > (ids[i - 1] ?? ''), `${ids[i]} after ${ids[i - 1]}`);
    assert.equal(new Set(ids).size, ids.length);
    assert.equal(gen.rollbackCount(), 1000);
  });

  it('borrow: beyond maxLeadMs waits up to maxWaitMs, then CLOCK_MOVED_BACKWARDS', () => {
    const clock = new ManualClock(T0);
    const gen = new UuidV7Generator({ clock, rollback: { maxLeadMs: 100, maxWaitMs: 10 } });
    gen.nextString();
    clock.set(T0 - 5000);
    throwsCode(
      () => gen.nextString(),
      'CLOCK_MOVED_BACKWARDS',
      /UUIDv7: clock reads .* behind .*policy "borrow"/,
    );
    assert.ok(clock.sleptMs <= 11, `slept ${clock.sleptMs} ms`);
  });

  it('refuse: the first ID after a step back throws, with the size of the jump', () => {
    const clock = new ManualClock(T0);
    const gen = new UuidV7Generator({ clock, rollback: { policy: 'refuse' } });
    gen.nextString();
    clock.set(T0 - 3);
    assert.throws(
      () => gen.nextString(),
      (error: unknown) =>
        isIdMintError(error, 'CLOCK_MOVED_BACKWARDS') && error.details?.['offsetMs'] === 3,
    );
  });

  it('wait: a small step back is waited out, a large one is refused', () => {
    const clock = new ManualClock(T0);
    const gen = new UuidV7Generator({ clock, rollback: { policy: 'wait', maxBackwardMs: 5 } });
    const before = gen.nextString();
    clock.set(T0 - 3);
    const after = gen.nextString();
    assert.ok(after > before);
    assert.equal(clock.sleptMs, 6, 'twice the offset, as Leaf');
    clock.set(T0 - 100);
    throwsCode(() => gen.nextString(), 'CLOCK_MOVED_BACKWARDS', /tolerates up to 5 ms/);
  });

  it('refuses the history policy, which gives up order', () => {
    throwsCode(
      () => new UuidV7Generator({ clock: new ManualClock(T0), rollback: { policy: 'history' } }),
      'INVALID_ARGUMENT',
      /borrow, wait, refuse/,
    );
    throwsCode(
      () => new UuidV7Generator(undefined as never),
      'INVALID_ARGUMENT',
      /needs options with a clock/,
    );
  });

  it('refuses times its 48-bit field cannot hold (TIME_OVERFLOW), rather than wrap', () => {
    const clock = new ManualClock(2 ** 48 - 1);
    const gen = new UuidV7Generator({ clock });
    assert.equal(decodeUuid(gen.nextString()).timestamp, 2 ** 48 - 1);
    clock.advance(1);
    throwsCode(() => gen.nextString(), 'TIME_OVERFLOW', /UUIDv7/);
  });
});

describe('UuidV4Generator', () => {
  it('200,000 IDs: uuid validate() and version() agree, all distinct, random bits spread', () => {
    const gen = new UuidV4Generator();
    const seen = new Set<string>();
    const nibbleCounts = new Array<number>(16).fill(0);
    for (let i = 0; i < 200_000; i++) {
      const id = i % 2 === 0 ? gen.nextString() : uuidFromBytes(gen.next());
      if (!uuidValidate(id) || uuidVersion(id) !== 4) assert.fail(`uuid rejects ${id}`);
      const decoded = decodeUuid(id);
      if (decoded.version !== 4 || decoded.variant !== 'rfc9562' || decoded.timestamp !== undefined)
        assert.fail(`decode of ${id}`);
      const nibble = Number.parseInt(id[0] ?? '0', 16);
      nibbleCounts[nibble] = (nibbleCounts[nibble] ?? 0) + 1;
      seen.add(id);
    }
    assert.equal(seen.size, 200_000);
    for (const count of nibbleCounts)
      assert.ok(
        Math.abs(count - 12_500) < 12_500 * 0.05,
        `first hex digit counts ${nibbleCounts.join(',')}`,
      );
  });

  it('takes its randomness from the injected source', () => {
    const gen = new UuidV4Generator({ random: constantRandom(0) });
    assert.equal(gen.nextString(), '00000000-0000-4000-8000-000000000000');
    assert.equal(uuidFromBytes(gen.next()), '00000000-0000-4000-8000-000000000000');
  });
});

describe('UUID parsing and decoding', () => {
  it('accepts the canonical form in either case, and nothing else', () => {
    const id = '01890A5D-AC96-774B-BCCE-B302099A8057';
    assert.equal(uuidFromBytes(uuidToBytes(id)), id.toLowerCase());
    assert.equal(decodeUuid(id).timestamp, 0x01890a5dac96);
    for (const bad of [
      '',
      '01890a5d-ac96-774b-bcce-b302099a805',
      '01890a5dac96774bbcceb302099a8057',
      '{01890a5d-ac96-774b-bcce-b302099a8057}',
      '01890a5d-ac96-774b-bcce-b302099a805g',
      ' 01890a5d-ac96-774b-bcce-b302099a8057',
    ]) {
      assert.equal(isUuid(bad), false, bad);
      throwsCode(() => uuidToBytes(bad), 'INVALID_ID', /is not a UUID/);
    }
    throwsCode(() => decodeUuid(new Uint8Array(15)), 'INVALID_ID', /16 bytes, got 15/);
  });

  it('decodes the nil and max UUIDs and other variants without a time', () => {
    assert.deepEqual(decodeUuid('00000000-0000-0000-0000-000000000000'), {
      format: 'uuid',
      id: '00000000-0000-0000-0000-000000000000',
      version: 0,
      variant: 'ncs',
    });
    assert.deepEqual(decodeUuid('ffffffff-ffff-ffff-ffff-ffffffffffff'), {
      format: 'uuid',
      id: 'ffffffff-ffff-ffff-ffff-ffffffffffff',
      version: 15,
      variant: 'future',
    });
    assert.equal(decodeUuid('01890a5d-ac96-774b-dcce-b302099a8057').variant, 'microsoft');
  });
});
