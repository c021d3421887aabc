import { IdMintError } from './errors.ts';
import { createFf1, type Ff1, type Ff1Domain } from './ff1.ts';

// Opaque IDs: a dense ID (1, 2, 3, ...) run through FF1 under a secret key, so the result shows
// neither how many IDs were issued nor in which order, and cannot be guessed, yet stays unique
// (FF1 is a permutation) and turns back into the dense ID for whoever holds the key.
//
// Encoding, in decimal: one key-ID digit, then the FF1 ciphertext of the dense ID written with
// exactly `digits` digits (leading zeros kept), the tweak being the tag name:
//
//   segment domain:    [key 1-8][18 digits]  19 digits, at most 8,999,999,999,999,999,999
//                      < 2^63 - 1, so it fits a signed BIGINT; dense IDs below 10^15
//   snowflake domain:  [key 1-9][24 digits]  25 digits, a string (it does not fit a BIGINT);
//                      any dense ID below 2^63
//
// The key digit makes rotation free: a new key gets the next ID and encodes from then on, while
// IDs made under older keys still decode as long as their key stays configured.
//
// Dense IDs fill only part of the FF1 domain (10^15 of 10^18; 2^63 of 10^24). Whatever decrypts
// outside that part is refused, which catches a tampered ID, an ID of another tag (a different
// tweak) or one decoded with the wrong key, except with the probability that a random value lands
// inside: 1/1000 for segment IDs, 1/108,000 for snowflake IDs. A caller that knows the highest
// dense ID issued so far passes it as `issuedUpTo`, which narrows that to issued / 10^18.

/** One secret key and the ID it is known by (the first digit of every opaque ID it makes). */
export interface OpaqueKey {
  /** 1 to the domain's `maxKeyId`. */
  readonly id: number;
  /** AES key: 16, 24 or 32 bytes. */
  readonly key: Uint8Array;
}

/** The shape of one kind of opaque ID. */
export interface OpaqueDomain {
  /** Name for messages: `segment` or `snowflake`. */
  readonly name: string;
  /** Digits of the FF1 ciphertext (radix 10), after the key digit. */
  readonly digits: number;
  /** Dense IDs must be below this; FF1 outputs that decrypt to it or above are refused. */
  readonly denseLimit: bigint;
  /** Largest key ID (key IDs run from 1). */
  readonly maxKeyId: number;
}

/**
 * Opaque segment IDs: 19 decimal digits, fitting a signed BIGINT. Dense IDs from 0 to 10^15 - 1
 * (a quadrillion per tag: 31 years at a million IDs per second); past that, encoding refuses
 * with OPAQUE_DOMAIN_EXHAUSTED. Key IDs 1 to 8 (a 9 in front would pass 2^63 - 1).
 */
export const OPAQUE_SEGMENT_DOMAIN: OpaqueDomain = Object.freeze({
  name: 'segment',
  digits: 18,
  denseLimit: 10n ** 15n,
  maxKeyId: 8,
});

/**
 * Opaque snowflake IDs: 25 decimal digits, a string. Every snowflake ID (below 2^63) has one; the
 * length differs from every other format idmint decodes (decimal IDs have at most 19 digits,
 * ObjectIds 24 characters, ULIDs 26), so the forms cannot be mistaken for each other.
 */
export const OPAQUE_SNOWFLAKE_DOMAIN: OpaqueDomain = Object.freeze({
  name: 'snowflake',
  digits: 24,
  denseLimit: 2n ** 63n,
  maxKeyId: 9,
});

/** Options for {@link OpaqueCodec}. */
export interface OpaqueCodecOptions {
  /** Every key that may have made an ID still in use, each with its ID. At least one. */
  readonly keys: readonly OpaqueKey[];
  /** Key that encodes new IDs. Default: the highest key ID (the newest key). */
  readonly activeKeyId?: number;
  /** Default {@link OPAQUE_SEGMENT_DOMAIN}. */
  readonly domain?: OpaqueDomain;
}

/** What {@link OpaqueCodec.decode} returns. */
export interface DecodedOpaqueId {
  readonly dense: bigint;
  /** The key the ID was made under. */
  readonly keyId: number;
}

/** Largest number of IDs {@link OpaqueCodec.encodeRange} encodes in one call. */
export const MAX_OPAQUE_RANGE = 1_000_000;
/** Prepared (key, tweak) pairs kept by one codec. */
const PREPARED_LIMIT = 4096;
/**
 * Inputs per FF1 pass in encodeRange: enough to amortize the native calls, small enough for cache.
 */
const CHUNK = 4096;

/**
 * Turns dense IDs into opaque ones and back, for a set of keys, per tweak (the tag name).
 * Pure: no I/O, no clock, keys only in memory. No method ever puts key material in an error.
 */
export class OpaqueCodec {
  readonly domain: OpaqueDomain;
  readonly activeKeyId: number;
  /** FF1 per key ID (index = key ID). */
  readonly #ciphers: (Ff1 | undefined)[];
  readonly #shape: RegExp;
  readonly #mv: bigint;
  /** Prepared FF1 per key ID and tweak, keyed by the tweak string itself (no per-call encoding). */
  readonly #prepared = new Map<string, Ff1Domain>();

  constructor(options: OpaqueCodecOptions) {
    if (options === null || typeof options !== 'object')
      throw new IdMintError('INVALID_ARGUMENT', 'OpaqueCodec needs options { keys }');
    const domain = options.domain ?? OPAQUE_SEGMENT_DOMAIN;
    checkDomain(domain);
    this.domain = domain;
    const keys = options.keys;
    if (!Array.isArray(keys) || keys.length === 0) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        'opaque IDs need at least one key: { id: 1, key: <16, 24 or 32 bytes> }',
      );
    }
    this.#ciphers = new Array<Ff1 | undefined>(domain.maxKeyId + 1).fill(undefined);
    for (const [index, entry] of keys.entries()) {
      const id = (entry as OpaqueKey | undefined)?.id;
      if (!Number.isInteger(id) || (id as number) < 1 || (id as number) > domain.maxKeyId) {
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `opaque key ${index + 1}: its ID must be an integer from 1 to ${domain.maxKeyId} ` +
            `(the ${domain.name} domain's key digit), got ${String(id)}`,
        );
      }
      if (this.#ciphers[id as number] !== undefined)
        throw new IdMintError('INVALID_ARGUMENT', `opaque key ID ${String(id)} is given twice`);
      try {
        this.#ciphers[id as number] = createFf1({ key: (entry as OpaqueKey).key, radix: 10 });
      } catch (error) {
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `opaque key ${String(id)}: ${(error as Error).message}`,
        );
      }
    }
    const active = options.activeKeyId ?? Math.max(...keys.map((k) => k.id));
    if (this.#ciphers[active] === undefined) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `active opaque key ID ${String(active)} is not among the configured keys ` +
          `(${this.keyIds().join(', ')})`,
      );
    }
    this.activeKeyId = active;
    this.#shape = new RegExp(`^[1-9][0-9]{${domain.digits}}$`);
    this.#mv = 10n ** BigInt(domain.digits - Math.floor(domain.digits / 2));
  }

  /** The configured key IDs, ascending. */
  keyIds(): number[] {
    const ids: number[] = [];
    this.#ciphers.forEach((cipher, id) => {
      if (cipher !== undefined) ids.push(id);
    });
    return ids;
  }

  /**
   * The opaque form of `dense` under `tweak` (the tag name), made with `keyId` (default the active
   * key): `digits + 1` decimal digits. OPAQUE_DOMAIN_EXHAUSTED when `dense` is at or past the
   * domain's limit: it has no opaque form, and nothing wraps.
   */
  encode(dense: bigint | number, tweak: string, keyId = this.activeKeyId): string {
    const value = this.#checkDense(dense, 1);
    const domain = this.#ff1(keyId, tweak);
    return `${keyId}${domain.encryptValue(value).toString().padStart(this.domain.digits, '0')}`;
  }

  /**
   * The opaque forms of `count` consecutive dense IDs from `first`: the same as calling
   * {@link encode} for each, several times faster (FF1 runs over all of them at once).
   */
  encodeRange(
    first: bigint | number,
    count: number,
    tweak: string,
    keyId = this.activeKeyId,
  ): string[] {
    if (!Number.isSafeInteger(count) || count < 1 || count > MAX_OPAQUE_RANGE) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `count must be an integer from 1 to ${MAX_OPAQUE_RANGE}, got ${String(count)}`,
      );
    }
    const start = this.#checkDense(first, count);
    const domain = this.#ff1(keyId, tweak);
    const u = domain.u;
    const v = domain.v;
    const mv = Number(domain.modulusV);
    const out = new Array<string>(count);
    const a = new Float64Array(Math.min(CHUNK, count));
    const b = new Float64Array(Math.min(CHUNK, count));
    // Halves of the first dense ID; the rest follow by counting, with a carry from b into a.
    let high = Number(start / this.#mv);
    let low = Number(start % this.#mv);
    const key = String(keyId);
    for (let done = 0; done < count; done += CHUNK) {
      const n = Math.min(CHUNK, count - done);
      for (let k = 0; k < n; k++) {
        a[k] = high;
        b[k] = low;
        if (++low === mv) {
          low = 0;
          high++;
        }
      }
      domain.encryptPairs(a, b, n);
      for (let k = 0; k < n; k++)
        out[done + k] = key + String(a[k]).padStart(u, '0') + String(b[k]).padStart(v, '0');
    }
    return out;
  }

  /**
   * An encoder for one tweak (tag) that computes opaque IDs `window` consecutive dense IDs at a
   * time: the fast way to encode IDs that come in order, as a segment tag's do. Each encryption is
   * ten AES blocks in sequence, and a native AES call costs far more than the block itself, so one
   * {@link encode} runs at about a tenth of {@link encodeRange}'s rate; the encoder gets the
   * batched rate for one ID at a time. Computing ahead issues nothing: an opaque ID is a function
   * of its dense ID, so a window that is never used is merely wasted work.
   */
  encoder(
    tweak: string,
    options: { readonly window?: number; readonly keyId?: number } = {},
  ): OpaqueEncoder {
    return new OpaqueEncoder(this, tweak, options.window ?? 256, options.keyId ?? this.activeKeyId);
  }

  /**
   * The dense ID behind `opaque` (a string or bigint) for `tweak`, and the key it was made with.
   * INVALID_ID when it is malformed, names a key that is not configured, or decrypts outside the
   * dense IDs (tampered, another tag's, or made under a different key), or above `issuedUpTo`
   * when given. Never returns another tag's dense ID for a well-formed ID of that tag, except with
   * the probability described in docs/formats.md.
   */
  decode(
    opaque: string | bigint,
    tweak: string,
    options: { readonly issuedUpTo?: bigint } = {},
  ): DecodedOpaqueId {
    const text = typeof opaque === 'bigint' ? opaque.toString() : opaque;
    if (typeof text !== 'string' || !this.#shape.test(text)) {
      const shown =
        typeof text === 'string'
          ? `"${text.length > 40 ? `${text.slice(0, 40)}...` : text}"`
          : `a ${typeof text}`;
      throw new IdMintError(
        'INVALID_ID',
        `${shown} is not an opaque ${this.domain.name} ID: expected ` +
          `${this.domain.digits + 1} decimal digits, the first (the key ID) from 1 to ` +
          `${this.domain.maxKeyId}`,
      );
    }
    const keyId = text.charCodeAt(0) - 48;
    if (keyId > this.domain.maxKeyId || this.#ciphers[keyId] === undefined) {
      throw new IdMintError(
        'INVALID_ID',
        `opaque ID ${text} was made under key ${keyId}, which is not configured ` +
          `(configured: ${this.keyIds().join(', ')}); add that key to decode it`,
        { details: { keyId } },
      );
    }
    const dense = this.#ff1(keyId, tweak).decryptValue(BigInt(text.slice(1)));
    const limit = options.issuedUpTo;
    if (dense >= this.domain.denseLimit || (limit !== undefined && dense > limit)) {
      throw new IdMintError(
        'INVALID_ID',
        `opaque ID ${text} is not an ID of "${shortTweak(tweak)}" under key ${keyId}: it ` +
          `was altered, belongs to another tag, or was made with another key under ID ${keyId}`,
        { details: { keyId } },
      );
    }
    return { dense, keyId };
  }

  #ff1(keyId: number, tweak: string): Ff1Domain {
    const cipher = Number.isInteger(keyId) ? this.#ciphers[keyId] : undefined;
    if (cipher === undefined) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `opaque key ID ${String(keyId)} is not configured (configured: ` +
          `${this.keyIds().join(', ')})`,
      );
    }
    if (typeof tweak !== 'string')
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `the opaque tweak (the tag name) must be a string, got ${typeof tweak}`,
      );
    const cacheKey = `${keyId}:${tweak}`;
    let prepared = this.#prepared.get(cacheKey);
    if (prepared === undefined) {
      prepared = cipher.prepare(this.domain.digits, tweak);
      // Bounded: a service with more tags than this re-prepares (a few AES blocks) now and then.
      if (this.#prepared.size >= PREPARED_LIMIT) this.#prepared.clear();
      this.#prepared.set(cacheKey, prepared);
    }
    return prepared;
  }

  /**
   * Checks that `dense` .. `dense + count - 1` all lie in the domain; returns `dense` as a bigint.
   */
  #checkDense(dense: bigint | number, count: number): bigint {
    let value: bigint;
    if (typeof dense === 'bigint') value = dense;
    else if (typeof dense === 'number' && Number.isSafeInteger(dense)) value = BigInt(dense);
    else
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `a dense ID must be a bigint or a safe integer, got ${String(dense)}`,
      );
    if (value < 0n)
      throw new IdMintError('INVALID_ARGUMENT', `a dense ID is never negative, got ${value}`);
    const last = value + BigInt(count) - 1n;
    if (last >= this.domain.denseLimit) {
      throw new IdMintError(
        'OPAQUE_DOMAIN_EXHAUSTED',
        `dense ID ${last} has no opaque ${this.domain.name} form: ` +
          `the domain ends at ${this.domain.denseLimit - 1n}`,
        {
          details: {
            domain: this.domain.name,
            dense: last.toString(),
            denseLimit: this.domain.denseLimit.toString(),
          },
        },
      );
    }
    return value;
  }
}

/**
 * Encodes dense IDs of one tweak through a window of precomputed opaque IDs; see {@link
 * OpaqueCodec.encoder}.
 */
export class OpaqueEncoder {
  readonly tweak: string;
  readonly keyId: number;
  readonly #codec: OpaqueCodec;
  readonly #window: number;
  /** Dense ID of `#ids[0]`; -1 while empty. */
  #start = -1n;
  /**
   * `#start` as a number (exact: windows start below 2^53 on the number path), for the fast check.
   */
  #startNumber = -1;
  #ids: string[] = [];

  constructor(codec: OpaqueCodec, tweak: string, window: number, keyId: number) {
    if (!Number.isSafeInteger(window) || window < 1 || window > 65_536) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `opaque encoder window must be an integer from 1 to 65536, got ${String(window)}`,
      );
    }
    codec.encode(0n, tweak, keyId); // validates the tweak and the key ID up front
    this.#codec = codec;
    this.tweak = tweak;
    this.keyId = keyId;
    this.#window = window;
  }

  /** The opaque form of `dense`: the same as `codec.encode(dense, tweak, keyId)`. */
  encode(dense: bigint | number): string {
    // Fast path for numbers: a window hit costs a subtraction, no bigint.
    if (typeof dense === 'number') {
      const index = dense - this.#startNumber;
      if (
        index >= 0 &&
        index < this.#ids.length &&
        Number.isInteger(index) &&
        this.#startNumber >= 0
      )
        return this.#ids[index] as string;
    }
    const value =
      typeof dense === 'bigint' ? dense : Number.isSafeInteger(dense) ? BigInt(dense) : -1n;
    if (value >= this.#start && value < this.#start + BigInt(this.#ids.length))
      return this.#ids[Number(value - this.#start)] as string;
    if (value < 0n || value >= this.#codec.domain.denseLimit)
      return this.#codec.encode(dense, this.tweak, this.keyId); // throws the right error
    const room = this.#codec.domain.denseLimit - value;
    const count = room < BigInt(this.#window) ? Number(room) : this.#window;
    this.#ids = this.#codec.encodeRange(value, count, this.tweak, this.keyId);
    this.#start = value;
    this.#startNumber = value <= BigInt(Number.MAX_SAFE_INTEGER) - 65_536n ? Number(value) : -1;
    return this.#ids[0] as string;
  }
}

function shortTweak(tweak: string): string {
  return tweak.length > 64 ? `${tweak.slice(0, 64)}...` : tweak;
}

function checkDomain(domain: OpaqueDomain): void {
  const ok =
    domain !== null &&
    typeof domain === 'object' &&
    Number.isInteger(domain.digits) &&
    domain.digits >= 6 &&
    domain.digits <= 28 &&
    typeof domain.denseLimit === 'bigint' &&
    domain.denseLimit > 0n &&
    domain.denseLimit <= 10n ** BigInt(domain.digits) &&
    Number.isInteger(domain.maxKeyId) &&
    domain.maxKeyId >= 1 &&
    domain.maxKeyId <= 9;
  if (!ok) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      'opaque domain needs digits from 6 to 28, a denseLimit from 1 to 10^digits and a ' +
        'maxKeyId from 1 to 9',
    );
  }
}

/**
 * Parses a key list such as `IDMINT_OPAQUE_KEYS`: comma-separated `<id>:<hex>` entries (e.g.
 * `1:00112233...,2:8899aabb...`), each key 32, 48 or 64 hex digits (AES-128, -192, -256). A single
 * entry without `<id>:` is key 1. Errors name the entry and what is wrong, never the key itself.
 */
export function parseOpaqueKeys(text: string): OpaqueKey[] {
  if (typeof text !== 'string' || text.trim() === '') {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      'opaque keys must be a non-empty list of <id>:<hex> entries separated by commas',
    );
  }
  const entries = text.split(',').map((entry) => entry.trim());
  return entries.map((entry, index): OpaqueKey => {
    const colon = entry.indexOf(':');
    if (colon < 0 && entries.length > 1) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `opaque key entry ${index + 1} has no "<id>:" in front; with several keys each ` +
          `needs its ID`,
      );
    }
    const idText = colon < 0 ? '1' : entry.slice(0, colon).trim();
    const hex = colon < 0 ? entry : entry.slice(colon + 1).trim();
    if (!/^[1-9]$/.test(idText)) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `opaque key entry ${index + 1}: the key ID must be one digit from 1 to 9, got ` +
          `"${idText.slice(0, 10)}"`,
      );
    }
    if (
      !/^[0-9a-fA-F]*$/.test(hex) ||
      (hex.length !== 32 && hex.length !== 48 && hex.length !== 64)
    ) {
      // The message says what is wrong with the key, never what it is.
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `opaque key ${idText}: must be 32, 48 or 64 hex digits (AES-128, -192, -256), got ` +
          `${hex.length} characters${/^[0-9a-fA-F]*$/.test(hex) ? '' : ' with non-hex ones'}`,
      );
    }
    const key = new Uint8Array(hex.length / 2);
    for (let i = 0; i < key.length; i++) key[i] = Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
    return { id: Number(idText), key };
  });
}
