// FF1 format-preserving encryption (NIST SP 800-38G, Rev. 1), with AES from node:crypto.
//
// Why node:crypto in core: FF1 is ten rounds of AES-CBC-MAC, and AES is CPU work, not I/O. Web
// Crypto's AES is asynchronous only, which would make every opaque ID a Promise; node:crypto's
// `createCipheriv` is synchronous and uses AES-NI. Core still imports no I/O module.
//
// Why hand-written: the npm registry has no well-kept, fast FF1. `@noble/ciphers` (audited) has
// one, but it expands the AES key and works in bigints on every call: measured here at 10,000 to
// 17,000 encryptions per second, against the 300,000 per second opaque IDs need. idmint's tests
// check this implementation against NIST's published samples and against noble's FF1 on many
// random inputs (docs/formats.md).
//
// What makes it fast: the CBC-MAC input P || Q is constant except its last bytes ([i] and
// NUMradix(B)), so the chaining value before them is computed once per (length, tweak); each
// round then costs one AES block. Values of up to 2^45 are kept in doubles, not bigints. And
// `encryptPairs` runs many inputs through each round together, so one native call encrypts a
// block for every input: the native call, not AES, is what costs.
import { createCipheriv, type Cipheriv } from 'node:crypto';
import { IdMintError } from './errors.ts';

/** Options for {@link createFf1}. */
export interface Ff1Options {
  /** AES key: 16, 24 or 32 bytes (AES-128, -192, -256). Never logged or put in an error. */
  readonly key: Uint8Array;
  /** Size of the numeral alphabet, 2 to 65,536. Default 10 (decimal digits). */
  readonly radix?: number;
}

/** A tweak: bytes, or a string taken as its UTF-8 bytes. At most {@link MAX_FF1_TWEAK_BYTES}. */
export type Ff1Tweak = Uint8Array | string;

/** An FF1 cipher for one key and radix. */
export interface Ff1 {
  readonly radix: number;
  /**
   * Encrypts a numeral string (each numeral an integer from 0 to radix - 1) to one of the same
   * length.
   */
  encrypt(numerals: ArrayLike<number>, tweak?: Ff1Tweak): number[];
  /** Inverts {@link encrypt} under the same key and tweak. */
  decrypt(numerals: ArrayLike<number>, tweak?: Ff1Tweak): number[];
  /**
   * {@link encrypt} over text in the alphabet `0-9a-z` (its first `radix` characters); radix <= 36.
   */
  encryptString(text: string, tweak?: Ff1Tweak): string;
  /** {@link decrypt} over text in the alphabet `0-9a-z`; radix <= 36. */
  decryptString(text: string, tweak?: Ff1Tweak): string;
  /** The cipher for one numeral-string length and tweak, prepared once for many uses. */
  prepare(length: number, tweak?: Ff1Tweak): Ff1Domain;
}

/**
 * FF1 for a fixed length `n` and tweak. A numeral string X is handled as its two halves' values:
 * `a` = NUMradix(X[1..u]) and `b` = NUMradix(X[u+1..n]), with u = floor(n/2) and v = n - u.
 */
export interface Ff1Domain {
  readonly length: number;
  /** Numerals in the first half (u) and the second half (v). */
  readonly u: number;
  readonly v: number;
  /** radix^u and radix^v: the halves' value ranges. */
  readonly modulusU: bigint;
  readonly modulusV: bigint;
  /**
   * True when both halves stay below 2^45, so {@link encryptPairs} (doubles) applies; false for
   * long strings, which take the bigint path of {@link encryptValue}.
   */
  readonly pairs: boolean;
  encrypt(numerals: ArrayLike<number>): number[];
  decrypt(numerals: ArrayLike<number>): number[];
  /**
   * Encrypts the numeral string whose value is `x` (0 <= x < radix^n), returning the result's
   * value.
   */
  encryptValue(x: bigint): bigint;
  decryptValue(x: bigint): bigint;
  /**
   * Encrypts `count` inputs in place, given as halves (`a[k]`, `b[k]`), all in one pass: each
   * Feistel round encrypts one AES block per input in a single native call. Needs {@link pairs}.
   */
  encryptPairs(a: Float64Array, b: Float64Array, count?: number): void;
  decryptPairs(a: Float64Array, b: Float64Array, count?: number): void;
}

/** Longest tweak accepted, in bytes (SP 800-38G leaves maxTlen to the implementation). */
export const MAX_FF1_TWEAK_BYTES = 1024;
/** Longest numeral string accepted (SP 800-38G allows up to 2^32 - 1; IDs need a few dozen). */
export const MAX_FF1_LENGTH = 4096;
/** SP 800-38G Rev. 1: the domain radix^n must have at least a million elements. */
const MIN_DOMAIN = 1_000_000;
/** Largest half-modulus kept in doubles: times 256 it stays exact (below 2^53). */
const PAIR_LIMIT = 2 ** 45;
/** Largest modulus for which Horner's rule may take two bytes per step (times 65,536 < 2^53). */
const TWO_BYTE_STEP_LIMIT = 2 ** 37;
const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';
const PREPARED_CACHE_SIZE = 64;
const utf8 = new TextEncoder();

/**
 * Creates an FF1 cipher (NIST SP 800-38G) over AES with `key`, for numeral strings in `radix`.
 * Bad options are INVALID_ARGUMENT; the key itself never appears in a message.
 */
export function createFf1(options: Ff1Options): Ff1 {
  if (options === null || typeof options !== 'object')
    throw new IdMintError('INVALID_ARGUMENT', 'createFf1 needs options { key, radix }');
  const key = options.key;
  if (
    !(key instanceof Uint8Array) ||
    (key.length !== 16 && key.length !== 24 && key.length !== 32)
  ) {
    const got = key instanceof Uint8Array ? `${key.length} bytes` : typeof key;
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `FF1 key must be 16, 24 or 32 bytes (AES-128, -192, -256), got ${got}`,
    );
  }
  const radix = options.radix ?? 10;
  if (!Number.isInteger(radix) || radix < 2 || radix > 65_536) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `FF1 radix must be an integer from 2 to 65536, got ${String(radix)}`,
    );
  }
  const aes = new AesBlocks(key);
  const cache = new Map<string, Ff1Domain>();

  const prepare = (length: number, tweak: Ff1Tweak = EMPTY): Ff1Domain => {
    const tweakBytes = toTweakBytes(tweak);
    const cacheKey = `${length}:${tweakKey(tweakBytes)}`;
    let domain = cache.get(cacheKey);
    if (domain === undefined) {
      domain = new PreparedFf1(aes, radix, length, tweakBytes);
      if (cache.size >= PREPARED_CACHE_SIZE) cache.clear();
      cache.set(cacheKey, domain);
    }
    return domain;
  };
  const requireAlphabet = (): void => {
    if (radix > 36)
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `encryptString needs radix 36 or less (alphabet 0-9a-z), this cipher has radix ${radix}`,
      );
  };
  return Object.freeze({
    radix,
    encrypt: (numerals: ArrayLike<number>, tweak?: Ff1Tweak) =>
      prepare(checkLength(numerals), tweak).encrypt(numerals),
    decrypt: (numerals: ArrayLike<number>, tweak?: Ff1Tweak) =>
      prepare(checkLength(numerals), tweak).decrypt(numerals),
    encryptString(text: string, tweak?: Ff1Tweak): string {
      requireAlphabet();
      return fromNumerals(prepare(checkLength(text), tweak).encrypt(toNumerals(text, radix)));
    },
    decryptString(text: string, tweak?: Ff1Tweak): string {
      requireAlphabet();
      return fromNumerals(prepare(checkLength(text), tweak).decrypt(toNumerals(text, radix)));
    },
    prepare,
  });
}

const EMPTY = new Uint8Array(0);

function checkLength(numerals: ArrayLike<number> | string): number {
  if (
    numerals === null ||
    (typeof numerals !== 'object' && typeof numerals !== 'string') ||
    typeof numerals.length !== 'number'
  ) {
    throw new IdMintError('INVALID_ARGUMENT', 'FF1 input must be an array of numerals');
  }
  return numerals.length;
}

function toTweakBytes(tweak: Ff1Tweak): Uint8Array {
  const bytes = typeof tweak === 'string' ? utf8.encode(tweak) : tweak;
  if (!(bytes instanceof Uint8Array))
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `FF1 tweak must be a Uint8Array or a string, got ${typeof tweak}`,
    );
  if (bytes.length > MAX_FF1_TWEAK_BYTES) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `FF1 tweak must be at most ${MAX_FF1_TWEAK_BYTES} bytes, got ${bytes.length}`,
    );
  }
  return bytes;
}

/** The tweak as hex, to key the prepared-domain cache. */
function tweakKey(bytes: Uint8Array): string {
  let out = '';
  for (const byte of bytes) out += byte.toString(16).padStart(2, '0');
  return out;
}

function toNumerals(text: string, radix: number): number[] {
  const numerals = new Array<number>(text.length);
  for (let i = 0; i < text.length; i++) {
    const value = ALPHABET.indexOf(text[i] as string);
    if (value < 0 || value >= radix) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `"${text[i]}" at position ${i + 1} is not a numeral of radix ${radix} (alphabet ` +
          `${ALPHABET.slice(0, radix)})`,
      );
    }
    numerals[i] = value;
  }
  return numerals;
}

function fromNumerals(numerals: readonly number[]): string {
  let out = '';
  for (const n of numerals) out += ALPHABET[n];
  return out;
}

/** AES-ECB encryption of whole blocks through one node:crypto cipher object. */
class AesBlocks {
  readonly #cipher: Cipheriv;

  constructor(key: Uint8Array) {
    this.#cipher = createCipheriv(`aes-${key.length * 8}-ecb`, key, null);
    // ECB without padding: every call returns exactly the blocks it was given, nothing buffered.
    this.#cipher.setAutoPadding(false);
  }

  /** Encrypts each 16-byte block of `blocks` independently. */
  encrypt(blocks: Uint8Array): Uint8Array {
    return this.#cipher.update(blocks);
  }
}

class PreparedFf1 implements Ff1Domain {
  readonly length: number;
  readonly u: number;
  readonly v: number;
  readonly modulusU: bigint;
  readonly modulusV: bigint;
  readonly pairs: boolean;
  readonly #aes: AesBlocks;
  readonly #radix: number;
  /** b and d of SP 800-38G: bytes of NUMradix(B) in Q, bytes of S taken from the PRF. */
  readonly #b: number;
  readonly #d: number;
  /**
   * The CBC-MAC state after P || Q's constant blocks, with Q's constant bytes of the first
   * varying block already XORed in: a round XORs in [i] and NUM(B), then encrypts.
   */
  readonly #chained: Uint8Array;
  /** Offset of [i] in the first varying block. */
  readonly #iOffset: number;
  /** Number of 16-byte blocks that hold [i] || NUM(B) (1 unless b >= 16). */
  readonly #varyingBlocks: number;
  readonly #mu: number;
  readonly #mv: number;
  /** Scratch for single values in the pair path. */
  readonly #oneA = new Float64Array(1);
  readonly #oneB = new Float64Array(1);

  constructor(aes: AesBlocks, radix: number, n: number, tweak: Uint8Array) {
    if (!Number.isInteger(n) || n < 2 || n > MAX_FF1_LENGTH || radix ** n < MIN_DOMAIN) {
      const minimum = Math.max(2, Math.ceil(Math.log(MIN_DOMAIN) / Math.log(radix) - 1e-9));
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `FF1 input length must be from ${minimum} to ${MAX_FF1_LENGTH} numerals for radix ` +
          `${radix} (SP 800-38G Rev. 1 needs radix^length >= 1,000,000), got ${String(n)}`,
      );
    }
    this.#aes = aes;
    this.#radix = radix;
    this.length = n;
    const u = Math.floor(n / 2);
    const v = n - u;
    this.u = u;
    this.v = v;
    this.modulusU = BigInt(radix) ** BigInt(u);
    this.modulusV = BigInt(radix) ** BigInt(v);
    // b = ceil(ceil(v * log2(radix)) / 8), computed exactly: the byte length of radix^v - 1.
    const b = Math.ceil((this.modulusV - 1n).toString(2).length / 8);
    const d = 4 * Math.ceil(b / 4) + 4;
    this.#b = b;
    this.#d = d;
    this.pairs = this.modulusV <= BigInt(PAIR_LIMIT);
    this.#mu = Number(this.modulusU);
    this.#mv = Number(this.modulusV);

    // P = [1]1 [2]1 [1]1 [radix]3 [10]1 [u mod 256]1 [n]4 [t]4, then Q's constant head:
    // T || [0]^((-t-b-1) mod 16). The varying tail [i]1 || [NUM(B)]b completes the last blocks.
    const t = tweak.length;
    const pad = (((-t - b - 1) % 16) + 16) % 16;
    const head = new Uint8Array(16 + t + pad);
    head.set([1, 2, 1, (radix >>> 16) & 0xff, (radix >>> 8) & 0xff, radix & 0xff, 10, u & 0xff], 0);
    writeUint32(head, 8, n);
    writeUint32(head, 12, t);
    head.set(tweak, 16);
    const fullBlocks = Math.floor(head.length / 16);
    let state: Uint8Array = new Uint8Array(16);
    for (let k = 0; k < fullBlocks; k++) {
      const block = head.slice(k * 16, k * 16 + 16);
      for (let j = 0; j < 16; j++) block[j] = (block[j] as number) ^ (state[j] as number);
      state = aes.encrypt(block);
    }
    this.#iOffset = head.length - fullBlocks * 16;
    const chained = Uint8Array.from(state);
    for (let j = 0; j < this.#iOffset; j++)
      chained[j] = (chained[j] as number) ^ (head[fullBlocks * 16 + j] as number);
    this.#chained = chained;
    this.#varyingBlocks = (this.#iOffset + 1 + b) / 16;
  }

  encrypt(numerals: ArrayLike<number>): number[] {
    const [a, b] = this.#split(numerals);
    const [ra, rb] = this.#feistel(a, b, true);
    return this.#join(ra, rb);
  }

  decrypt(numerals: ArrayLike<number>): number[] {
    const [a, b] = this.#split(numerals);
    const [ra, rb] = this.#feistel(a, b, false);
    return this.#join(ra, rb);
  }

  encryptValue(x: bigint): bigint {
    const [a, b] = this.#splitValue(x);
    const [ra, rb] = this.#feistel(a, b, true);
    return ra * this.modulusV + rb;
  }

  decryptValue(x: bigint): bigint {
    const [a, b] = this.#splitValue(x);
    const [ra, rb] = this.#feistel(a, b, false);
    return ra * this.modulusV + rb;
  }

  encryptPairs(a: Float64Array, b: Float64Array, count = a.length): void {
    this.#checkPairs(a, b, count);
    this.#roundsPairs(a, b, count, true);
  }

  decryptPairs(a: Float64Array, b: Float64Array, count = a.length): void {
    this.#checkPairs(a, b, count);
    this.#roundsPairs(a, b, count, false);
  }

  #checkPairs(a: Float64Array, b: Float64Array, count: number): void {
    if (!this.pairs) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `FF1 pairs need both halves below 2^45; radix ${this.#radix} length ${this.length} ` +
          `is too long, use encryptValue`,
      );
    }
    if (
      !(a instanceof Float64Array) ||
      !(b instanceof Float64Array) ||
      !Number.isInteger(count) ||
      count < 0 ||
      count > a.length ||
      count > b.length
    ) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `FF1 pairs: a and b must be Float64Arrays holding at least count (${String(count)}) values`,
      );
    }
    for (let k = 0; k < count; k++) {
      const x = a[k] as number;
      const y = b[k] as number;
      if (
        !Number.isInteger(x) ||
        x < 0 ||
        x >= this.#mu ||
        !Number.isInteger(y) ||
        y < 0 ||
        y >= this.#mv
      ) {
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `FF1 pair ${k} (${x}, ${y}) is outside [0, ${this.#mu}) x [0, ${this.#mv})`,
        );
      }
    }
  }

  /** The ten Feistel rounds over doubles, all `count` inputs through each round together. */
  #roundsPairs(as: Float64Array, bs: Float64Array, count: number, forward: boolean): void {
    if (count === 0) return;
    const b = this.#b;
    const d = this.#d;
    const iOffset = this.#iOffset;
    const chained = this.#chained;
    // One block per input. Bytes before [i] are the same in every round and every input: write
    // them once. On this path [i] || NUM(B) fills the rest of the block exactly (iOffset + 1 + b =
    // 16).
    const blocks = new Uint8Array(16 * count);
    for (let k = 0; k < count; k++) blocks.set(chained, 16 * k);
    const numStart = 16 - b;
    for (let step = 0; step < 10; step++) {
      const i = forward ? step : 9 - step;
      const m = i % 2 === 0 ? this.#mu : this.#mv;
      const iByte = (chained[iOffset] as number) ^ i;
      // The numeral string fed to the PRF: B when encrypting, A when decrypting.
      const fed = forward ? bs : as;
      for (let k = 0; k < count; k++) {
        const at = 16 * k;
        blocks[at + iOffset] = iByte;
        // [NUMradix(B)]b, big-endian, in the block's last b (<= 6) bytes.
        let value = fed[k] as number;
        for (let j = 15; j >= numStart; j--) {
          const quotient = Math.floor(value / 256);
          blocks[at + j] = (chained[j] as number) ^ (value - quotient * 256);
          value = quotient;
        }
      }
      const out = this.#aes.encrypt(blocks);
      for (let k = 0; k < count; k++) {
        // y = NUM(S) mod radix^m, S the first d (8 or 12) bytes of R, by Horner's rule two bytes
        // at a time while m * 65536 stays exact in a double, else one byte at a time.
        const at = 16 * k;
        let y = 0;
        if (m <= TWO_BYTE_STEP_LIMIT) {
          for (let j = at; j < at + d; j += 2)
            y = modulo(y * 65_536 + (out[j] as number) * 256 + (out[j + 1] as number), m);
        } else {
          for (let j = at; j < at + d; j++) y = modulo(y * 256 + (out[j] as number), m);
        }
        if (forward) {
          const c = (as[k] as number) + y;
          as[k] = bs[k] as number;
          bs[k] = c >= m ? c - m : c;
        } else {
          const c = (bs[k] as number) - y;
          bs[k] = as[k] as number;
          as[k] = c < 0 ? c + m : c;
        }
      }
    }
  }

  /** The ten Feistel rounds for one input, halves as bigints: any length, any b and d. */
  #feistel(a: bigint, b: bigint, forward: boolean): [bigint, bigint] {
    if (this.pairs) {
      this.#oneA[0] = Number(a);
      this.#oneB[0] = Number(b);
      this.#roundsPairs(this.#oneA, this.#oneB, 1, forward);
      return [BigInt(this.#oneA[0] as number), BigInt(this.#oneB[0] as number)];
    }
    for (let step = 0; step < 10; step++) {
      const i = forward ? step : 9 - step;
      const m = i % 2 === 0 ? this.modulusU : this.modulusV;
      const y = this.#prf(i, forward ? b : a) % m;
      if (forward) {
        const c = (a + y) % m;
        a = b;
        b = c;
      } else {
        const c = (((b - y) % m) + m) % m;
        b = a;
        a = c;
      }
    }
    return [a, b];
  }

  /** NUM(S) for round `i` with NUMradix(fed) in Q (SP 800-38G FF1 steps 6.i to 6.iv). */
  #prf(i: number, fed: bigint): bigint {
    const b = this.#b;
    const tail = new Uint8Array(16 * this.#varyingBlocks);
    tail.set(this.#chained, 0);
    tail[this.#iOffset] = (tail[this.#iOffset] as number) ^ i;
    let value = fed;
    for (let j = tail.length - 1; j > tail.length - 1 - b; j--, value >>= 8n)
      tail[j] = (tail[j] as number) ^ Number(value & 0xffn);
    // CBC over the varying blocks: the first already carries the chaining value.
    let r = this.#aes.encrypt(tail.subarray(0, 16));
    for (let k = 1; k < this.#varyingBlocks; k++) {
      const block = tail.slice(16 * k, 16 * k + 16);
      for (let j = 0; j < 16; j++) block[j] = (block[j] as number) ^ (r[j] as number);
      r = this.#aes.encrypt(block);
    }
    // S = R || CIPH(R xor [1]16) || CIPH(R xor [2]16) || ..., cut to d bytes.
    const extra = Math.ceil(this.#d / 16) - 1;
    let s = r;
    if (extra > 0) {
      const blocks = new Uint8Array(16 * extra);
      for (let k = 1; k <= extra; k++) {
        blocks.set(r, 16 * (k - 1));
        writeUint32(blocks, 16 * (k - 1) + 12, k);
        for (let j = 12; j < 16; j++)
          blocks[16 * (k - 1) + j] = (blocks[16 * (k - 1) + j] as number) ^ (r[j] as number);
      }
      const more = this.#aes.encrypt(blocks);
      s = new Uint8Array(16 + more.length);
      s.set(r, 0);
      s.set(more, 16);
    }
    let y = 0n;
    for (let j = 0; j < this.#d; j++) y = (y << 8n) | BigInt(s[j] as number);
    return y;
  }

  #split(numerals: ArrayLike<number>): [bigint, bigint] {
    if (numerals.length !== this.length) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `FF1 input has ${numerals.length} numerals, this domain takes ${this.length}`,
      );
    }
    const radix = BigInt(this.#radix);
    let a = 0n;
    let b = 0n;
    for (let k = 0; k < this.length; k++) {
      const numeral = numerals[k];
      if (
        typeof numeral !== 'number' ||
        !Number.isInteger(numeral) ||
        numeral < 0 ||
        numeral >= this.#radix
      ) {
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `FF1 numeral ${k} must be an integer from 0 to ${this.#radix - 1}, got ` +
            `${String(numeral)}`,
        );
      }
      if (k < this.u) a = a * radix + BigInt(numeral);
      else b = b * radix + BigInt(numeral);
    }
    return [a, b];
  }

  #splitValue(x: bigint): [bigint, bigint] {
    if (typeof x !== 'bigint' || x < 0n || x >= this.modulusU * this.modulusV) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `FF1 value must be a bigint from 0 to radix^${this.length} - 1, got ${String(x)}`,
      );
    }
    return [x / this.modulusV, x % this.modulusV];
  }

  #join(a: bigint, b: bigint): number[] {
    const out = new Array<number>(this.length);
    const radix = BigInt(this.#radix);
    for (let k = this.u - 1; k >= 0; k--, a /= radix) out[k] = Number(a % radix);
    for (let k = this.length - 1; k >= this.u; k--, b /= radix) out[k] = Number(b % radix);
    return out;
  }
}

/**
 * `x mod m` for 0 <= x < 2^53 and 0 < m: a division and a floor are several times faster than
 * `%` on doubles (a libc fmod call). The quotient may be off by one near an integer, and the two
 * corrections put the remainder back in [0, m); q * m stays below 2^53, so everything is exact.
 */
function modulo(x: number, m: number): number {
  const r = x - Math.floor(x / m) * m;
  return r < 0 ? r + m : r >= m ? r - m : r;
}

function writeUint32(bytes: Uint8Array, at: number, value: number): void {
  bytes[at] = (value >>> 24) & 0xff;
  bytes[at + 1] = (value >>> 16) & 0xff;
  bytes[at + 2] = (value >>> 8) & 0xff;
  bytes[at + 3] = value & 0xff;
}
