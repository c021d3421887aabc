import { IdMintError } from './errors.ts';

/**
 * Fills `bytes` with cryptographically strong random bytes, as Web Crypto's `getRandomValues`
 * does. Injectable so tests can drive edge cases (all ones, a fixed seed) deterministically.
 */
export type RandomFill = (bytes: Uint8Array) => void;

/**
 * The default source: Web Crypto's `getRandomValues`, present as `globalThis.crypto` in Node
 * (>= 19) and in browsers, so core needs no `node:crypto` import for randomness. Never
 * `Math.random`: its output is predictable from a few samples, which would let anyone guess the
 * random parts of IDs.
 */
export const webCryptoFill: RandomFill = (bytes) => {
  globalThis.crypto.getRandomValues(bytes);
};

/** `getRandomValues` refuses more than 65,536 bytes per call (Web Crypto's quota). */
const MAX_POOL_BYTES = 65_536;

/**
 * Random bytes drawn from the source in blocks and handed out a word at a time.
 *
 * One `getRandomValues` call costs about as much as building an ID; drawing 4 KiB at once and
 * slicing it makes randomness a typed-array read on the hot path. Every word is handed out once:
 * nothing is reused, so pooling changes the cost, not the randomness.
 */
export class RandomPool {
  /**
   * The pool itself. Read only the bytes {@link claim} just handed out: generators read them
   * in place, which saves a copy per ID on the hot path.
   */
  readonly bytes: Uint8Array;
  readonly #fill: RandomFill;
  /** Next unread byte; equal to `bytes.length` when the pool is used up. */
  #next: number;

  /**
   * @param fill source of random bytes; default {@link webCryptoFill}.
   * @param size pool size in bytes, a multiple of 4 from 16 to 65,536; default 4096.
   */
  constructor(fill: RandomFill = webCryptoFill, size = 4096) {
    if (typeof fill !== 'function') {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `random must be a function filling a Uint8Array with random bytes, got ${typeof fill}`,
      );
    }
    if (!Number.isInteger(size) || size < 16 || size > MAX_POOL_BYTES || size % 4 !== 0) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `random pool size must be a multiple of 4 from 16 to ${MAX_POOL_BYTES} bytes, got ` +
          `${String(size)}`,
      );
    }
    this.#fill = fill;
    this.bytes = new Uint8Array(size);
    this.#next = size;
  }

  /**
   * Hands out `length` (1 to 16) fresh random bytes: returns the offset in {@link bytes} where
   * they start. The rest of a block too short for them is skipped, never handed out twice.
   */
  claim(length: number): number {
    let at = this.#next;
    if (at + length > this.bytes.length) {
      this.#fill(this.bytes);
      at = 0;
    }
    this.#next = at + length;
    return at;
  }

  /** 32 random bits as an unsigned integer. */
  uint32(): number {
    const at = this.claim(4);
    const b = this.bytes;
    return (
      ((b[at] as number) |
        ((b[at + 1] as number) << 8) |
        ((b[at + 2] as number) << 16) |
        ((b[at + 3] as number) << 24)) >>>
      0
    );
  }

  /** Writes `length` random bytes into `target` from `offset`. */
  fillBytes(target: Uint8Array, offset: number, length: number): void {
    for (let done = 0; done < length; done += 16) {
      const n = Math.min(16, length - done);
      const at = this.claim(n);
      target.set(this.bytes.subarray(at, at + n), offset + done);
    }
  }
}
