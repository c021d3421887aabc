import { IdMintError, isIdMintError } from '../core/errors.ts';
import type { Layout } from '../core/layout.ts';
import {
  OPAQUE_SEGMENT_DOMAIN,
  OPAQUE_SNOWFLAKE_DOMAIN,
  OpaqueCodec,
  parseOpaqueKeys,
  type DecodedOpaqueId,
  type OpaqueEncoder,
} from '../core/opaque.ts';

/**
 * Opaque IDs in the server and the CLI: the codecs built from `IDMINT_OPAQUE_KEYS`, an encoder
 * per opaque tag (its IDs come in order, so a window of them is encrypted at once), and the
 * bounds decoding is checked against. The algorithm is core's (core/opaque.ts); this holds the
 * state that lives as long as the server.
 */

/**
 * The FF1 tweak of opaque snowflake IDs: fixed, so every node of a deployment (and the CLI)
 * encodes and decodes alike whatever its worker ID. A segment tag's tweak is its name.
 */
export const OPAQUE_SNOWFLAKE_TWEAK = 'snowflake';

/**
 * How far ahead of this node's clock another node's snowflake IDs may be when an opaque one is
 * decoded: the `borrow` policy's lead (at most 591 s, see docs/configuration.md) and clock
 * differences between nodes, with a wide margin. Only IDs of times beyond it are refused.
 */
const SNOWFLAKE_TIME_MARGIN_MS = 86_400_000;

/**
 * Encoders kept at most; beyond this they are dropped and rebuilt on demand (one FF1 pass each).
 */
const ENCODERS_LIMIT = 4096;

/** What {@link OpaqueIds.decodeSegment} returns. */
export interface DecodedOpaqueSegmentId extends DecodedOpaqueId {
  readonly tag: string;
  /** The opaque ID, as given. */
  readonly id: string;
}

/** The codecs and encoders of one server (or one CLI command). */
export class OpaqueIds {
  readonly #segment: OpaqueCodec;
  readonly #snowflake: OpaqueCodec;
  readonly #encoders = new Map<string, OpaqueEncoder>();

  /** From the text of `IDMINT_OPAQUE_KEYS` (already validated by the configuration). */
  constructor(keysText: string) {
    const keys = parseOpaqueKeys(keysText);
    this.#segment = new OpaqueCodec({ keys, domain: OPAQUE_SEGMENT_DOMAIN });
    this.#snowflake = new OpaqueCodec({ keys, domain: OPAQUE_SNOWFLAKE_DOMAIN });
  }

  /** The keys from the configuration, or undefined when none are configured (opaque IDs off). */
  static fromConfig(keysText: string): OpaqueIds | undefined {
    return keysText === '' ? undefined : new OpaqueIds(keysText);
  }

  /** The key that encodes new IDs: the highest key ID. */
  get activeKeyId(): number {
    return this.#segment.activeKeyId;
  }

  /** Every configured key ID, ascending (the IDs only, never the keys). */
  keyIds(): number[] {
    return this.#segment.keyIds();
  }

  /** The opaque form of a segment ID of `tag`. OPAQUE_DOMAIN_EXHAUSTED at 10^15 and past. */
  segmentId(tag: string, dense: bigint): string {
    try {
      return this.#encoder(tag).encode(dense);
    } catch (error) {
      throw namingTag(error, tag);
    }
  }

  /**
   * The opaque forms of segment IDs of `tag`, in order; consecutive runs are encrypted together.
   */
  segmentIds(tag: string, dense: readonly bigint[]): string[] {
    try {
      return encodeRuns(this.#segment, tag, dense);
    } catch (error) {
      throw namingTag(error, tag);
    }
  }

  /**
   * The dense ID behind an opaque segment ID of `tag`, whose stored `max_id` is `maxId`: every ID
   * the tag has issued is below it (it is where the next range starts, and a give-back never
   * lowers it below an issued ID), so it bounds what decodes. INVALID_ID otherwise.
   */
  decodeSegment(tag: string, opaque: string, maxId: bigint): DecodedOpaqueSegmentId {
    const decoded = this.#segment.decode(opaque, tag, { issuedUpTo: maxId - 1n });
    return { tag, id: opaque, ...decoded };
  }

  /** The opaque forms of snowflake IDs, in order. */
  snowflakeIds(ids: readonly bigint[]): string[] {
    return encodeRuns(this.#snowflake, OPAQUE_SNOWFLAKE_TWEAK, ids);
  }

  /**
   * The snowflake ID behind an opaque one, refused (INVALID_ID) when it decrypts to an ID of a
   * time more than a day past `nowMs` under `layout`: no node can have issued it yet.
   */
  decodeSnowflake(opaque: string, layout: Layout, nowMs: number): DecodedOpaqueId {
    return this.#snowflake.decode(opaque, OPAQUE_SNOWFLAKE_TWEAK, {
      issuedUpTo: snowflakeIssuedUpTo(layout, nowMs),
    });
  }

  #encoder(tag: string): OpaqueEncoder {
    let encoder = this.#encoders.get(tag);
    if (encoder === undefined) {
      if (this.#encoders.size >= ENCODERS_LIMIT) this.#encoders.clear();
      encoder = this.#segment.encoder(tag);
      this.#encoders.set(tag, encoder);
    }
    return encoder;
  }
}

/**
 * OPAQUE_UNAVAILABLE for a server (or CLI) without keys, asked for opaque IDs: an opaque tag is
 * never answered with its dense IDs instead.
 */
export function noOpaqueKeys(what: string, details?: Record<string, string>): IdMintError {
  return new IdMintError(
    'OPAQUE_UNAVAILABLE',
    `${what} needs opaque keys, and none are configured (IDMINT_OPAQUE_KEYS); nothing is ` +
      `answered in their place`,
    {
      ...(details === undefined ? {} : { details }),
    },
  );
}

/**
 * OPAQUE_DOMAIN_EXHAUSTED with the tag named (in `details` too, so the public sentence names it).
 */
function namingTag(error: unknown, tag: string): unknown {
  if (!isIdMintError(error, 'OPAQUE_DOMAIN_EXHAUSTED')) return error;
  return new IdMintError('OPAQUE_DOMAIN_EXHAUSTED', `tag "${tag}": ${error.message}`, {
    cause: error,
    details: { ...error.details, tag },
  });
}

/**
 * The largest snowflake ID of a time unit up to a day past `nowMs`, capped at the layout's largest
 * ID.
 */
export function snowflakeIssuedUpTo(layout: Layout, nowMs: number): bigint {
  const units = Math.floor((nowMs + SNOWFLAKE_TIME_MARGIN_MS - layout.epochMs) / layout.timeUnitMs);
  if (units < 0) return -1n;
  const bound = ((BigInt(units) + 1n) << BigInt(layout.timeShift)) - 1n;
  return bound < layout.maxId ? bound : layout.maxId;
}

/** Encodes increasing IDs a run of consecutive ones at a time (encodeRange is ~10x one encode). */
function encodeRuns(codec: OpaqueCodec, tweak: string, ids: readonly bigint[]): string[] {
  const out: string[] = [];
  let start = 0;
  while (start < ids.length) {
    const first = ids[start] as bigint;
    let end = start + 1;
    while (end < ids.length && end - start < 1_000_000 && ids[end] === first + BigInt(end - start))
      end++;
    if (end - start === 1) out.push(codec.encode(first, tweak));
    else for (const id of codec.encodeRange(first, end - start, tweak)) out.push(id);
    start = end;
  }
  return out;
}

/**
 * A segment ID as the routes answer it: its decimal digits, or its opaque form when the tag is
 * opaque (`opaque`: the service knew the tag as opaque before or after the ID was drawn). An
 * opaque tag on a node without keys is OPAQUE_UNAVAILABLE, never its dense ID.
 */
export function segmentIdText(
  keys: OpaqueIds | undefined,
  tag: string,
  id: bigint,
  opaque: boolean,
): string {
  if (!opaque) return id.toString();
  return (keys ?? failOpaqueTag(tag)).segmentId(tag, id);
}

/** {@link segmentIdText} for a batch: the IDs as they are, or their opaque forms. */
export function segmentIdTexts(
  keys: OpaqueIds | undefined,
  tag: string,
  ids: readonly bigint[],
  opaque: boolean,
): readonly (bigint | string)[] {
  if (!opaque) return ids;
  return (keys ?? failOpaqueTag(tag)).segmentIds(tag, ids);
}

/** Throws OPAQUE_UNAVAILABLE for an opaque tag on a node without keys. */
export function failOpaqueTag(tag: string): never {
  throw noOpaqueKeys(`tag "${tag}" is opaque: its IDs`, { tag });
}
