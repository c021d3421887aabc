// The `ordering` option of a tag (docs/segments.md, Cluster order) as every store checks, stores
// and reads it. Set only when the tag is created, never changed.

import { IdMintError } from '../core/errors.ts';
import type { NewTag, SegmentResidue, TagOrdering } from '../ports/segment-store.ts';

/** The column (SQL) or hash field (Redis) that holds a tag's ordering. */
export const ORDERING_COLUMN = 'ordering';

/** Its SQL type: NULL on every tag that is not cluster-ordered, so Leaf's INSERTs still work. */
export const ORDERING_COLUMN_TYPE = 'varchar(16) DEFAULT NULL';

/**
 * A new tag's ordering, or null: INVALID_ARGUMENT for a value other than `cluster`, and for what
 * cannot keep the cluster-wide order: a periodic tag (its periods restart) or an opaque one (its
 * IDs are encrypted, in no order).
 */
export function checkNewOrdering(
  tag: Pick<NewTag, 'tag'> & { ordering?: unknown; periodic?: unknown; opaque?: unknown },
): TagOrdering | null {
  const ordering: unknown = tag.ordering;
  if (ordering === undefined) return null;
  if (ordering !== 'cluster')
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `ordering must be "cluster" or absent, got ${JSON.stringify(ordering)}`,
    );
  if (tag.periodic !== undefined)
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `tag "${String(tag.tag)}" cannot be both periodic and cluster-ordered: a periodic ` +
        'sequence starts again each period, so its IDs do not increase across periods',
    );
  if (tag.opaque === true) throw orderedNotOpaque(String(tag.tag));
  return 'cluster';
}

/** INVALID_ARGUMENT for a tag that would be opaque and cluster-ordered at once. */
export function orderedNotOpaque(tag: string): IdMintError {
  return new IdMintError(
    'INVALID_ARGUMENT',
    `tag "${tag}" cannot be both opaque and cluster-ordered: opaque IDs are encrypted, so they ` +
      'keep no order',
    { details: { tag } },
  );
}

/**
 * A stored ordering as a TagRecord field: absent for NULL or '' (every tag not cluster-ordered);
 * any other value reads as `cluster`, erring on the side that keeps the order (a value written
 * outside idmint).
 */
export function toOrdering(value: unknown): { ordering?: TagOrdering } {
  return value === undefined || value === null || value === '' ? {} : { ordering: 'cluster' };
}

/** INVALID_ARGUMENT for an ordered tag on a table without the column (a Leaf table). */
export function noOrderingColumn(tag: string, table: string, cause: unknown): IdMintError {
  return new IdMintError(
    'INVALID_ARGUMENT',
    `tag "${tag}" cannot be cluster-ordered: table ${table} has no ${ORDERING_COLUMN} column ` +
      `(a Leaf table); run "idmint db init" on it to add the column`,
    { cause, details: { tag } },
  );
}

/**
 * TAG_MISCONFIGURED from database r > 0 of a set for a cluster-ordered tag: only database 0
 * allocates one, so its ranges come from one `max_id` and increase as a single store's do (the
 * set then tries database 0; docs/segments.md, Where a cluster-ordered tag's ordering and issuer
 * lease are kept).
 */
export function orderedInFirstDatabase(
  tag: string,
  residue: SegmentResidue | undefined,
): IdMintError {
  const where =
    residue === undefined ? '' : ` (this is database ${residue.offset} of ${residue.increment})`;
  return new IdMintError(
    'TAG_MISCONFIGURED',
    `tag "${tag}" is cluster-ordered: only database 0 of its set allocates it${where}`,
    { details: { tag, reason: 'ordered' } },
  );
}

/** True for {@link orderedInFirstDatabase}'s error. */
export function isOrderedElsewhere(error: unknown): boolean {
  return (
    error instanceof IdMintError &&
    error.code === 'TAG_MISCONFIGURED' &&
    (error.details as { reason?: unknown } | undefined)?.reason === 'ordered'
  );
}
