// The records a set of segment databases keeps of itself, in each database beside Leaf's table
// (idmint's own `<table>_set` table; the hash `<prefix>:set` on Redis), as versioned text entries
// (SetMemberStore.readSetEntries / writeSetEntry). Three kinds:
//
//   self           this database's identity, a random ID made the first time `idmint db init`
//                  meets it: a set knows its members by it, whatever URL reaches them.
//   set            the set this database was last formed into: every member's identity and name,
//                  in their order. A database that issued IDs is never left out of a set while
//                  a member records it (MultiSegmentStore.join).
//   high/<r>/<tag> a high-water mark of database r's IDs of the tag, kept on every member: no
//                  range of database r is used before its end is at or below a mark on r itself
//                  and on another member, so a lost database's IDs are bounded by what the others
//                  keep (set-highs.ts), and the mark names the database it is for, so a database
//                  replaced in the set can no longer raise it.
import { IdMintError } from '../../core/errors.ts';
import { MAX_SEGMENT_ID } from '../../core/segment-limits.ts';

/** One stored entry: its text and the version a compare-and-set names. */
export interface SetEntry {
  readonly version: number;
  readonly value: string;
}

/** A member as the `set` record names it. */
export interface RecordedMember {
  /** Its identity (its `self` record). */
  readonly id: string;
  /** Its URL with the password hidden, for messages. */
  readonly name: string;
}

/**
 * A high-water mark: every ID database r handed out of the tag is below `high`, while `member` is
 * database r.
 */
export interface HighMark {
  /**
   * Identity of the database the mark is for; null when it was raised before the set was recorded.
   */
  readonly member: string | null;
  readonly high: bigint;
}

export const SELF_KEY = 'self';
export const SET_KEY = 'set';

/** The key of database `index`'s high-water mark for `tag`. */
export function highKey(index: number, tag: string): string {
  return `high/${index}/${tag}`;
}

/** A new identity for a database. */
export function newMemberId(): string {
  return globalThis.crypto.randomUUID();
}

export function formatSelf(id: string): string {
  return JSON.stringify({ id });
}

export function formatSet(members: readonly RecordedMember[]): string {
  return JSON.stringify({ members: members.map(({ id, name }) => ({ id, name })) });
}

export function formatHigh(mark: HighMark): string {
  return JSON.stringify({ member: mark.member, high: mark.high.toString() });
}

/** The identity in a `self` record. CONFIG_INVALID for text idmint did not write. */
export function parseSelf(entry: SetEntry, where: string): string {
  const parsed = parseJson(entry.value) as { id?: unknown } | undefined;
  if (typeof parsed?.id !== 'string' || parsed.id.length === 0)
    throw malformed(where, SELF_KEY, entry.value);
  return parsed.id;
}

/** The members in a `set` record. CONFIG_INVALID for text idmint did not write. */
export function parseSet(entry: SetEntry, where: string): RecordedMember[] {
  const parsed = parseJson(entry.value) as { members?: unknown } | undefined;
  const members = parsed?.members;
  const isMember = (m: { id?: unknown; name?: unknown } | null) =>
    typeof m?.id === 'string' && typeof m.name === 'string';
  const valid = Array.isArray(members) && members.length > 0 && members.every(isMember);
  if (!valid) throw malformed(where, SET_KEY, entry.value);
  return (members as RecordedMember[]).map(({ id, name }) => ({ id, name }));
}

/** A high-water mark. CONFIG_INVALID for text idmint did not write. */
export function parseHigh(entry: SetEntry, where: string, key: string): HighMark {
  const parsed = parseJson(entry.value) as { member?: unknown; high?: unknown } | undefined;
  const { member, high } = parsed ?? {};
  const decimal = typeof high === 'string' && /^(0|[1-9][0-9]{0,18})$/.test(high);
  const valid =
    (member === null || typeof member === 'string') && decimal && BigInt(high) <= MAX_SEGMENT_ID;
  if (!valid) throw malformed(where, key, entry.value);
  return { member, high: BigInt(high) };
}

function malformed(where: string, key: string, value: string): IdMintError {
  const shown = JSON.stringify(value.slice(0, 100));
  return new IdMintError(
    'CONFIG_INVALID',
    `${where}: the set record "${key}" is not one idmint wrote: ${shown}`,
    {
      details: { key },
    },
  );
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
