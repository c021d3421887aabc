// Whether a list of databases may be (or be formed into) the set its databases record: the rules
// `idmint db init` (MultiSegmentStore.join) and start-up (MultiSegmentStore.verify) apply to the
// `self` and `set` records (set-records.ts). Pure: the records are read and written by the set.
import { IdMintError } from '../../core/errors.ts';
import type { RecordedMember } from './set-records.ts';

/** What one listed database records of itself: its identity and the set it was last formed into. */
export interface MemberRecords {
  /** Its identity, or null when it has none yet. */
  readonly id: string | null;
  /** The members of the set it records, in order, or undefined when it records none. */
  readonly set: readonly RecordedMember[] | undefined;
}

/** A database of the list: its name (URL, password hidden) and what it records. */
export interface ListedMember extends MemberRecords {
  readonly name: string;
  /** Whether it holds any tag row. */
  readonly hasRows: boolean;
}

/** A recorded member missing from the list, where it was recorded. */
interface Missing {
  readonly member: RecordedMember;
  /** Its index in the recorded set. */
  readonly index: number;
  readonly set: readonly RecordedMember[];
  /** The listed database whose record names it. */
  readonly by: number;
}

const DOCS = 'docs/segments.md, Several databases';

/** The command that forms `names` into a set, for messages (passwords stay hidden). */
export function initCommand(names: readonly string[], replace?: number): string {
  return (
    `idmint db init --stores ` +
    `${names.join(',')}${replace === undefined ? '' : ` --replace ${replace}`}`
  );
}

/**
 * `idmint db init`'s check, before anything is written: every database a listed one records as a
 * member of its set must be in the list, since its IDs are known only to its own rows (and to
 * the high-water marks); sets never shrink. `replace` (an index) allows exactly one recorded
 * member to be left out, when it is lost for good: the list must then be the recorded set with an
 * empty database at that index in its place (once that is recorded, `replace` changes nothing,
 * so a run cut short can be run again as it was). Throws INVALID_ARGUMENT naming what is wrong
 * and the command that fixes it. Every listed database has an identity by now.
 */
export function checkJoin(list: readonly ListedMember[], replace: number | undefined): void {
  const names = list.map((m) => m.name);
  list.forEach((member, index) => {
    const first = list.findIndex((other) => other.id === member.id);
    if (first === index) return;
    const what = `database ${first} (${list[first]?.name}) and database ${index} (${member.name})`;
    const why =
      `${what} are one database (set record identity ${member.id}); list each database of a ` +
      `set once`;
    throw new IdMintError('INVALID_ARGUMENT', why, { details: { key: 'segment.stores' } });
  });
  const ids = new Set(list.map((m) => m.id));
  const missing = new Map<string, Missing>();
  list.forEach((listed, by) => {
    listed.set?.forEach((member, index) => {
      if (ids.has(member.id) || missing.has(member.id)) return;
      missing.set(member.id, { member, index, set: listed.set ?? [], by });
    });
  });
  if (replace !== undefined) {
    checkReplacement(list, replace, [...missing.values()]);
    return;
  }
  const [first] = missing.values();
  if (first === undefined) return;
  const { member, index, set, by } = first;
  const newcomer = list[index];
  const empty = newcomer !== undefined && newcomer.set === undefined && !newcomer.hasRows;
  const replacing =
    set.length === list.length && empty
      ? `, or, if it is lost for good and ${newcomer.name} replaces it, run ` +
        `"${initCommand(names, index)}"`
      : '';
  throw new IdMintError(
    'INVALID_ARGUMENT',
    `database ${index} of the set recorded in database ${by} (${list[by]?.name}), ` +
      `${member.name}, ` +
      'is not in the list: a database that issued IDs is never left out of its set; ' +
      `list all ${set.length} of them in their order (new ones after)${replacing} (${DOCS})`,
    { details: { key: 'segment.stores', missing: missing.size } },
  );
}

function checkReplacement(
  list: readonly ListedMember[],
  replace: number,
  missing: readonly Missing[],
): void {
  const refuse = (why: string) =>
    new IdMintError('INVALID_ARGUMENT', `--replace ${replace}: ${why} (${DOCS})`, {
      details: { key: 'segment.stores', replace },
    });
  if (!Number.isSafeInteger(replace) || replace < 0 || replace >= list.length) {
    throw refuse(`there is no database ${replace} in a list of ${list.length}`);
  }
  const [lost, ...more] = missing;
  // Replaced already (a run that recorded the new member, then was cut short): a plain join.
  if (lost === undefined) return;
  if (more.length > 0) {
    const names = missing.map((m) => m.member.name).join(', ');
    throw refuse(
      `${missing.length} recorded databases are missing from the list (${names}); ` +
        'one is replaced at a time, and two lost at once leave no bound on their IDs',
    );
  }
  const { set } = lost;
  const others = set.some((member, index) => index !== replace && member.id !== list[index]?.id);
  if (lost.index !== replace || set.length !== list.length || others) {
    throw refuse(
      `the list must be the recorded set (${listed(set)}) with only database ${replace} in ` +
        `another's place, ` +
        'in the same order; make other changes with a separate "idmint db init"',
    );
  }
  const newcomer = list[replace] as ListedMember;
  if (newcomer.set !== undefined || newcomer.hasRows) {
    const holds = newcomer.hasRows ? 'tag rows' : 'the record of a set';
    throw refuse(
      `${newcomer.name} must be an empty database (no tag rows, no set record); it holds ${holds}`,
    );
  }
}

/**
 * The start-up check's findings for a list against what its databases record (undefined for a
 * database that did not answer): one line per problem, each naming the database and the fix.
 * None for a set no database records, when no database holds a tag yet (nothing issued) or the
 * set has one database; such a set with tags is refused until `idmint db init` records it.
 */
export function membershipProblems(
  names: readonly string[],
  records: readonly (MemberRecords | undefined)[],
  anyRows: boolean,
): string[] {
  const answered = records.flatMap((r, index) => (r === undefined ? [] : [{ ...r, index }]));
  const recorded = mostRecorded(answered);
  if (recorded === undefined) {
    if (!anyRows || names.length < 2) return [];
    return [
      "no database records the set's members (it was formed before idmint recorded them, " +
        `or its rows were made without "idmint db init"): run "${initCommand(names)}" once, ` +
        'which records them and changes no ID',
    ];
  }
  const problems: string[] = [];
  const theSet = `the set its databases record (${listed(recorded)})`;
  const form = `run "${initCommand(names)}" to form the new set`;
  for (const { id, set, index } of answered) {
    const where = `database ${index} (${names[index]})`;
    const at = id === null ? -1 : recorded.findIndex((m) => m.id === id);
    if (at >= 0 && (set === undefined || !sameSet(set, recorded))) {
      const own = set === undefined ? 'no set' : `another set (${listed(set)})`;
      problems.push(
        `${where} records ${own}, unlike the others (${listed(recorded)}): ` +
          'an "idmint db init" was cut short or run with another list; run it again with ' +
          'the list to use',
      );
    } else if (at >= 0 && at !== index) {
      const order = 'list them in that order, or form the new one with "idmint db init"';
      problems.push(`${where} is database ${at} of ${theSet}: ${order}`);
    } else if (at < 0 && set !== undefined) {
      problems.push(
        `${where} is not in ${theSet} and records another (${listed(set)}): ` +
          "a database replaced in its set, or of another set; list the set's own database there",
      );
    } else if (at < 0 && recorded.length === names.length && recorded[index] !== undefined) {
      problems.push(
        `${where} is not in the set its databases record, whose database ${index} is ` +
          `${recorded[index]?.name}: ` +
          `if that database is lost for good, run "${initCommand(names, index)}" to replace it`,
      );
    } else if (at < 0) {
      problems.push(
        `${where} is not in the set of ${recorded.length} its databases record: ${form}`,
      );
    }
  }
  if (recorded.length !== names.length && problems.length === 0) {
    problems.push(
      `the list has ${names.length} databases, the set its databases record ` +
        `${recorded.length}: ${form}`,
    );
  }
  return problems;
}

/**
 * The set most of the answering databases record: a database replaced in a set still records
 * its old one, and a run cut short leaves some with the new one.
 */
function mostRecorded(answered: readonly MemberRecords[]): readonly RecordedMember[] | undefined {
  let recorded: readonly RecordedMember[] | undefined;
  let votes = 0;
  for (const { set } of answered) {
    const count =
      set === undefined
        ? 0
        : answered.filter((r) => r.set !== undefined && sameSet(r.set, set)).length;
    if (count > votes) [recorded, votes] = [set, count];
  }
  return recorded;
}

function sameSet(a: readonly RecordedMember[], b: readonly RecordedMember[]): boolean {
  return a.length === b.length && a.every((m, i) => m.id === b[i]?.id);
}

function listed(set: readonly RecordedMember[]): string {
  return set.map((m) => m.name).join(', ');
}
