import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { randomBigInt, randomInt, seededRandom, testSeed } from '../../test/support/random.ts';
import { isIdMintError } from './errors.ts';
import {
  LAYOUT_PRESETS,
  composeId,
  decomposeId,
  defineLayout,
  getLayout,
  parseId,
  resolveLayout,
  type LayoutSpec,
} from './layout.ts';

const valid: LayoutSpec = { name: 't', timeBits: 41, workerBits: 10, sequenceBits: 12, epoch: 0 };

function assertLayoutInvalid(spec: LayoutSpec, pattern: RegExp, nowMs?: number): void {
  assert.throws(
    () => defineLayout(spec, nowMs),
    (error: unknown) => isIdMintError(error, 'LAYOUT_INVALID') && pattern.test(error.message),
  );
}

describe('layout validation', () => {
  it('accepts a 63-bit layout and derives its limits', () => {
    const layout = defineLayout(valid);
    assert.equal(layout.maxWorkerId, 1023);
    assert.equal(layout.maxSequence, 4095);
    assert.equal(layout.timeShift, 22);
    assert.equal(layout.maxId, 2n ** 63n - 1n);
    assert.equal(layout.maxIdsPerSecond, 4_096_000);
    assert.equal(layout.expiresAtMs, 2 ** 41);
  });

  it('rejects bits that do not total 63, naming the sum', () => {
    assertLayoutInvalid({ ...valid, timeBits: 42 }, /bits must total 63.*42\+0\+10\+12 = 64/);
    assertLayoutInvalid({ ...valid, timeBits: 40 }, /bits must total 63/);
  });

  it('rejects a 53-bit layout whose fields add up to 63', () => {
    assertLayoutInvalid({ ...valid, totalBits: 53 }, /bits must total 53/);
  });

  it('rejects non-integer, negative and oversized bit counts', () => {
    assertLayoutInvalid(
      { ...valid, sequenceBits: 12.5 },
      /sequenceBits must be an integer from 1 to 30, got 12.5/,
    );
    assertLayoutInvalid(
      { ...valid, workerBits: -1 },
      /workerBits must be an integer from 0 to 31, got -1/,
    );
    assertLayoutInvalid(
      { ...valid, timeBits: 0, workerBits: 31, sequenceBits: 30 },
      /timeBits must be an integer from 1 to 53/,
    );
    assertLayoutInvalid(
      { ...valid, datacenterBits: 5, workerBits: 28, timeBits: 18, sequenceBits: 12 },
      /datacenterBits \+ workerBits must be at most 31/,
    );
  });

  it('rejects bad epochs and time units', () => {
    assertLayoutInvalid({ ...valid, epoch: -1 }, /epoch must be a non-negative integer/);
    assertLayoutInvalid({ ...valid, epoch: 'yesterday' }, /epoch must be an ISO-8601 date/);
    assertLayoutInvalid({ ...valid, epoch: 2_000_000 }, /epoch .* is in the future/, 1_000_000);
    assertLayoutInvalid({ ...valid, timeUnitMs: 0 }, /timeUnitMs must be an integer from 1/);
    assertLayoutInvalid({ ...valid, timeUnitMs: 1.5 }, /timeUnitMs/);
  });

  it('rejects a time field that would outlast JavaScript dates', () => {
    assertLayoutInvalid(
      { ...valid, timeBits: 53, workerBits: 0, sequenceBits: 10 },
      /outlast year 275760/,
    );
  });

  it('names unknown presets and lists the known ones', () => {
    assert.throws(
      () => getLayout('lief'),
      /unknown layout "lief"; known layouts: idmint, leaf, twitter, js-safe, baidu/,
    );
  });

  it('resolves names, specs and layouts alike', () => {
    const leaf = getLayout('leaf');
    assert.equal(resolveLayout('leaf').epochMs, leaf.epochMs);
    assert.equal(resolveLayout(leaf), leaf);
    assert.equal(resolveLayout(undefined).name, 'idmint');
    assert.equal(resolveLayout(valid).maxSequence, 4095);
  });
});

describe('presets', () => {
  it('leaf matches Meituan Leaf: 41/10/12 bits of ms since the Twitter epoch', () => {
    const leaf = getLayout('leaf');
    assert.deepEqual(
      [leaf.timeBits, leaf.workerBits, leaf.sequenceBits, leaf.epochMs, leaf.timeUnitMs],
      [41, 10, 12, 1288834974657, 1],
    );
    assert.equal(new Date(leaf.expiresAtMs).toISOString(), '2080-07-10T17:30:30.209Z');
  });

  it('leaf decodes an ID exactly as Leaf composes it', () => {
    // Leaf: ((timestamp - twepoch) << 22) | (workerId << 12) | sequence
    const timestamp = 1_700_000_000_123;
    const id = (BigInt(timestamp - 1288834974657) << 22n) | (7n << 12n) | 42n;
    const parts = decomposeId(id, getLayout('leaf'));
    assert.deepEqual(
      { ...parts },
      { timestamp, date: new Date(timestamp), workerId: 7, sequence: 42 },
    );
  });

  it('twitter splits the node field into 5 datacenter and 5 worker bits', () => {
    const twitter = getLayout('twitter');
    const id = composeId(twitter, {
      timestamp: 1_600_000_000_000,
      datacenterId: 31,
      workerId: 1,
      sequence: 9,
    });
    assert.equal((id >> 12n) & 0x3ffn, (31n << 5n) | 1n);
    assert.equal(decomposeId(id, twitter).datacenterId, 31);
  });

  it('js-safe IDs stay below 2^53 for the whole life of the layout', () => {
    const safe = getLayout('js-safe');
    assert.equal(safe.maxId, 2n ** 53n - 1n);
    const last = composeId(safe, {
      timestamp: safe.expiresAtMs - 1,
      workerId: safe.maxWorkerId,
      sequence: safe.maxSequence,
    });
    assert.equal(last, 2n ** 53n - 1n);
    assert.ok(Number.isSafeInteger(Number(last)));
    assert.equal(safe.maxIdsPerSecond, 64_000);
    assert.equal(safe.maxWorkerId, 63);
    assert.ok(new Date(safe.expiresAtMs).getUTCFullYear() >= 2095);
  });

  it("baidu's default layout ran out on 2024-11-20", () => {
    assert.equal(new Date(getLayout('baidu').expiresAtMs).toISOString().slice(0, 10), '2024-11-20');
  });

  it('the default preset has a recent epoch and lasts past 2090', () => {
    const layout = getLayout('idmint');
    assert.ok(layout.epochMs >= Date.UTC(2025, 0, 1));
    assert.ok(new Date(layout.expiresAtMs).getUTCFullYear() > 2090);
  });
});

describe('parseId is strict', () => {
  const layout = getLayout('idmint');
  for (const bad of [
    '',
    ' 1',
    '1 ',
    '+1',
    '-1',
    '01',
    '1.0',
    '1e3',
    '0x10',
    'abc',
    '١٢',
    '9223372036854775808',
    '99999999999999999999999',
  ]) {
    it(`rejects ${JSON.stringify(bad)}`, () => {
      assert.throws(
        () => parseId(bad, layout),
        (error: unknown) => isIdMintError(error, 'INVALID_ID'),
      );
    });
  }
  for (const bad of [-1, 1.5, Number.NaN, Infinity, 2 ** 53, -1n, 2n ** 63n, null, undefined, {}]) {
    it(`rejects ${typeof bad === 'bigint' ? `${bad}n` : String(bad)}`, () => {
      assert.throws(
        () => parseId(bad, layout),
        (error: unknown) => isIdMintError(error, 'INVALID_ID'),
      );
    });
  }
  it('accepts the extremes of a 63-bit layout in every form', () => {
    assert.equal(parseId('0', layout), 0n);
    assert.equal(parseId('9223372036854775807', layout), 2n ** 63n - 1n);
    assert.equal(parseId(2n ** 63n - 1n, layout), 2n ** 63n - 1n);
    assert.equal(parseId(Number.MAX_SAFE_INTEGER, layout), 2n ** 53n - 1n);
  });
  it('rejects IDs the layout cannot represent', () => {
    assert.throws(
      () => parseId(2n ** 53n, getLayout('js-safe')),
      /above 9007199254740991, the largest ID of layout "js-safe"/,
    );
  });
});

describe('compose and decompose round-trip over the whole bit range', () => {
  const seed = testSeed();
  for (const name of LAYOUT_PRESETS) {
    it(`${name} (seed ${seed})`, () => {
      const layout = getLayout(name);
      const random = seededRandom(seed);
      const pick = (max: number): number => {
        const r = random();
        return r < 0.05 ? 0 : r < 0.1 ? max : randomInt(random, max);
      };
      for (let i = 0; i < 20_000; i++) {
        const units = pick(layout.maxTimeUnits);
        const parts = {
          timestamp: layout.epochMs + units * layout.timeUnitMs,
          datacenterId: pick(layout.maxDatacenterId),
          workerId: pick(layout.maxWorkerId),
          sequence: pick(layout.maxSequence),
        };
        const id = composeId(layout, parts);
        assert.ok(
          id >= 0n && id <= layout.maxId,
          `id ${id} out of range for ${JSON.stringify(parts)}`,
        );
        const back = decomposeId(id, layout);
        assert.equal(back.timestamp, parts.timestamp);
        assert.equal(back.workerId, parts.workerId);
        assert.equal(back.sequence, parts.sequence);
        assert.equal(back.datacenterId, layout.datacenterBits > 0 ? parts.datacenterId : undefined);
        assert.equal(decomposeId(id.toString(), layout).timestamp, parts.timestamp);

        // The other direction: any representable ID decodes to parts that compose back to it.
        const anyId = randomBigInt(random, layout.maxId);
        const p = decomposeId(anyId, layout);
        assert.equal(composeId(layout, { ...p, datacenterId: p.datacenterId ?? 0 }), anyId);
      }
    });
  }

  it('composeId rejects parts that do not fit their field', () => {
    const layout = getLayout('idmint');
    const ok = { timestamp: layout.epochMs, workerId: 0, sequence: 0 };
    assert.throws(
      () => composeId(layout, { ...ok, workerId: 1024 }),
      /workerId 1024 does not fit layout "idmint" \(field holds 0 to 1023\)/,
    );
    assert.throws(() => composeId(layout, { ...ok, sequence: 4096 }), /sequence 4096/);
    assert.throws(() => composeId(layout, { ...ok, timestamp: layout.epochMs - 1 }), /timestamp/);
    assert.throws(() => composeId(layout, { ...ok, timestamp: layout.expiresAtMs }), /timestamp/);
    assert.throws(
      () => composeId(layout, { ...ok, datacenterId: 1 }),
      /datacenterId 1 does not fit/,
    );
  });
});

describe('decomposeId, parseId and composeId take a layout, a spec or a preset name', () => {
  const throwsCode = (
    fn: () => unknown,
    code: 'LAYOUT_INVALID' | 'INVALID_ID' | 'INVALID_ARGUMENT',
    pattern: RegExp,
  ) =>
    assert.throws(fn, (error: unknown) => {
      assert.ok(isIdMintError(error, code), `expected IdMintError ${code}, got ${String(error)}`);
      assert.match(error.message, pattern);
      return true;
    });
  const twitter = getLayout('twitter');
  const id = composeId(twitter, {
    timestamp: twitter.epochMs + 5000,
    datacenterId: 3,
    workerId: 7,
    sequence: 9,
  });

  it('with no layout, decodes as the default layout (idmint)', () => {
    const idmint = getLayout('idmint');
    const mine = composeId(idmint, { timestamp: idmint.epochMs + 1234, workerId: 7, sequence: 2 });
    // Before: a TypeError reading the missing layout's fields.
    assert.deepEqual(decomposeId(mine), decomposeId(mine, idmint));
    assert.equal(decomposeId(mine.toString()).workerId, 7);
    assert.equal(parseId(mine.toString()), mine);
  });

  it('with a preset name or a spec, decodes as that layout', () => {
    assert.deepEqual(decomposeId(id, 'twitter'), decomposeId(id, twitter));
    assert.equal(decomposeId(id.toString(), 'twitter').datacenterId, 3);
    const spec = {
      timeBits: 41,
      datacenterBits: 5,
      workerBits: 5,
      sequenceBits: 12,
      epoch: twitter.epochMs,
    };
    assert.deepEqual(decomposeId(id, spec).workerId, 7);
    const parts = { timestamp: twitter.epochMs + 5000, datacenterId: 3, workerId: 7, sequence: 9 };
    assert.equal(composeId('twitter', parts), id);
    assert.equal(parseId(id, 'twitter'), id);
  });

  it('bad input is an IdMintError with a stable code, never a TypeError', () => {
    throwsCode(() => decomposeId(id, 'twiter'), 'LAYOUT_INVALID', /unknown layout "twiter"/);
    throwsCode(() => decomposeId(id, null as unknown as string), 'LAYOUT_INVALID', /got null/);
    throwsCode(() => decomposeId(id, 42 as unknown as string), 'LAYOUT_INVALID', /got a number/);
    throwsCode(() => decomposeId(id, {} as LayoutSpec), 'LAYOUT_INVALID', /timeBits/);
    throwsCode(() => decomposeId(undefined), 'INVALID_ID', /got undefined/);
    throwsCode(() => decomposeId('12abc'), 'INVALID_ID', /not a decimal integer/);
    throwsCode(() => parseId('1', null as unknown as string), 'LAYOUT_INVALID', /got null/);
    throwsCode(
      () => defineLayout(null as unknown as LayoutSpec),
      'LAYOUT_INVALID',
      /spec must be an object/,
    );
    const noParts = null as unknown as { timestamp: number; workerId: number; sequence: number };
    throwsCode(() => composeId('idmint', noParts), 'INVALID_ARGUMENT', /needs \{ timestamp/);
  });
});
