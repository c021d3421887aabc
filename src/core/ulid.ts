import type { Clock } from '../ports/clock.ts';
import type { RollbackPolicyOptions } from './clock-policy.ts';
import { IdMintError } from './errors.ts';
import { TimeOrderedGenerator, describeInput } from './family-support.ts';
import { RandomPool, type RandomFill } from './random-pool.ts';

// ULID (github.com/ulid/spec): 128 bits, written as 26 characters of Crockford's base32.
//
//   48 bits  time: ms since the Unix epoch              10 characters (the first is 0-7)
//   80 bits  randomness                                 16 characters
//
// Monotonic, as the spec's monotonicity section says: within one millisecond each ULID's random
// part is the previous one plus 1 (with carry); if it would pass 2^80 - 1 the generator throws
// (MONOTONIC_OVERFLOW) rather than wrap. A new millisecond draws 80 fresh random bits.
//
// The random part is held as two 40-bit numbers (exact in a double) so the hot path adds 1 to a
// number instead of a bigint, and only its last 4 characters are rebuilt per ID.

/** Crockford's base32 alphabet, as the ULID spec uses it: no I, L, O or U. */
export const CROCKFORD_BASE32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

const MAX_ULID_MS = 2 ** 48 - 1;
const MAX_40 = 2 ** 40 - 1;
/** Below 2^40 and above this, a 40-bit half is carried by its 20 low bits rolling to 0. */
const LOW_20 = 0xfffff;

/**
 * `PAIR[v]`: the 10-bit value `v` as two base32 characters. Typed readonly, not frozen (see
 * hex.ts).
 */
const PAIR: readonly string[] = Array.from(
  { length: 1024 },
  (_, v) => `${CROCKFORD_BASE32[v >>> 5]}${CROCKFORD_BASE32[v & 31]}`,
);

/** Value of a Crockford character by char code (either case), -1 for anything else. */
const BASE32_VALUE: Int8Array = (() => {
  const table = new Int8Array(128).fill(-1);
  for (let i = 0; i < 32; i++) {
    table[CROCKFORD_BASE32.charCodeAt(i)] = i;
    table[CROCKFORD_BASE32.toLowerCase().charCodeAt(i)] = i;
  }
  return table;
})();

/** Options for {@link UlidGenerator}. */
export interface UlidOptions {
  /** Clock to read time from (core never reads the system time itself). */
  readonly clock: Clock;
  /**
   * When the clock reads earlier than the last ULID's millisecond: `borrow` (default: keep that
   * millisecond and count on, as the ULID spec's monotonic factory does, within `maxLeadMs`),
   * `wait` or `refuse`. See docs/formats.md.
   */
  readonly rollback?: RollbackPolicyOptions;
  /** Source of random bytes; default Web Crypto's `getRandomValues` (never `Math.random`). */
  readonly random?: RandomFill;
}

/**
 * Generates monotonic ULIDs: strictly increasing, as strings and as bytes, for the life of the
 * generator, unique across generators by their 80 random bits.
 */
export class UlidGenerator extends TimeOrderedGenerator {
  readonly #pool: RandomPool;
  #ms = -1;
  /** High and low 40 bits of the last ULID's random part. */
  #high = 0;
  #low = 0;
  /** The first 22 characters: time, the high 40 random bits, and the low 40 bits' top 20. */
  #prefix = '';

  constructor(options: UlidOptions) {
    super(options, { generator: 'UlidGenerator', family: 'ULID', unitMs: 1, maxUnit: MAX_ULID_MS });
    this.#pool = new RandomPool(options.random);
  }

  /** The next ULID: 26 characters of Crockford base32, upper case. */
  nextString(): string {
    const now = this.clock.now();
    const low = this.#low + 1;
    // Fast path: same millisecond and no carry out of the low 20 bits, so the prefix holds.
    if (now !== this.#ms || (low & LOW_20) === 0) this.#advance(now);
    else this.#low = low;
    // `& 1023` and `>>> 10` read the low 32 bits of the 40-bit number, which is all they need.
    const l = this.#low;
    return this.#prefix + PAIR[(l >>> 10) & 1023] + PAIR[l & 1023];
  }

  /** The next ULID as 16 bytes (big-endian: 6 bytes of time, 10 of randomness). */
  next(): Uint8Array {
    const now = this.clock.now();
    const low = this.#low + 1;
    if (now !== this.#ms || (low & LOW_20) === 0) this.#advance(now);
    else this.#low = low;
    const bytes = new Uint8Array(16);
    writeUint48(bytes, 0, this.#ms);
    writeUint40(bytes, 6, this.#high);
    writeUint40(bytes, 11, this.#low);
    return bytes;
  }

  #advance(now: number): void {
    const ms = this.time.current(now);
    if (ms !== this.#ms) {
      const pool = this.#pool;
      const at = pool.claim(10);
      this.#ms = ms;
      this.#high = readUint40(pool.bytes, at);
      this.#low = readUint40(pool.bytes, at + 5);
    } else {
      let low = this.#low + 1;
      if (low > MAX_40) {
        if (this.#high === MAX_40) {
          // The state stays at its maximum, so every further call in this millisecond refuses too.
          throw new IdMintError(
            'MONOTONIC_OVERFLOW',
            `ULID: the 80-bit random part is at its maximum for ${new Date(ms).toISOString()}`,
            { details: { timestamp: ms } },
          );
        }
        this.#high++;
        low = 0;
      }
      this.#low = low;
    }
    this.#prefix = encodeTime(this.#ms) + encode40(this.#high) + encode40(this.#low).slice(0, 4);
  }
}

/** A decoded ULID. */
export interface DecodedUlid {
  readonly format: 'ulid';
  /** Canonical form: upper case. */
  readonly id: string;
  /** ms since the Unix epoch. */
  readonly timestamp: number;
  readonly date: Date;
  /** The 80-bit random part, as 20 hex digits (a string, so the result is plain JSON). */
  readonly random: string;
}

/** True when `text` is a ULID: 26 Crockford base32 characters (either case), the first 0-7. */
export function isUlid(text: unknown): text is string {
  if (typeof text !== 'string' || text.length !== 26) return false;
  for (let i = 0; i < 26; i++) if (base32Digit(text, i) < 0) return false;
  return base32Digit(text, 0) <= 7;
}

/** The 16 bytes of a ULID string; INVALID_ID for anything that is not one. */
export function ulidToBytes(text: string): Uint8Array {
  if (typeof text !== 'string' || text.length !== 26) {
    throw new IdMintError(
      'INVALID_ID',
      `${describeInput(text)} is not a ULID: expected 26 characters of Crockford base32`,
    );
  }
  // 26 characters hold 130 bits; the first character carries only the top 3 of the 128.
  let carry = 0n;
  for (let i = 0; i < 26; i++) {
    const digit = base32Digit(text, i);
    if (digit < 0) {
      throw new IdMintError(
        'INVALID_ID',
        `${describeInput(text)} is not a ULID: "${text[i]}" at position ${i + 1} is not in ` +
          `Crockford's base32 (0-9, A-Z without I, L, O, U)`,
      );
    }
    carry = (carry << 5n) | BigInt(digit);
  }
  if (carry >> 128n !== 0n) {
    throw new IdMintError(
      'INVALID_ID',
      `${describeInput(text)} is not a ULID: its first character must be 0-7, or the value ` +
        `exceeds 128 bits`,
    );
  }
  const bytes = new Uint8Array(16);
  for (let i = 15; i >= 0; i--, carry >>= 8n) bytes[i] = Number(carry & 0xffn);
  return bytes;
}

/** The canonical (upper-case) string of 16 ULID bytes. */
export function ulidFromBytes(bytes: Uint8Array): string {
  if (!(bytes instanceof Uint8Array) || bytes.length !== 16) {
    throw new IdMintError(
      'INVALID_ID',
      `a binary ULID is 16 bytes, got ` +
        `${bytes instanceof Uint8Array ? `${bytes.length} bytes` : typeof bytes}`,
    );
  }
  return (
    encodeTime(readUint48(bytes, 0)) +
    encode40(readUint40(bytes, 6)) +
    encode40(readUint40(bytes, 11))
  );
}

/** Decodes a ULID (string or 16 bytes): its time and its random part. */
export function decodeUlid(input: string | Uint8Array): DecodedUlid {
  const bytes = typeof input === 'string' ? ulidToBytes(input) : input;
  const id = ulidFromBytes(bytes);
  const timestamp = readUint48(bytes, 0);
  let random = '';
  for (let i = 6; i < 16; i++) random += (bytes[i] as number).toString(16).padStart(2, '0');
  return { format: 'ulid', id, timestamp, date: new Date(timestamp), random };
}

function base32Digit(text: string, index: number): number {
  const code = text.charCodeAt(index);
  return code < 128 ? (BASE32_VALUE[code] as number) : -1;
}

/** 48-bit ms as 10 base32 characters. */
function encodeTime(ms: number): string {
  // 50 bits of characters for 48 of value: the top character takes 3 bits (0-7).
  const high = Math.floor(ms / 2 ** 30); // top 18 bits -> 4 characters (20 bits)
  const low = ms % 2 ** 30; // 30 bits -> 6 characters
  return (
    PAIR[high >>> 10] +
    (PAIR[high & 1023] as string) +
    PAIR[low >>> 20] +
    PAIR[(low >>> 10) & 1023] +
    PAIR[low & 1023]
  );
}

/** A 40-bit number as 8 base32 characters. */
function encode40(value: number): string {
  const high = Math.floor(value / 2 ** 20);
  const low = value % 2 ** 20;
  return (PAIR[high >>> 10] as string) + PAIR[high & 1023] + PAIR[low >>> 10] + PAIR[low & 1023];
}

function readUint40(bytes: Uint8Array, at: number): number {
  const b = (i: number) => bytes[at + i] as number;
  return b(0) * 2 ** 32 + ((b(1) << 24) >>> 0) + (b(2) << 16) + (b(3) << 8) + b(4);
}

function readUint48(bytes: Uint8Array, at: number): number {
  return (bytes[at] as number) * 2 ** 40 + readUint40(bytes, at + 1);
}

function writeUint40(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = Math.floor(value / 2 ** 32) & 0xff;
  bytes[at + 1] = (value >>> 24) & 0xff;
  bytes[at + 2] = (value >>> 16) & 0xff;
  bytes[at + 3] = (value >>> 8) & 0xff;
  bytes[at + 4] = value & 0xff;
}

function writeUint48(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = Math.floor(value / 2 ** 40) & 0xff;
  writeUint40(bytes, at + 1, value % 2 ** 40);
}
