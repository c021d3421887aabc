// High-water marks of a set's databases: what bounds a lost database's IDs (docs/segments.md,
// Replacing a lost database). Database r's mark for a tag, `high/<r>/<tag>`, is kept on every
// member, and the rule is:
//
//   No ID of a range from database r is used before the range's end is at or below database r's
//   mark on another member and on r itself; a mark is raised on the others first, then on r.
//
// Marks only go up (compare-and-set to a higher value), and `idmint db init` moves them to a new
// holder of index r keeping their value. So if r is lost, the marks for r on the members left
// bound every ID r handed out, and its replacement starts above them; and r's own copy never runs
// ahead of the others', so a member replaced in turn is seeded from r's copy without losing one.
//
// A mark is raised ahead of use, by HEADROOM_RANGES ranges, and again once a range ends past its
// half: one write in about 500 ranges, and a database left alone (every other one down) serves
// at least 500 more ranges past its last mark before it must stop. A replacement skips at most
// that many of the lost database's IDs.
import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { MAX_SEGMENT_ID } from '../../core/segment-limits.ts';
import type { SegmentRange } from '../../ports/segment-store.ts';
import { formatHigh, highKey, parseHigh, type HighMark, type SetEntry } from './set-records.ts';

/** A mark is raised this many ranges (of the one being covered) past the range's end. */
export const HEADROOM_RANGES = 1000n;

/** Compare-and-set attempts on one mark before giving up (other writers raising it at once). */
const MARK_ATTEMPTS = 8;

/** The part of a set's member the marks need (SetMemberStore). */
export interface MarkStore {
  readSetEntries(keys: readonly string[]): Promise<(SetEntry | undefined)[]>;
  writeSetEntry(key: string, version: number | undefined, value: string): Promise<boolean>;
}

/** How {@link SetHighs} reaches the databases: each call bounded and counted by the set. */
export interface MarkAccess {
  /** How many databases the set has. */
  readonly size: number;
  /** Database `index`'s name for messages. */
  name(index: number): string;
  /** Runs `run` on database `index`'s store; rejects with an IdMintError. */
  call<T>(index: number, run: (store: MarkStore) => Promise<T>): Promise<T>;
  /**
   * Database `index`'s identity (its `self` record), null when it has none; `fresh` reads it again.
   */
  identity(index: number, fresh: boolean): Promise<string | null>;
}

/** One mark as read from one member. */
interface ReadMark {
  readonly entry: SetEntry | undefined;
  readonly mark: HighMark | undefined;
}

/** What {@link SetHighs.settle} found: the marks' values over every read it made. */
export interface SettledMarks {
  /** Per index, the highest mark any member keeps for it (0 where none). */
  readonly highest: readonly bigint[];
  /** The highest mark that named a database not in the list (a lost one, replaced); 0 if none. */
  readonly lost: bigint;
}

type RaiseOutcome = 'raised' | 'replaced';
type Settled = PromiseSettledResult<RaiseOutcome>;

/**
 * The high-water marks of one set, with what this process knows is kept (see the file's comment).
 */
export class SetHighs {
  readonly #access: MarkAccess;
  /** Per tag, per index: a mark this process knows is kept on database index and on another. */
  readonly #known = new Map<string, (bigint | undefined)[]>();

  constructor(access: MarkAccess) {
    this.#access = access;
  }

  /**
   * Resolves once the IDs of `range`, allocated from database `index`, may be used: its end is
   * at or below a mark kept on another member and on `index` itself, raised first if need be.
   * Throws STORE_UNAVAILABLE when no other member could keep the raised mark (the range is then
   * never used: skipped), TAG_MISCONFIGURED when the marks name another database at `index` (this
   * one was replaced in the set). A set of one database keeps no marks.
   */
  async cover(index: number, range: SegmentRange): Promise<void> {
    if (this.#access.size < 2) return;
    const key = highKey(index, range.tag);
    const headroom = (range.end - range.start) * HEADROOM_RANGES;
    const knownOfTag = this.#known.get(range.tag) ?? [];
    this.#known.set(range.tag, knownOfTag);
    let known = knownOfTag[index];
    if (known === undefined) {
      // A process starting: database index's own mark is never above what another member keeps.
      known = await this.#ownMark(index, key);
      knownOfTag[index] = known;
    }
    if (known !== undefined && range.end + headroom / 2n <= known) return;
    const target = range.end + headroom > MAX_SEGMENT_ID ? MAX_SEGMENT_ID : range.end + headroom;
    const failure = await this.#raise(index, range.tag, target);
    if (failure === undefined) {
      knownOfTag[index] = target;
      return;
    }
    if (known !== undefined && range.end <= known) return; // still under a mark already kept
    throw failure;
  }

  /** Per index 0 to `indexes` - 1, the highest mark for `tag` any member keeps (0 where none). */
  async highest(tag: string, indexes: number): Promise<bigint[]> {
    return highestOf(await this.#read(tag, indexes), indexes);
  }

  /**
   * For `idmint db init`: makes every member's mark for `tag` at each index name `ids[index]`, at
   * least `floors[index]` high (0 where absent), keeping any higher value. Compare-and-set, read
   * again on a conflict; from then on no database but `ids[index]` raises one. Resolves with the
   * marks' values over every read (a mark's value is never lost by moving it). Forgets what this
   * process knew of the tag's marks.
   */
  async settle(
    tag: string,
    ids: readonly string[],
    floors: readonly bigint[] = [],
  ): Promise<SettledMarks> {
    this.#known.delete(tag);
    let highest: bigint[] = ids.map(() => 0n);
    let lost = 0n;
    for (let attempt = 0; attempt < MARK_ATTEMPTS; attempt++) {
      const marks = await this.#read(tag, ids.length);
      highest = highestOf(marks, ids.length).map((high, index) => max(high, highest[index] ?? 0n));
      for (const { mark } of marks.flat()) {
        if (mark !== undefined && mark.member !== null && !ids.includes(mark.member))
          lost = max(lost, mark.high);
      }
      const writes = marks.flatMap((member, holder) =>
        member.flatMap(({ entry, mark }, index) => {
          const floor = floors[index] ?? 0n;
          const id = ids[index] as string;
          if (mark !== undefined && mark.member === id && mark.high >= floor) return [];
          const value = formatHigh({ member: id, high: max(mark?.high ?? 0n, floor) });
          const key = highKey(index, tag);
          return [
            this.#access.call(holder, (store) => store.writeSetEntry(key, entry?.version, value)),
          ];
        }),
      );
      if ((await Promise.all(writes)).every(Boolean)) return { highest, lost };
    }
    const why = `its high-water marks changed under every one of ${MARK_ATTEMPTS} attempts to \
settle them`;
    throw new IdMintError('STORE_UNAVAILABLE', `tag "${tag}": ${why}; run it again`, {
      details: { tag },
    });
  }

  /** Every member's marks for `tag` at indexes 0 to `indexes` - 1: `[member][index]`. */
  async #read(tag: string, indexes: number): Promise<ReadMark[][]> {
    const keys = Array.from({ length: indexes }, (_, index) => highKey(index, tag));
    const read = async (member: number): Promise<ReadMark[]> => {
      const entries = await this.#access.call(member, (store) => store.readSetEntries(keys));
      const where = this.#where(member);
      return entries.map((entry, index) => ({
        entry,
        mark: entry && parseHigh(entry, where, keys[index] as string),
      }));
    };
    return Promise.all(Array.from({ length: this.#access.size }, (_, member) => read(member)));
  }

  /** Database index's own mark for `key`, if it names index's identity. */
  async #ownMark(index: number, key: string): Promise<bigint | undefined> {
    const [entry] = await this.#access.call(index, (store) => store.readSetEntries([key]));
    if (entry === undefined) return undefined;
    const mark = parseHigh(entry, this.#where(index), key);
    return mark.member === (await this.#access.identity(index, false)) ? mark.high : undefined;
  }

  /**
   * Raises database index's mark to `target` on every other member, and once one of them keeps
   * it, on index itself. Undefined when both are done; else the error that says why not.
   */
  async #raise(index: number, tag: string, target: bigint): Promise<IdMintError | undefined> {
    const key = highKey(index, tag);
    const others = Array.from({ length: this.#access.size }, (_, member) => member).filter(
      (m) => m !== index,
    );
    const kept = await firstRaised(
      others.map((member) => this.#raiseOn(member, index, key, target)),
    );
    if (kept !== 'raised') return this.#notKept(index, tag, kept, others);
    const own = await this.#raiseOn(index, index, key, target).then(
      (value): Settled => ({ status: 'fulfilled', value }),
      (reason: unknown): Settled => ({ status: 'rejected', reason }),
    );
    return own.status === 'fulfilled' && own.value === 'raised'
      ? undefined
      : this.#notKept(index, tag, [own], [index]);
  }

  /**
   * Raises database index's mark on `member` to at least `target`; 'replaced' when the mark names
   * another database.
   */
  async #raiseOn(
    member: number,
    index: number,
    key: string,
    target: bigint,
  ): Promise<RaiseOutcome> {
    let fresh = false;
    for (let attempt = 0; attempt < MARK_ATTEMPTS; attempt++) {
      const id = await this.#access.identity(index, fresh);
      const [entry] = await this.#access.call(member, (store) => store.readSetEntries([key]));
      const mark = entry && parseHigh(entry, this.#where(member), key);
      if (mark !== undefined && mark.member !== null && mark.member !== id) {
        // Perhaps `idmint db init` recorded the set since this process read index's identity.
        if (fresh) return 'replaced';
        fresh = true;
        continue;
      }
      if (mark !== undefined && mark.high >= target) return 'raised';
      const value = formatHigh({ member: id ?? mark?.member ?? null, high: target });
      if (
        await this.#access.call(member, (store) => store.writeSetEntry(key, entry?.version, value))
      )
        return 'raised';
    }
    const why =
      `the high-water mark "${key}" changed under every one of ${MARK_ATTEMPTS} attempts to ` +
      `raise it`;
    throw new IdMintError('STORE_UNAVAILABLE', `${this.#where(member)}: ${why}`);
  }

  /** Why the mark of database `index` was not raised, from the outcomes on `members`. */
  #notKept(
    index: number,
    tag: string,
    outcomes: readonly Settled[],
    members: readonly number[],
  ): IdMintError {
    if (outcomes.some((o) => o.status === 'fulfilled' && o.value === 'replaced')) {
      return new IdMintError(
        'TAG_MISCONFIGURED',
        `tag "${tag}": ${this.#where(index)} was replaced in the set ` +
          `(its members keep marks for another database at index ${index}); run this node ` +
          `with the list ` +
          '"idmint db init" last formed, and never use the replaced database again; the ' +
          'range is skipped',
        { details: { tag, column: 'high', database: index } },
      );
    }
    const reasons = outcomes.map((o, k) => {
      const failure = o.status === 'rejected' ? o.reason : undefined;
      const why =
        o.status === 'fulfilled'
          ? 'not raised'
          : isIdMintError(failure)
            ? failure.message
            : String(failure);
      return `${this.#where(members[k] as number)}: ${why}`;
    });
    const where = members.includes(index) ? 'it' : 'any other database of the set';
    return new IdMintError(
      'STORE_UNAVAILABLE',
      `tag "${tag}": database ${index} allocated a range past its high-water mark, ` +
        `and the mark could not be raised on ${where}, so the range is skipped ` +
        `(a database alone serves only up to its mark): ${reasons.join('; ')}`,
      { details: { tag, database: index } },
    );
  }

  #where(member: number): string {
    return `database ${member} (${this.#access.name(member)})`;
  }
}

/** Per index, the highest mark any member keeps (0 where none). */
function highestOf(marks: readonly (readonly ReadMark[])[], indexes: number): bigint[] {
  const at = (index: number) =>
    marks.reduce((high, member) => max(high, member[index]?.mark?.high ?? 0n), 0n);
  return Array.from({ length: indexes }, (_, index) => at(index));
}

function max(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

/**
 * 'raised' as soon as one of `outcomes` is; else, once all have settled, every outcome (a mark
 * naming another database, or a failure). The others go on in the background.
 */
function firstRaised(outcomes: readonly Promise<RaiseOutcome>[]): Promise<'raised' | Settled[]> {
  return new Promise((resolve) => {
    for (const outcome of outcomes)
      outcome.then(
        (value) => value === 'raised' && resolve('raised'),
        () => undefined,
      );
    Promise.allSettled(outcomes).then((settled) => resolve(settled));
  });
}
