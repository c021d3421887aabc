import type { TagRecord } from '../ports/segment-store.ts';

/**
 * A tag on the wire, as the HTTP API answers it and `idmint tags list --json` prints it: `maxId`
 * as a decimal string (it may exceed 2^53), dates as ISO strings. The client reads the same shape.
 */
export interface TagJson {
  readonly tag: string;
  readonly maxId: string;
  readonly step: number;
  readonly description: string | null;
  readonly updatedAt: string | null;
  /** True when the tag's IDs are answered in their opaque form (docs/formats.md). */
  readonly opaque: boolean;
}

/** Converts a stored tag to its wire form. */
export function tagJson(record: TagRecord): TagJson {
  return {
    tag: record.tag,
    maxId: record.maxId.toString(),
    step: record.step,
    description: record.description,
    updatedAt: record.updatedAt === null ? null : record.updatedAt.toISOString(),
    opaque: record.opaque === true,
  };
}
