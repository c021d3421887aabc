import type { Clock } from '../ports/clock.ts';
import type { RollbackPolicyOptions } from './clock-policy.ts';
import { IdMintError } from './errors.ts';
import { TimeOrderedGenerator, describeInput } from './family-support.ts';
import { HEX2, bytesToHex, hexToBytesInto } from './hex.ts';
import { RandomPool, type RandomFill } from './random-pool.ts';

// MongoDB ObjectId (the BSON ObjectId spec): 12 bytes, written as 24 lowercase hex digits.
//
//   bytes 0-3   seconds since the Unix epoch, big-endian (unsigned: good until 2106-02-07)
//   bytes 4-8   5 random bytes drawn once per generator ("unique to a machine and process")
//   bytes 9-11  24-bit counter, big-endian, starting at a random value, +1 per ObjectId
//
// The counter wraps at 2^24 as the spec says, but never inside a second it already used up:
// the generator remembers the counter of the second's first ObjectId, and when the next value
// would reach it again (2^24 ObjectIds in one second), it waits for the next second. bson's
// `new ObjectId()` wraps regardless and repeats an ObjectId above 16.7 million per second.

const MAX_SECONDS = 2 ** 32 - 1;
const COUNTER_MASK = 0xff_ffff;

/** Options for {@link ObjectIdGenerator}. */
export interface ObjectIdOptions {
  /** Clock to read time from (core never reads the system time itself). */
  readonly clock: Clock;
  /**
   * When the clock reads earlier than the last ObjectId's second: `borrow` (default: keep that
   * second, within `maxLeadMs`), `wait` or `refuse`. See docs/formats.md.
   */
  readonly rollback?: RollbackPolicyOptions;
  /** Source of random bytes; default Web Crypto's `getRandomValues` (never `Math.random`). */
  readonly random?: RandomFill;
}

/**
 * Generates MongoDB ObjectIds. Unique for the life of the generator (a second's 2^24 counter
 * values are never used twice) and, across generators, by their 5 random bytes and random
 * counter start. Increasing from one ObjectId to the next, except where the counter wraps from
 * 0xffffff to 0 inside a second (once per 2^24 ObjectIds), as with every driver.
 */
export class ObjectIdGenerator extends TimeOrderedGenerator {
  /** The 5 per-generator random bytes. */
  readonly #processRandom: Uint8Array;
  #second = -1;
  /** Counter of the last ObjectId. */
  #counter: number;
  /**
   * Counter of the current second's first ObjectId: reaching it again means the second is used up.
   */
  #secondStart = 0;
  /** The first 18 hex digits: seconds and the per-generator random bytes. */
  #prefix = '';
  readonly #processHex: string;

  constructor(options: ObjectIdOptions) {
    super(options, {
      generator: 'ObjectIdGenerator',
      family: 'ObjectId',
      unitMs: 1000,
      maxUnit: MAX_SECONDS,
    });
    const pool = new RandomPool(options.random, 16);
    const at = pool.claim(8);
    this.#processRandom = pool.bytes.slice(at, at + 5);
    this.#processHex = bytesToHex(this.#processRandom);
    // The first ObjectId takes counter + 1, so this is "a random starting value" all the same.
    this.#counter =
      ((pool.bytes[at + 5] as number) << 16) |
      ((pool.bytes[at + 6] as number) << 8) |
      (pool.bytes[at + 7] as number);
  }

  /** The per-generator random bytes (bytes 4-8 of every ObjectId it makes), as 10 hex digits. */
  get processRandom(): string {
    return this.#processHex;
  }

  /** The next ObjectId as 24 lowercase hex digits. */
  nextString(): string {
    this.#advance();
    const c = this.#counter;
    return this.#prefix + HEX2[c >>> 16] + HEX2[(c >>> 8) & 0xff] + HEX2[c & 0xff];
  }

  /** The next ObjectId as 12 bytes. */
  next(): Uint8Array {
    this.#advance();
    const bytes = new Uint8Array(12);
    const s = this.#second;
    bytes[0] = s >>> 24;
    bytes[1] = (s >>> 16) & 0xff;
    bytes[2] = (s >>> 8) & 0xff;
    bytes[3] = s & 0xff;
    bytes.set(this.#processRandom, 4);
    const c = this.#counter;
    bytes[9] = c >>> 16;
    bytes[10] = (c >>> 8) & 0xff;
    bytes[11] = c & 0xff;
    return bytes;
  }

  #advance(): void {
    const now = this.clock.now();
    const counter = (this.#counter + 1) & COUNTER_MASK;
    // Fast path: the clock is inside the current second, and the counter has not come round to
    // where this second started.
    if (
      now >= this.#second * 1000 &&
      now < this.#second * 1000 + 1000 &&
      counter !== this.#secondStart
    ) {
      this.#counter = counter;
      return;
    }
    let second = this.time.current(now);
    if (second === this.#second && counter === this.#secondStart) {
      // All 2^24 counter values of this second are used: wait for the next second (never
      // borrowed ahead: an ObjectId's time is its creation second, and tools read it as such).
      second = this.time.following(false);
    }
    if (second !== this.#second) {
      this.#second = second;
      this.#secondStart = counter;
      this.#prefix =
        HEX2[second >>> 24] +
        (HEX2[(second >>> 16) & 0xff] as string) +
        HEX2[(second >>> 8) & 0xff] +
        HEX2[second & 0xff] +
        this.#processHex;
    }
    this.#counter = counter;
  }
}

/** A decoded ObjectId. */
export interface DecodedObjectId {
  readonly format: 'objectid';
  /** 24 lowercase hex digits. */
  readonly id: string;
  /** The creation second, as ms since the Unix epoch (a multiple of 1000). */
  readonly timestamp: number;
  readonly date: Date;
  /** Bytes 4-8: the generating process's random value, 10 hex digits. */
  readonly processRandom: string;
  /** Bytes 9-11: the counter. */
  readonly counter: number;
}

const OBJECT_ID_SHAPE = /^[0-9a-fA-F]{24}$/;

/** True when `text` is an ObjectId: exactly 24 hex digits (either case). */
export function isObjectId(text: unknown): text is string {
  return typeof text === 'string' && OBJECT_ID_SHAPE.test(text);
}

/** The 12 bytes of an ObjectId string; INVALID_ID for anything that is not 24 hex digits. */
export function objectIdToBytes(text: string): Uint8Array {
  if (!isObjectId(text)) {
    throw new IdMintError(
      'INVALID_ID',
      `${describeInput(text)} is not an ObjectId: expected 24 hex digits`,
    );
  }
  const bytes = new Uint8Array(12);
  hexToBytesInto(text, 0, bytes, 0, 12);
  return bytes;
}

/** The canonical (lowercase hex) string of 12 ObjectId bytes. */
export function objectIdFromBytes(bytes: Uint8Array): string {
  if (!(bytes instanceof Uint8Array) || bytes.length !== 12) {
    throw new IdMintError(
      'INVALID_ID',
      `a binary ObjectId is 12 bytes, got ` +
        `${bytes instanceof Uint8Array ? `${bytes.length} bytes` : typeof bytes}`,
    );
  }
  return bytesToHex(bytes);
}

/** Decodes an ObjectId (24 hex digits or 12 bytes): creation second, process random, counter. */
export function decodeObjectId(input: string | Uint8Array): DecodedObjectId {
  const bytes = typeof input === 'string' ? objectIdToBytes(input) : input;
  const id = objectIdFromBytes(bytes);
  const b = (i: number) => bytes[i] as number;
  const seconds = ((b(0) << 24) >>> 0) + (b(1) << 16) + (b(2) << 8) + b(3);
  const timestamp = seconds * 1000;
  return {
    format: 'objectid',
    id,
    timestamp,
    date: new Date(timestamp),
    processRandom: bytesToHex(bytes, 4, 5),
    counter: (b(9) << 16) | (b(10) << 8) | b(11),
  };
}
