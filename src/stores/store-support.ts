// What every SegmentStore adapter shares: options, the bounded call that turns driver failures
// into STORE_UNAVAILABLE, and parsing of stored values into exact bigints.
import { IdMintError, isIdMintError } from '../core/errors.ts';
import { checkDescription, checkSegmentId, checkStep, checkTag } from '../core/segment-limits.ts';
import { withDeadline } from '../core/timeout.ts';
import type { NewTag, TagRecord } from '../ports/segment-store.ts';
import { checkTableName } from '../sql/sql-driver.ts';

/** Options every store adapter takes. */
export interface SegmentStoreOptions {
  /** Table (SQL) or key prefix (Redis). Default `leaf_alloc`, Leaf's own table. Letters, digits and `_`. */
  readonly table?: string;
  /** Every store call is abandoned after this many ms with STORE_UNAVAILABLE. Default 3000. */
  readonly timeoutMs?: number;
}

export const DEFAULT_SEGMENT_TABLE = 'leaf_alloc';
export const DEFAULT_STORE_TIMEOUT_MS = 3000;

/** The table name and timeout, validated. */
export function resolveStoreOptions(options: SegmentStoreOptions = {}): { table: string; timeoutMs: number } {
  // Also the Redis key prefix: the same plain-identifier rule keeps keys and tables alike.
  const table = checkTableName(options.table ?? DEFAULT_SEGMENT_TABLE);
  const timeoutMs = options.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new IdMintError('INVALID_ARGUMENT', `timeoutMs must be a positive integer number of ms, got ${String(timeoutMs)}`);
  }
  return { table, timeoutMs };
}

/**
 * Runs one store operation bounded by `timeoutMs`. IdMintErrors pass through; anything else (a
 * driver error, a refused connection) becomes STORE_UNAVAILABLE with the original as `cause`. On
 * timeout `signal` aborts, so the adapter can destroy the connection: the database then rolls back
 * whatever it has not committed, and the caller treats the outcome as unknown.
 */
export async function storeCall<T>(backend: string, operation: string, timeoutMs: number, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const timedOut = () => new IdMintError('STORE_UNAVAILABLE', `${backend} store: ${operation} timed out after ${timeoutMs} ms`, { details: { backend, operation, timeoutMs } });
  try {
    return await withDeadline(timeoutMs, timedOut, run);
  } catch (error) {
    if (isIdMintError(error)) throw error;
    throw new IdMintError('STORE_UNAVAILABLE', `${backend} store: ${operation} failed: ${errorText(error)}`, {
      cause: error,
      details: { backend, operation },
    });
  }
}

/** A driver error's message, with its code where it has one (`ECONNREFUSED`, `ER_...`, `23505`). */
function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const message = error.message || (error instanceof AggregateError ? error.errors.map((e: unknown) => errorText(e)).join('; ') : error.name);
  return typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message;
}

/** A stored integer (bigint, decimal string, or number where the driver had no choice) as an exact bigint. */
export function toBigInt(value: unknown, column: string): bigint {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'string' && /^-?[0-9]+$/.test(value)) return BigInt(value);
  // A number above 2^53 has already lost digits; refusing it is the only safe answer.
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  throw new IdMintError('STORE_UNAVAILABLE', `stored ${column} is not an exact integer: ${String(value)} (${typeof value}); is the driver parsing bigint columns as numbers?`);
}

/** A stored `step` (int column) as a number. */
export function toStep(value: unknown): number {
  return Number(toBigInt(value, 'step'));
}

/**
 * A stored timestamp as a Date. Strings without a zone are UTC: idmint writes UTC, SQLite's
 * CURRENT_TIMESTAMP is UTC. Redis keeps ms since the epoch.
 */
export function toDate(value: unknown): Date | null {
  if (value === null || value === undefined || value === '') return null;
  if (value instanceof Date) return value;
  if (typeof value === 'string') {
    const date = /^[0-9]+$/.test(value) ? new Date(Number(value)) : new Date(/(?:[zZ]|[+-][0-9]{2}(?::?[0-9]{2})?)$/.test(value) ? value : `${value.replace(' ', 'T')}Z`);
    return Number.isNaN(date.getTime()) ? null : date;
  }
  return null;
}

/** A row of Leaf's table, as the adapter read it, as a TagRecord. */
export function tagRecord(row: { biz_tag: unknown; max_id: unknown; step: unknown; description: unknown; update_time: unknown }): TagRecord {
  return {
    tag: String(row.biz_tag),
    maxId: toBigInt(row.max_id, 'max_id'),
    step: toStep(row.step),
    description: row.description === null || row.description === undefined ? null : String(row.description),
    updatedAt: toDate(row.update_time),
  };
}

/** Sorts tag records by name in JavaScript string order, whatever the database's collation. */
export function byTag(a: TagRecord, b: TagRecord): number {
  return a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0;
}

/** Validates a new tag; shared by every store. */
export function checkNewTag(tag: NewTag): { tag: string; step: number; startId: bigint; description: string | null } {
  if (tag === null || typeof tag !== 'object') throw new IdMintError('INVALID_ARGUMENT', 'a new tag needs { tag, step }');
  return {
    tag: checkTag(tag.tag),
    step: checkStep(tag.step),
    startId: tag.startId === undefined ? 1n : checkSegmentId(tag.startId, 'startId'),
    description: checkDescription(tag.description),
  };
}

/** Validates the bounds of a release; shared by every store. */
export function checkRelease(from: bigint, to: bigint): void {
  checkSegmentId(from, 'from');
  checkSegmentId(to, 'to');
  if (from >= to) throw new IdMintError('INVALID_ARGUMENT', `release needs from < to, got [${from}, ${to})`);
}
