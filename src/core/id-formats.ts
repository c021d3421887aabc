import { IdMintError } from './errors.ts';
import { describeInput } from './family-support.ts';
import {
  decomposeId,
  resolveLayout,
  type IdParts,
  type Layout,
  type LayoutSpec,
} from './layout.ts';
import { decodeObjectId, isObjectId, type DecodedObjectId } from './objectid.ts';
import { decodeUlid, isUlid, type DecodedUlid } from './ulid.ts';
import { decodeUuid, isUuid, type DecodedUuid } from './uuid.ts';

/**
 * The textual ID formats idmint recognises by shape. They cannot be confused: a UUID has 36
 * characters with dashes, an ObjectId 24 hex digits, a ULID 26 base32 characters (the first 0-7),
 * a decimal (snowflake or segment) ID at most 19 digits. (Opaque IDs are decimal too, but only
 * their tag's key can tell them apart from dense ones: see OpaqueCodec.)
 */
export type IdFormat = 'uuid' | 'ulid' | 'objectid' | 'decimal';

/** The formats {@link detectFormat} recognises, in the order it tries them. */
export const ID_FORMATS: readonly IdFormat[] = ['uuid', 'objectid', 'ulid', 'decimal'];

const DECIMAL_SHAPE = /^(?:0|[1-9][0-9]{0,18})$/;

/** A decimal ID decoded as a snowflake ID under a layout. */
export interface DecodedSnowflake extends IdParts {
  readonly format: 'snowflake';
  /** The ID in canonical decimal form. */
  readonly id: string;
  /** Name of the layout it was decoded with. */
  readonly layout: string;
}

/** What {@link decodeAny} returns: tell the cases apart by `format`. */
export type DecodedAnyId = DecodedUuid | DecodedUlid | DecodedObjectId | DecodedSnowflake;

/** The format of `id` by its shape, or undefined when it has none of them. */
export function detectFormat(id: unknown): IdFormat | undefined {
  if (typeof id !== 'string') return undefined;
  if (isUuid(id)) return 'uuid';
  if (isObjectId(id)) return 'objectid';
  if (isUlid(id)) return 'ulid';
  if (DECIMAL_SHAPE.test(id)) return 'decimal';
  return undefined;
}

/** Options for {@link decodeAny}. */
export interface DecodeAnyOptions {
  /** Decode as this format instead of detecting it; the ID must then have that shape. */
  readonly format?: IdFormat;
  /** Layout for decimal (snowflake) IDs: a preset name, a spec or a layout. Default `idmint`. */
  readonly layout?: Layout | LayoutSpec | string;
}

/**
 * Decodes an ID of any format idmint knows: time and parts of a UUID (v7 time; version and variant
 * of any), a ULID, an ObjectId, or a decimal snowflake ID under `layout`. INVALID_ID when the ID
 * has no known shape (the message lists them) or is malformed for the format asked for.
 */
export function decodeAny(id: string, options: DecodeAnyOptions = {}): DecodedAnyId {
  const format = options.format ?? detectFormat(id);
  switch (format) {
    case 'uuid':
      return decodeUuid(id);
    case 'ulid':
      return decodeUlid(id);
    case 'objectid':
      return decodeObjectId(id);
    case 'decimal': {
      const layout = resolveLayout(options.layout);
      const parts = decomposeId(id, layout);
      return { format: 'snowflake', id: String(id), layout: layout.name, ...parts };
    }
    case undefined:
      throw new IdMintError(
        'INVALID_ID',
        `${describeInput(id)} is not an ID idmint can decode: ` +
          'expected a UUID, an ObjectId, a ULID or a decimal ID',
      );
    default:
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `format must be one of ${ID_FORMATS.join(', ')}, got "${String(format)}"`,
      );
  }
}
