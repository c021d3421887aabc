import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isIdMintError } from './errors.ts';
import { RandomPool, webCryptoFill } from './random-pool.ts';

/** A source counting 0, 1, 2, ... across fills, so every byte handed out is identifiable. */
function countingFill(): { fill: (bytes: Uint8Array) => void; calls: () => number } {
  let next = 0;
  let calls = 0;
  return {
    fill: (bytes) => {
      calls++;
      for (let i = 0; i < bytes.length; i++) bytes[i] = next++ & 0xff;
    },
    calls: () => calls,
  };
}

describe('RandomPool', () => {
  it('hands out every byte at most once, refilling when a claim does not fit', () => {
    const source = countingFill();
    const pool = new RandomPool(source.fill, 16);
    const a = pool.claim(6);
    const b = pool.claim(6);
    assert.deepEqual([...pool.bytes.subarray(a, a + 6)], [0, 1, 2, 3, 4, 5]);
    assert.deepEqual([...pool.bytes.subarray(b, b + 6)], [6, 7, 8, 9, 10, 11]);
    const c = pool.claim(6); // 4 bytes left: a new block
    assert.equal(source.calls(), 2);
    assert.deepEqual([...pool.bytes.subarray(c, c + 6)], [16, 17, 18, 19, 20, 21]);
  });

  it('uint32 and fillBytes draw fresh bytes', () => {
    const source = countingFill();
    const pool = new RandomPool(source.fill, 16);
    assert.equal(pool.uint32(), 0x03020100);
    const target = new Uint8Array(20);
    pool.fillBytes(target, 2, 18);
    // 12 bytes left cannot hold a 16-byte chunk: a new block (16-31), then another for the last 2.
    assert.deepEqual([...target], [0, 0, ...Array.from({ length: 16 }, (_, i) => 16 + i), 32, 33]);
  });

  it('by default draws from Web Crypto: 64 KiB of output look uniform', () => {
    const pool = new RandomPool();
    const counts = new Array<number>(256).fill(0);
    for (let i = 0; i < 65_536; i++) {
      const byte = pool.bytes[pool.claim(1)] as number;
      counts[byte] = (counts[byte] ?? 0) + 1;
    }
    // Each count is Binomial(65536, 1/256): mean 256, sd 16; 7 sd is a bug, not bad luck.
    for (const count of counts)
      assert.ok(
        Math.abs(count - 256) < 112,
        `byte counts ${Math.min(...counts)}..${Math.max(...counts)}`,
      );
    const bytes = new Uint8Array(32);
    webCryptoFill(bytes);
    assert.ok(bytes.some((b) => b !== 0));
  });

  it('validates its options', () => {
    assert.throws(
      () => new RandomPool('x' as never),
      (e: unknown) => isIdMintError(e, 'INVALID_ARGUMENT'),
    );
    for (const size of [8, 17, 70_000])
      assert.throws(
        () => new RandomPool(undefined, size),
        (e: unknown) => isIdMintError(e, 'INVALID_ARGUMENT'),
      );
  });
});
