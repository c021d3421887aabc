// What every store's issuer leases (src/ports/issuer-lease.ts) share: argument checks, the
// LEASE_LOST error, and the test hook that pauses a store between two steps of a claim or renewal.

import { IdMintError } from '../core/errors.ts';
import { checkTag, tagNotFound } from '../core/segment-limits.ts';
import type { IssuerBusy } from '../ports/issuer-lease.ts';

/** Where idmint keeps the issuer leases of a SQL database's cluster-ordered tags. */
export const ISSUER_TABLE = 'idmint_issuer';

/**
 * Bounds of an issuer lease's TTL in ms: at least 100 ms (a renewal must have time to land), at
 * most a day (a lease nobody renews must end within a time someone waits for).
 */
export const ISSUER_TTL_BOUNDS = { min: 100, max: 86_400_000 } as const;

/** Longest node ID and address stored (each a varchar(255) on SQL). */
export const ISSUER_TEXT_MAX = 255;

/** Tries of a claim whose conditional write lost to a lease that expired just after. */
export const CLAIM_ATTEMPTS = 3;

/**
 * A step of an issuer-lease protocol at which a test can pause a store:
 *
 * - `before-claim`: the claim has checked the tag (and, on SQL, made sure the lease's row exists)
 *   and its conditional write is about to go out.
 * - `before-renew-write`: a renewal's write is about to go out (a renewal slow to land).
 */
export type IssuerInterleavePoint = 'before-claim' | 'before-renew-write';

/** Where a store stands when it calls its {@link IssuerInterleave} hook. */
export interface IssuerInterleaveStep {
  readonly point: IssuerInterleavePoint;
  readonly backend: string;
  readonly tag: string;
  readonly node: string;
}

/**
 * For tests only (SegmentStoreOptions.issuerInterleave): the store waits for what the hook returns
 * before it goes on, so a test can run another node's whole claim in the gap. A hook that throws
 * fails the call with what it threw. Absent (always, outside tests), it costs one comparison.
 */
export type IssuerInterleave = (step: IssuerInterleaveStep) => void | Promise<void>;

/** Validates a claim's arguments; INVALID_ARGUMENT naming the first bad one. */
export function checkClaim(tag: string, node: string, address: string, ttlMs: number): void {
  checkTag(tag);
  checkNode(node);
  checkText('address', address, true);
  checkIssuerTtl(ttlMs);
}

/** Validates a renewal's or release's arguments. */
export function checkHolding(tag: string, node: string, epoch: bigint, ttlMs?: number): void {
  checkTag(tag);
  checkNode(node);
  if (typeof epoch !== 'bigint' || epoch < 1n)
    throw new IdMintError('INVALID_ARGUMENT', `epoch must be a bigint >= 1, got ${String(epoch)}`);
  if (ttlMs !== undefined) checkIssuerTtl(ttlMs);
}

function checkNode(node: string): void {
  checkText('node', node, false);
}

function checkText(name: string, value: unknown, emptyAllowed: boolean): void {
  if (
    typeof value !== 'string' ||
    (!emptyAllowed && value.length === 0) ||
    value.length > ISSUER_TEXT_MAX ||
    value.includes('\u0000')
  )
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${name} must be a string of ${emptyAllowed ? 0 : 1} to ${ISSUER_TEXT_MAX} characters ` +
        `without U+0000, got ${JSON.stringify(value)}`,
    );
}

export function checkIssuerTtl(ttlMs: number): number {
  const { min, max } = ISSUER_TTL_BOUNDS;
  if (!Number.isSafeInteger(ttlMs) || ttlMs < min || ttlMs > max)
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `issuer lease ttlMs must be an integer from ${min} to ${max}, got ${String(ttlMs)}`,
    );
  return ttlMs;
}

/** LEASE_LOST for a renewal of a holding that is no longer the tag's live one. */
export function issuerLeaseLost(backend: string, tag: string, epoch: bigint): IdMintError {
  return new IdMintError(
    'LEASE_LOST',
    `${backend} store: the issuer lease of tag "${tag}" at epoch ${epoch} is lost (expired, ` +
      'released or claimed by another node)',
    { details: { backend, tag, epoch: epoch.toString() } },
  );
}

/** TAG_NOT_FOUND for a claim on a tag the store does not have. */
export function issuerTagNotFound(tag: string): IdMintError {
  return tagNotFound(tag);
}

/** A live holder as {@link IssuerBusy}, from what a store read. */
export function issuerBusy(
  node: unknown,
  address: unknown,
  epoch: bigint,
  remainingMs: unknown,
): IssuerBusy {
  const remaining = Number(remainingMs);
  return {
    held: false,
    node: String(node ?? ''),
    address: String(address ?? ''),
    epoch,
    remainingMs: Number.isFinite(remaining) ? Math.max(0, Math.round(remaining)) : 0,
  };
}
