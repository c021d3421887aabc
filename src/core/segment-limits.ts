import { IdMintError } from './errors.ts';

/**
 * The limits of segment mode's values, checked in one place by the service and by every store, so
 * a bad value is refused with the same message whichever backend is configured.
 */

/** The largest ID (and `max_id`) a tag can reach: 2^63-1, the top of a signed 64-bit column. */
export const MAX_SEGMENT_ID = 2n ** 63n - 1n;

/** The largest step: Leaf's `step` column is a signed 32-bit `int`. */
export const MAX_TAG_STEP = 2 ** 31 - 1;

/** A business tag: 1 to 128 characters (Leaf's `varchar(128)`) that are safe in URLs, keys and logs. */
export const TAG_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Leaf's `description varchar(256)`. */
export const MAX_DESCRIPTION_LENGTH = 256;

/** Returns `tag` if it is a valid business tag; throws INVALID_ARGUMENT otherwise. */
export function checkTag(tag: unknown): string {
  if (typeof tag !== 'string' || !TAG_PATTERN.test(tag)) {
    throw new IdMintError('INVALID_ARGUMENT', `tag must be 1 to 128 characters of A-Z a-z 0-9 _ . : -, got ${describe(tag)}`);
  }
  return tag;
}

/** Returns `step` if it is an integer from 1 to 2^31-1; throws INVALID_ARGUMENT naming `name`. */
export function checkStep(step: unknown, name = 'step'): number {
  if (typeof step !== 'number' || !Number.isInteger(step) || step < 1 || step > MAX_TAG_STEP) {
    throw new IdMintError('INVALID_ARGUMENT', `${name} must be an integer from 1 to ${MAX_TAG_STEP}, got ${describe(step)}`);
  }
  return step;
}

/** Returns `id` if it is a bigint from 0 to 2^63-1; throws INVALID_ARGUMENT naming `name`. */
export function checkSegmentId(id: unknown, name: string): bigint {
  if (typeof id !== 'bigint' || id < 0n || id > MAX_SEGMENT_ID) {
    throw new IdMintError('INVALID_ARGUMENT', `${name} must be a bigint from 0 to ${MAX_SEGMENT_ID}, got ${describe(id)}`);
  }
  return id;
}

/** Returns the description (null when absent) if it fits Leaf's column; throws INVALID_ARGUMENT. */
export function checkDescription(description: unknown): string | null {
  if (description === undefined || description === null) return null;
  if (typeof description !== 'string' || description.length > MAX_DESCRIPTION_LENGTH) {
    throw new IdMintError('INVALID_ARGUMENT', `description must be a string of at most ${MAX_DESCRIPTION_LENGTH} characters, got ${describe(description)}`);
  }
  return description;
}

/** The error every store raises when a range would pass 2^63-1. */
export function idSpaceExhausted(tag: string, maxId: bigint, step: number): IdMintError {
  return new IdMintError(
    'ID_SPACE_EXHAUSTED',
    `tag "${tag}": a range of ${step} from max_id ${maxId} would pass ${MAX_SEGMENT_ID}; nothing was allocated`,
    { details: { tag, maxId: maxId.toString(), step } },
  );
}

/** The error for a tag the store does not have. */
export function tagNotFound(tag: string): IdMintError {
  return new IdMintError('TAG_NOT_FOUND', `tag "${tag}" does not exist`, { details: { tag } });
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 140 ? `${value.slice(0, 140)}...` : value);
  if (typeof value === 'bigint') return `${value}n`;
  return String(value);
}
