// Small checks shared by the ID-family generators and decoders (UUID, ULID, ObjectId).
import { IdMintError } from './errors.ts';

/** Largest `nextBatch` count, the same bound as SnowflakeGenerator's. */
export const MAX_FAMILY_BATCH = 10_000_000;

/** Throws INVALID_ARGUMENT unless `count` is an integer from 1 to {@link MAX_FAMILY_BATCH}. */
export function checkCount(count: number): void {
  if (!Number.isSafeInteger(count) || count < 1 || count > MAX_FAMILY_BATCH) {
    throw new IdMintError('INVALID_ARGUMENT', `count must be an integer from 1 to ${MAX_FAMILY_BATCH}, got ${String(count)}`);
  }
}

/** An input quoted for an error message, cut short so a huge string cannot flood a log. */
export function describeInput(input: unknown): string {
  if (typeof input !== 'string') return `a ${typeof input}`;
  return input.length > 40 ? `"${input.slice(0, 40)}..." (${input.length} characters)` : `"${input}"`;
}
