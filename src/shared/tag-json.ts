import type { Periodic, Tag } from '../contract/tags.ts';
import { parsePeriodic } from '../core/periodic.ts';
import type { TagRecord } from '../ports/segment-store.ts';

/**
 * A stored tag in its wire form (the contract's Tag), as the HTTP API answers it and
 * `idmint tags list --json` prints it: `maxId` as a decimal string (it may exceed 2^53), dates as
 * ISO strings.
 */
export function tagJson(record: TagRecord): Tag {
  return {
    tag: record.tag,
    maxId: record.maxId.toString(),
    step: record.step,
    description: record.description,
    updatedAt: record.updatedAt === null ? null : record.updatedAt.toISOString(),
    opaque: record.opaque === true,
    delta: record.delta ?? 1,
    remainder: record.remainder ?? 0,
    ...(record.periodic === undefined ? {} : { periodic: periodicJson(record.periodic) }),
    ...(record.ordering === undefined ? {} : { ordering: record.ordering }),
  };
}

/** A stored periodic option as the wire shows it; one this version cannot read, as stored. */
function periodicJson(text: string): Periodic {
  try {
    return parsePeriodic(text).toOptions();
  } catch {
    return JSON.parse(text) as Periodic;
  }
}
