import { parsePeriodic } from '../../core/periodic.ts';
import { IdMintError, isIdMintError, type ErrorCode } from '../../core/errors.ts';
import {
  MAX_SEGMENT_DATABASES,
  checkDescription,
  checkStep,
  checkTag,
  tagNotFound,
} from '../../core/segment-limits.ts';
import type {
  FenceReport,
  FenceRequest,
  NewTag,
  SegmentRange,
  SegmentResidue,
  SegmentStore,
  StoreHistory,
  TagChanges,
  TagListing,
  TagPage,
  TagOrdering,
  TagRecord,
  TagUpdate,
} from '../../ports/segment-store.ts';
import type { IssuerLeases } from '../../ports/issuer-lease.ts';
import { isOrderedElsewhere } from '../tag-ordering.ts';
import {
  alignUp,
  byTag,
  checkNewTag,
  checkPageLimit,
  checkRaise,
  checkRelease,
  operationWords,
  residueText,
  sameResidue,
} from '../store-support.ts';
import { BackendCauses } from '../../shared/failure-cause.ts';
import { SetHighs, type MarkAccess, type MarkStore } from './set-highs.ts';
import {
  checkJoin,
  membershipProblems,
  type ListedMember,
  type MemberRecords,
} from './set-membership.ts';
import {
  SELF_KEY,
  SET_KEY,
  formatSelf,
  formatSet,
  newMemberId,
  parseSelf,
  parseSet,
} from './set-records.ts';
import type { SetEntry } from './set-records.ts';

/**
 * A store that can be one database of a set: the SegmentStore port opened with a residue class,
 * plus the compare-and-set that re-forms a set. SqlSegmentStore and RedisSegmentStore are both.
 */
export interface SetMemberStore extends SegmentStore {
  readonly residue?: SegmentResidue;
  /**
   * Sets the row's max_id and residue class to `to` if they are still exactly `from`; true when
   * set.
   */
  reassign(
    tag: string,
    from: { maxId: bigint; residue: SegmentResidue },
    to: { maxId: bigint; residue: SegmentResidue },
  ): Promise<boolean>;
  /**
   * The set's own records (set-records.ts) under `keys`: each entry's text and version, undefined
   * where there is none (all of them where the store has no place for them yet).
   */
  readSetEntries(keys: readonly string[]): Promise<(SetEntry | undefined)[]>;
  /**
   * Writes a set record if its version is still `version` (undefined: none yet); true when written.
   */
  writeSetEntry(key: string, version: number | undefined, value: string): Promise<boolean>;
}

/** Options of {@link MultiSegmentStore.join}. */
export interface SetJoinOptions {
  /**
   * The database at this index replaces the recorded member at the same index, lost for good
   * (`idmint db init --replace`): it must be empty, and is seeded above the lost one's high-water
   * marks. Without it, a recorded member missing from the list is refused.
   */
  readonly replace?: number;
}

/** One database of a set. */
export interface SetDatabase {
  /**
   * Its store, opened with `residue: { offset: <its index>, increment: <databases in the set> }`.
   */
  readonly store: SetMemberStore;
  /** How messages, logs and stats name it: its URL with the password hidden. */
  readonly name: string;
}

/** Options for {@link MultiSegmentStore}; durations in ms. */
export interface MultiSegmentStoreOptions {
  /**
   * The databases, in order: the one at index r issues only IDs ≡ r (mod the number of databases).
   */
  readonly databases: readonly SetDatabase[];
  /**
   * After a database fails, it is skipped for this long, doubling with each failure in a row.
   * Default 1000.
   */
  readonly backoffMs?: number;
  /** The longest a failing database is skipped before it is tried again. Default 10000. */
  readonly maxBackoffMs?: number;
  /** Time in ms for backoffs (default: `performance.now()`); tests pass a manual clock's. */
  readonly now?: () => number;
}

/** One database's health and counters, for stats and the health route. */
export interface SetDatabaseStats {
  /** Its index r: it issues IDs ≡ r (mod databases). */
  readonly index: number;
  readonly name: string;
  readonly backend: string;
  /** False while it is skipped after a failure. */
  readonly up: boolean;
  /** Failures in a row (0 when its last call succeeded). */
  readonly failuresInRow: number;
  /** Ms until it is tried again; 0 when up. */
  readonly retryInMs: number;
  /** Ranges it allocated. */
  readonly allocations: number;
  /** Calls that failed on it (the database unavailable or timing out). */
  readonly failures: number;
  /** The latest failure's message while it is down; else null. */
  readonly lastError: string | null;
}

/** What {@link MultiSegmentStore.join} did to each tag. */
export interface SetJoinReport {
  readonly tags: readonly {
    readonly tag: string;
    readonly action: 'unchanged' | 'completed' | 'reformed';
    readonly maxId: bigint;
  }[];
}

/** What {@link MultiSegmentStore.join} did to one tag. */
type JoinedTag = SetJoinReport['tags'][number];

const DOCS = 'docs/segments.md, Several databases';

/** Re-reading a tag's rows after a compare-and-set lost to a live writer, at most this often. */
const JOIN_ATTEMPTS = 20;

interface Health {
  failuresInRow: number;
  retryAt: number;
  allocations: number;
  failures: number;
  lastError: string | null;
}

interface Outcome<T> {
  readonly index: number;
  readonly value?: T;
  readonly error?: IdMintError;
}

/**
 * Segment mode over a set of N databases, any mix of the SQL and Redis stores (Leaf's table in
 * each), with no single database to lose: database r holds each tag's row with offset r and
 * increment N, and only ever issues IDs ≡ r (mod N) (MySQL's auto_increment_offset and
 * auto_increment_increment, TinyId's remainder and delta). A range from it is `step` IDs of that
 * class, `N` apart (SegmentRange.stride), so ranges from different databases never share an ID
 * and need no coordination between the databases to allocate. One thing is kept across them: a
 * range's IDs are used only below its database's high-water mark kept on another database too
 * (set-highs.ts), so a database lost for good has its IDs bounded by the others.
 *
 * Allocation goes round-robin over the databases that are up; one that fails (unavailable, or
 * timing out) is skipped with a doubling backoff and tried again afterwards, and the same call
 * moves on to the next database, so allocation goes on while any two databases answer (one
 * alone, up to its marks). A database that lacks the tag, or whose row is not of its class, is
 * passed over for that call.
 *
 * Tag administration goes to every database: a tag is created, re-stepped and listed in all of
 * them. {@link join} forms or re-forms the set (a Leaf table joining it, a database added, a lost
 * one replaced) and records its members in every database (set-records.ts); {@link verify}
 * refuses, at start-up, a database whose rows are of another class, or a list that is not the
 * set its databases record.
 */
export class MultiSegmentStore implements SegmentStore {
  readonly backend = 'multi';
  readonly #databases: readonly SetDatabase[];
  readonly #health: Health[];
  readonly #backoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #now: () => number;
  /** Where the next allocation starts its round. */
  #turn = 0;
  readonly #highs: SetHighs;
  /** Each database's identity as last read (null: none recorded; undefined: not read yet). */
  readonly #identities: (string | null | undefined)[];
  /**
   * Per `<index>/<tag>`: why the range's mark could not be raised, while every other database is
   * down.
   */
  readonly #uncovered = new Map<string, IdMintError>();
  /**
   * The issuer leases of the set's cluster-ordered tags: the first database's (docs/segments.md,
   * Cluster order). One database decides, so two nodes never hold a tag at once through different
   * members; while it is down no node can claim or renew, and the holder fences itself.
   */
  readonly issuers?: IssuerLeases;
  /**
   * The cluster-ordered tags among those this store has read or been refused by a database for:
   * allocated from database 0 only, with no round trip to another first.
   */
  readonly #ordered = new Set<string>();

  constructor(options: MultiSegmentStoreOptions) {
    const databases = options?.databases;
    if (
      !Array.isArray(databases) ||
      databases.length < 1 ||
      databases.length > MAX_SEGMENT_DATABASES
    ) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `a set needs 1 to ${MAX_SEGMENT_DATABASES} databases, got ` +
          `${Array.isArray(databases) ? databases.length : String(databases)}`,
      );
    }
    const n = databases.length;
    databases.forEach((db: SetDatabase, index) => {
      const residue = db?.store?.residue;
      if (
        residue === undefined ||
        residue.offset !== index ||
        residue.increment !== n ||
        typeof db.store.reassign !== 'function'
      ) {
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `database ${index} of the set (${String(db?.name)}) must be a store opened with ` +
            `residue { offset: ${index}, increment: ${n} }, got ${JSON.stringify(residue)}`,
        );
      }
    });
    this.#databases = [...databases];
    this.#health = databases.map(() => ({
      failuresInRow: 0,
      retryAt: 0,
      allocations: 0,
      failures: 0,
      lastError: null,
    }));
    this.#backoffMs = checkMs('backoffMs', options.backoffMs ?? 1000);
    this.#maxBackoffMs = checkMs('maxBackoffMs', options.maxBackoffMs ?? 10_000);
    this.#now = options.now ?? (() => performance.now());
    this.#identities = databases.map(() => undefined);
    this.#highs = new SetHighs(this.#markAccess());
    const first = databases[0]?.store.issuers;
    if (first !== undefined) this.issuers = first;
  }

  /** How many databases the set has: N, the stride of every range. */
  get size(): number {
    return this.#databases.length;
  }

  /**
   * Creates each database's table (with the residue columns), or adds the columns to an existing
   * one. Every database must answer.
   */
  async init(): Promise<void> {
    this.#all('init', await this.#each(this.#indexes(), (db) => db.store.init()));
  }

  async allocate(tag: string, step?: number): Promise<SegmentRange> {
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    const round = this.#round();
    // A cluster-ordered tag comes from database 0 alone, so its ranges increase as one database's
    // do; the other databases refuse it anyway (found out once per tag and node: learnOrdering).
    const { order, skipped } = this.#ordered.has(tag)
      ? {
          order: round.order.filter((index) => index === 0),
          skipped: round.skipped.filter((index) => index === 0),
        }
      : round;
    const failed: Outcome<never>[] = [];
    for (const index of order) {
      const db = this.#databases[index] as SetDatabase;
      const blocked = this.#stillUncovered(index, tag);
      if (blocked !== undefined) {
        failed.push({ index, error: blocked });
        continue;
      }
      let range: SegmentRange;
      try {
        range = await db.store.allocate(tag, step);
        this.#succeeded(index);
        (this.#health[index] as Health).allocations++;
      } catch (cause) {
        const error = asStoreError(cause, db.name, 'allocate');
        if (error.code === 'INVALID_ARGUMENT') throw error;
        if (isOrderedElsewhere(cause)) this.#ordered.add(tag);
        this.#failed(index, error);
        failed.push({ index, error });
        continue;
      }
      try {
        // No ID of the range is used before a high-water mark kept elsewhere bounds it
        // (set-highs.ts).
        await this.#highs.cover(index, range);
        this.#uncovered.delete(`${index}/${tag}`);
        return range;
      } catch (cause) {
        // The range is skipped, never used; database index itself answered, so it is not backed
        // off.
        const error = asStoreError(cause, db.name, 'cover');
        if (error.code === 'STORE_UNAVAILABLE') this.#uncovered.set(`${index}/${tag}`, error);
        failed.push({ index, error });
      }
    }
    throw this.#combined(`tag "${tag}": no database of the set allocated a range`, failed, skipped);
  }

  /** Gives a tail back to the database of its class (`from mod N`). */
  async release(tag: string, from: bigint, to: bigint): Promise<boolean> {
    checkTag(tag);
    checkRelease(from, to);
    const index = Number(from % BigInt(this.size));
    const db = this.#databases[index] as SetDatabase;
    try {
      const released = await db.store.release(tag, from, to);
      this.#succeeded(index);
      return released;
    } catch (cause) {
      const error = asStoreError(cause, db.name, 'release');
      this.#failed(index, error);
      throw error;
    }
  }

  /**
   * Each database's history (each has its own, recorded in its own table). Every database must
   * answer.
   */
  async history(): Promise<StoreHistory[]> {
    const lists = this.#all(
      'reading the histories',
      await this.#each(this.#indexes(), (db) => db.store.history()),
    );
    return lists.flatMap((list, index) =>
      list.map((entry) => ({ ...entry, database: this.#name(index) })),
    );
  }

  /**
   * Fences every database (each its own rows, on its own record; `ifFences` is compared with each
   * database's own count). Every database must answer; one that fails is named, and the fence
   * may be run again (the others are fenced once more, which is safe).
   */
  async fence(request?: FenceRequest): Promise<FenceReport[]> {
    const reports = this.#all(
      'fencing',
      await this.#each(this.#indexes(), (db) => db.store.fence(request)),
    );
    return reports.flatMap((list, index) =>
      list.map((entry) => ({ ...entry, database: this.#name(index) })),
    );
  }

  /** Raises the tag in the database of `atLeast`'s class (`atLeast mod N`), as a give-back goes. */
  async raise(tag: string, atLeast: bigint): Promise<boolean> {
    checkTag(tag);
    checkRaise(atLeast, undefined);
    const index = Number(atLeast % BigInt(this.size));
    const db = this.#databases[index] as SetDatabase;
    try {
      const raised = await db.store.raise(tag, atLeast);
      this.#succeeded(index);
      return raised;
    } catch (cause) {
      const error = asStoreError(cause, db.name, 'raise');
      this.#failed(index, error);
      throw error;
    }
  }

  /**
   * Every tag of every database that answers, merged by name (see {@link getTag}). A database
   * that is down is left out; STORE_UNAVAILABLE only when none answers.
   */
  async listTags(): Promise<TagRecord[]> {
    const { order, skipped } = this.#round();
    const outcomes = await this.#each(order, (db) => db.store.listTags());
    // By index, so a merged record takes step and description from the lowest database.
    const answered = outcomes
      .filter((o) => o.value !== undefined)
      .sort((a, b) => a.index - b.index);
    if (answered.length === 0)
      throw this.#combined('listing tags: no database of the set answered', outcomes, skipped);
    const records = mergeByName(answered.map((o) => o.value ?? [])).sort(byTag);
    this.#learnOrdering(records);
    return records;
  }

  /**
   * Each database's changes since its own cursor (each database has its own clock), merged by
   * name. The cursor is the list of the databases' cursors. A database that does not answer keeps
   * its old cursor, so its changes are read when it is back; one with none yet (down when the
   * first cursor was taken) starts one. STORE_UNAVAILABLE only when none answers.
   */
  async listTagChanges(since: string | undefined): Promise<TagChanges> {
    const previous =
      since === undefined ? this.#indexes().map(() => null) : this.#parseChangeCursor(since);
    const outcomes = await this.#each(this.#indexes(), (db, index) =>
      db.store.listTagChanges(previous[index] ?? undefined),
    );
    const answered = outcomes
      .filter((o) => o.value !== undefined)
      .sort((a, b) => a.index - b.index);
    if (answered.length === 0)
      throw this.#combined('reading tag changes: no database of the set answered', outcomes, []);
    const cursors = [...previous];
    for (const { index, value } of answered) cursors[index] = value?.cursor ?? null;
    const records = mergeByName(answered.map((o) => o.value?.records ?? []));
    this.#learnOrdering(records);
    return { records, cursor: JSON.stringify(cursors) };
  }

  /**
   * Every database's pages in turn, database 0 first (a tag is in each database, and the full read
   * wants the union, as {@link listTags}). A database that fails is passed over, its tags read
   * from the others; STORE_UNAVAILABLE when the last database fails and none answered before.
   * The cursor: `[database, its cursor or null, whether one answered]`.
   */
  async listTagPage(after: string | undefined, limit: number): Promise<TagPage> {
    checkPageLimit(limit);
    const [index, inner, answeredBefore] =
      after === undefined ? [0, null, false] : this.#parsePageCursor(after);
    const db = this.#databases[index] as SetDatabase;
    let page: TagPage = { records: [], next: undefined };
    let answered = answeredBefore;
    try {
      page = await db.store.listTagPage(inner ?? undefined, limit);
      this.#succeeded(index);
      answered = true;
    } catch (cause) {
      const error = asStoreError(cause, db.name, 'listTagPage');
      this.#failed(index, error);
      if (index === this.size - 1 && !answered)
        throw new IdMintError(
          'STORE_UNAVAILABLE',
          `reading the tag list: no database of the set answered; database ${index} ` +
            `(${db.name}): ${error.message}`,
          { cause: error, details: { databases: this.size } },
        );
    }
    // The same database's next page, else the next database's first, else the end.
    const next =
      page.next !== undefined
        ? [index, page.next]
        : index + 1 < this.size
          ? [index + 1, null]
          : undefined;
    this.#learnOrdering(page.records);
    return {
      records: page.records,
      next: next === undefined ? undefined : JSON.stringify([...next, answered]),
    };
  }

  #parseChangeCursor(cursor: string): (string | null)[] {
    const parsed = parseJson(cursor);
    if (
      !Array.isArray(parsed) ||
      parsed.length !== this.size ||
      !parsed.every((c) => c === null || typeof c === 'string')
    ) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `a tag change cursor of this set is a list of ${this.size} database cursors, got ` +
          `${JSON.stringify(cursor)}`,
      );
    }
    return parsed as (string | null)[];
  }

  #parsePageCursor(cursor: string): [number, string | null, boolean] {
    const parsed = parseJson(cursor);
    if (
      !Array.isArray(parsed) ||
      parsed.length !== 3 ||
      !Number.isSafeInteger(parsed[0]) ||
      parsed[0] < 0 ||
      parsed[0] >= this.size ||
      !(parsed[1] === null || typeof parsed[1] === 'string') ||
      typeof parsed[2] !== 'boolean'
    ) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `a tag page cursor of this set is one it returned, got ${JSON.stringify(cursor)}`,
      );
    }
    return parsed as [number, string | null, boolean];
  }

  /**
   * The tag as the databases that answer hold it, merged: `maxId` the highest (every ID issued
   * is below it only if every database answered), step and description of the lowest database
   * that has it. Undefined when every database that answered lacks it: a tag is created in all of
   * them, so one answer is enough. STORE_UNAVAILABLE only when none answers.
   */
  async getTag(tag: string): Promise<TagRecord | undefined> {
    checkTag(tag);
    const { order, skipped } = this.#round();
    const outcomes = await this.#each(order, (db) => db.store.getTag(tag));
    const answered = outcomes
      .filter((o) => o.error === undefined)
      .sort((a, b) => a.index - b.index);
    if (answered.length === 0)
      throw this.#combined(
        `looking up tag "${tag}": no database of the set answered`,
        outcomes,
        skipped,
      );
    const found = answered.flatMap((o) => (o.value === undefined ? [] : [o.value]));
    const record = found.length === 0 ? undefined : merge(found);
    this.#learnOrdering([record]);
    return record;
  }

  /**
   * Creates the tag in every database, database r at the first ID of its class at or above
   * `startId`. Every database must answer first; where some already have the tag (a create cut
   * short), the others get it above their highest `max_id`, and the call completes it. TAG_EXISTS
   * only when every database has it.
   */
  async createTag(tag: NewTag): Promise<TagRecord> {
    const values = checkNewTag(tag);
    // Every database's start must have room for a range (it starts up to N - 1 higher), checked
    // before anything is written, so a bad start is refused whole, never created in some databases.
    for (const index of this.#indexes()) checkNewTag(tag, { offset: index, increment: this.size });
    const existing = this.#all(
      `creating tag "${values.tag}"`,
      await this.#each(this.#indexes(), (db) => db.store.getTag(values.tag)),
    );
    const present = existing.filter((record): record is TagRecord => record !== undefined);
    if (present.length === this.size)
      throw new IdMintError('TAG_EXISTS', `tag "${values.tag}" already exists`, {
        details: { tag: values.tag },
      });
    const floor = present.reduce(
      (highest, record) => (record.maxId > highest ? record.maxId : highest),
      values.startId,
    );
    const missing = this.#indexes().filter((index) => existing[index] === undefined);
    // A database lacking a row that others have may replace one whose IDs only the high-water
    // marks still bound: its row starts above them too.
    const marks = this.size > 1 ? await this.#highs.highest(values.tag, this.size) : [];
    const created = await this.#each(missing, (db, index) =>
      db.store
        // A periodic tag's own row issues nothing (max_id 2^63-1 everywhere): no start to agree on.
        .createTag(
          tag.periodic === undefined ? { ...tag, startId: max(floor, marks[index] ?? 0n) } : tag,
        )
        .catch(async (error: unknown) => {
          // Created meanwhile by another caller: what matters is that the row exists.
          if (isIdMintError(error, 'TAG_EXISTS'))
            return (await db.store.getTag(values.tag)) ?? Promise.reject(error);
          throw error;
        }),
    );
    const made = this.#all(
      `creating tag "${values.tag}" (created in ` +
        `${describeIndexes(created.filter((o) => o.value !== undefined))}; run it again when ` +
        `every database answers, to complete it)`,
      created,
    );
    // `made` is indexed by database: the ones that already had the tag are holes.
    const record = merge([
      ...present,
      ...made.filter((record): record is TagRecord => record !== undefined),
    ]);
    this.#learnOrdering([record]);
    return record;
  }

  /**
   * Changes the tag in every database that has it. Every database must answer; if one fails after
   * others changed, the error says so and running it again completes it.
   */
  async updateTag(tag: string, update: TagUpdate): Promise<TagRecord> {
    checkTag(tag);
    if (update?.step !== undefined) checkStep(update.step);
    if (update?.description !== undefined) checkDescription(update.description);
    const outcomes = await this.#each(this.#indexes(), (db) =>
      db.store
        .updateTag(tag, update)
        .catch((error: unknown) =>
          isIdMintError(error, 'TAG_NOT_FOUND') ? undefined : Promise.reject(error),
        ),
    );
    const updated = this.#all(
      `updating tag "${tag}" (updated in ` +
        `${describeIndexes(outcomes.filter((o) => o.value !== undefined))}; run it again when ` +
        `every database answers)`,
      outcomes,
    );
    const found = updated.filter((record): record is TagRecord => record !== undefined);
    if (found.length === 0) throw tagNotFound(tag);
    const record = merge(found);
    this.#learnOrdering([record]);
    return record;
  }

  /** Deletes the row in every database; every one must answer (running it again completes it). */
  async deleteTag(tag: string): Promise<boolean> {
    checkTag(tag);
    const outcomes = await this.#each(this.#indexes(), async (db) => {
      if (db.store.deleteTag === undefined)
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `the ${db.store.backend} store cannot delete tags`,
        );
      return db.store.deleteTag(tag);
    });
    const deleted = this.#all(
      `deleting tag "${tag}" (run it again when every database answers)`,
      outcomes,
    );
    return deleted.some((gone) => gone === true);
  }

  async close(): Promise<void> {
    await Promise.all(this.#databases.map((db) => db.store.close().catch(() => undefined)));
  }

  /** Per database: up or backing off, failures, allocations. */
  stats(): SetDatabaseStats[] {
    const now = this.#now();
    return this.#databases.map((db, index) => {
      const h = this.#health[index] as Health;
      const up = h.retryAt <= now;
      return {
        index,
        name: db.name,
        backend: db.store.backend,
        up,
        failuresInRow: h.failuresInRow,
        retryInMs: up ? 0 : Math.ceil(h.retryAt - now),
        allocations: h.allocations,
        failures: h.failures,
        lastError: up ? null : h.lastError,
      };
    });
  }

  /**
   * Start-up check: every row of every database that answers must be of that database's class
   * (`id_offset` r, `id_increment` N), and the list must be the set its databases record
   * (set-membership.ts), whatever the rows' fence state. Throws CONFIG_INVALID naming each
   * database and row that is not (a database listed in another order or another set, a Leaf
   * table not yet joined, a set whose re-forming was cut short, an empty database in a member's
   * place, a set with tags whose members are not recorded), and the command that fixes it, so it
   * is never used. A database that does not answer is left to the guard every allocation carries
   * (it allocates only from a row of its class, under a mark naming it), and resolves in the
   * returned list.
   */
  async verify(): Promise<{ readonly unreachable: readonly string[] }> {
    const outcomes = await this.#each(this.#indexes(), async (db) => ({
      rows: await db.store.listTags(),
      records: await this.#readRecords(db),
    }));
    const problems: string[] = [];
    for (const { index, value } of outcomes) {
      const expected = { offset: index, increment: this.size };
      for (const record of value?.rows ?? []) {
        if (!sameResidue(record.residue, expected))
          problems.push(
            `database ${index} (${this.#name(index)}) holds tag "${record.tag}" as ` +
              `${residueText(record.residue)}`,
          );
      }
    }
    const records = this.#indexes().map(
      (index) => outcomes.find((o) => o.index === index)?.value?.records,
    );
    for (const { index, value } of outcomes)
      if (value !== undefined) this.#identities[index] = value.records.id;
    const anyRows = outcomes.some((o) => (o.value?.rows.length ?? 0) > 0);
    problems.push(
      ...membershipProblems(
        this.#databases.map((db) => db.name),
        records,
        anyRows,
      ),
    );
    if (problems.length > 0) {
      const shown =
        problems.slice(0, 5).join('; ') +
        (problems.length > 5 ? `; and ${problems.length - 5} more` : '');
      throw new IdMintError(
        'CONFIG_INVALID',
        `the set of ${this.size} segment databases disagrees with their rows and records, ` +
          `so it is not used: ` +
          `${shown}. Each database must be listed at its index in the same order ` +
          `everywhere; after forming the set, ` +
          `adding a database or changing the order, run "idmint db init" with the new list ` +
          `(${DOCS})`,
        { details: { key: 'segment.stores', databases: this.size, problems: problems.length } },
      );
    }
    return {
      unreachable: outcomes.filter((o) => o.error !== undefined).map((o) => this.#name(o.index)),
    };
  }

  /**
   * Forms or re-forms the set (`idmint db init`): creates the tables (with the residue columns and
   * the set's own records), records the set's members in every database, then gives every tag a
   * row of its class in every database, above every ID any of them ever issued. Every database
   * must answer. Safe while nodes run, whatever set they were configured with, as long as every
   * writer of these rows is an idmint node (a Leaf node must be stopped):
   *
   * - The members: every database a listed one records as a member of its set must be in the
   *   list (set-membership.ts), whatever the rows' fence state, so a run cut short and run again
   *   with a shorter list cannot leave one out; `replace` lets an empty database take the place
   *   of one lost for good. Then every database records the new list.
   * - The high-water marks (set-highs.ts) are moved to the new list's databases, index by index,
   *   keeping their value: from then on a database left out cannot raise one.
   * - A tag whose rows are all of their class (or missing) is completed: a missing row is created
   *   above the highest `max_id` of the others and above the marks for its index and for any
   *   database left out (a lost one, replaced). Only database r ever issues class r, and no range
   *   of r is used above its marks, so that is enough.
   * - Otherwise every row is first fenced (`id_increment` 0, a compare-and-set on what was read):
   *   no store of any set allocates from a fenced row, and a store of its own refuses it too.
   *   With every row fenced, `max_id` can no longer move, so the highest of them and of a
   *   replaced database's marks, H, is above every ID issued by any database under any set.
   *   Each row is then set to database r of N at the first ID of class r at or above H
   *   (compare-and-set again). A compare-and-set that loses to a node still allocating makes it
   *   read the rows again and start over.
   * - Last, every mark is raised to at least its row's `max_id`, so IDs issued before marks were
   *   kept (by an older idmint) are bounded too.
   */
  async join(options: SetJoinOptions = {}): Promise<SetJoinReport> {
    await this.init();
    const lists = this.#all(
      'joining the set',
      await this.#each(this.#indexes(), (db) => db.store.listTags()),
    );
    const ids = await this.#recordMembers(lists, options.replace);
    const names = [
      ...new Set(lists.flatMap((records) => records.map((record) => record.tag))),
    ].sort();
    const tags: JoinedTag[] = [];
    for (const tag of names) tags.push(await this.#joinTag(tag, ids));
    return { tags };
  }

  /**
   * Gives every database an identity where it has none, checks the list against the sets they
   * record (checkJoin), and records the list in every database: the identities, by index.
   */
  async #recordMembers(
    lists: readonly (readonly TagRecord[])[],
    replace: number | undefined,
  ): Promise<string[]> {
    for (let attempt = 0; attempt < JOIN_ATTEMPTS; attempt++) {
      const reads = await this.#each(this.#indexes(), (db) =>
        db.store.readSetEntries([SELF_KEY, SET_KEY]),
      );
      const read = this.#all('reading the set records', reads);
      const unnamed = this.#indexes().filter((index) => read[index]?.[0] === undefined);
      if (unnamed.length > 0) {
        // A compare-and-set on "none yet": a concurrent run's identity wins, and is read next time.
        const named = await this.#each(unnamed, (db) =>
          db.store.writeSetEntry(SELF_KEY, undefined, formatSelf(newMemberId())),
        );
        this.#all('recording identities', named);
        continue;
      }
      const listed = this.#indexes().map((index): ListedMember => {
        const [self, set] = read[index] as (SetEntry | undefined)[];
        const where = `database ${index} (${this.#name(index)})`;
        const id = parseSelf(self as SetEntry, where);
        const hasRows = (lists[index]?.length ?? 0) > 0;
        return { name: this.#name(index), id, set: set && parseSet(set, where), hasRows };
      });
      if (!listed.some((member) => member.set !== undefined)) {
        if (replace !== undefined) {
          const why =
            "no database of the list records a set, so nothing bounds a lost database's IDs";
          const first = `run "idmint db init" with the set's whole list first (${DOCS})`;
          const details = { key: 'segment.stores', replace };
          throw new IdMintError('INVALID_ARGUMENT', `--replace ${replace}: ${why}; ${first}`, {
            details,
          });
        }
        this.#checkNoEmptyMember(lists);
      }
      checkJoin(listed, replace);
      const value = formatSet(listed.map(({ id, name }) => ({ id: id as string, name })));
      const writes = await this.#each(this.#indexes(), (db, index) => {
        const current = read[index]?.[1];
        if (current?.value === value) return Promise.resolve(true);
        return db.store.writeSetEntry(SET_KEY, current?.version, value);
      });
      if (!this.#all('recording the set', writes).every(Boolean)) continue;
      for (const [index, member] of listed.entries()) this.#identities[index] = member.id;
      return listed.map((member) => member.id as string);
    }
    const why =
      `its records changed under every one of ${JOIN_ATTEMPTS} attempts (another "idmint db ` +
      `init" running?)`;
    throw new IdMintError('STORE_UNAVAILABLE', `joining the set: ${why}; run it again`);
  }

  async #joinTag(tag: string, ids: readonly string[]): Promise<JoinedTag> {
    const n = this.size;
    const target = (index: number): SegmentResidue => ({ offset: index, increment: n });
    const read = async () =>
      this.#all(
        `joining tag "${tag}"`,
        await this.#each(this.#indexes(), (db) => db.store.getTag(tag)),
      );
    const highest = (rows: readonly (TagRecord | undefined)[]) =>
      rows.reduce((h, row) => (row !== undefined && row.maxId > h ? row.maxId : h), 0n);
    // Last: every mark at least its row's max_id (see join).
    const seed = async (action: JoinedTag['action'], maxId: bigint): Promise<JoinedTag> => {
      if (n > 1)
        await this.#highs.settle(
          tag,
          ids,
          (await read()).map((row) => row?.maxId ?? 0n),
        );
      return { tag, action, maxId };
    };
    for (let attempt = 0; attempt < JOIN_ATTEMPTS; attempt++) {
      let rows = await read();
      const template = rows.find((row) => row !== undefined);
      // deleted meanwhile
      if (template === undefined) return { tag, action: 'unchanged', maxId: 0n };
      // A cluster-ordered tag's new rows are ordered too: else a database r > 0 would allocate it.
      const ordering = rows.find((row) => row?.ordering !== undefined)?.ordering;
      const create = (index: number, floor: bigint) =>
        (this.#databases[index] as SetDatabase).store
          .createTag(
            template.periodic === undefined
              ? {
                  tag,
                  step: template.step,
                  description: template.description,
                  startId: floor,
                  opaque: template.opaque === true,
                  ...(template.delta === undefined ? {} : { delta: template.delta }),
                  ...(template.remainder === undefined ? {} : { remainder: template.remainder }),
                  ...(ordering === undefined ? {} : { ordering }),
                }
              : {
                  tag,
                  step: template.step,
                  description: template.description,
                  periodic: parsePeriodic(template.periodic).toOptions(),
                },
          )
          .then(
            () => true,
            (error: unknown) =>
              isIdMintError(error, 'TAG_EXISTS') ? false : Promise.reject(error),
          );
      const complete = rows.every(
        (row, index) => row === undefined || sameResidue(row.residue, target(index)),
      );
      if (complete && rows.every((row) => row !== undefined))
        return seed('unchanged', highest(rows));
      // The marks move to this list's databases first (no database left out raises one from
      // then on); their values stay. A row missing at index r starts above r's marks: they bound
      // what the database there before (a lost one, replaced) handed out, even after a run cut
      // short moved them to the new one.
      const { highest: marks, lost } =
        n > 1 ? await this.#highs.settle(tag, ids) : { highest: [], lost: 0n };
      const missing = this.#indexes().filter((index) => rows[index] === undefined);
      const unrowed = missing.reduce((high, index) => max(high, marks[index] ?? 0n), lost);
      if (complete) {
        const floors = missing.map((index) => max(max(highest(rows), marks[index] ?? 0n), lost));
        const created = await Promise.all(
          missing.map((index, k) => create(index, floors[k] as bigint)),
        );
        if (created.every(Boolean)) return seed('completed', floors.reduce(max, 0n));
        continue;
      }
      // The rows' own word, for a set formed before idmint recorded its members: read before this
      // run fences anything (a fenced row no longer says its set's size; the records keep it).
      if (attempt === 0 && !rows.some((row) => row?.residue?.increment === 0))
        this.#checkWholeSets(tag, rows);
      // Fence: no allocation from any row while max_id is read.
      let changed = false;
      for (const [index, row] of rows.entries()) {
        if (row === undefined || row.residue?.increment === 0) continue;
        const residue = row.residue ?? { offset: 0, increment: 1 };
        const fenced = { maxId: row.maxId, residue: { offset: residue.offset, increment: 0 } };
        if (!(await this.#reassign(index, tag, { maxId: row.maxId, residue }, fenced)))
          changed = true;
      }
      if (changed) continue;
      rows = await read();
      if (rows.some((row) => row !== undefined && row.residue?.increment !== 0)) continue;
      const floor = max(highest(rows), unrowed);
      for (const [index, row] of rows.entries()) {
        const to = { maxId: alignUp(floor, target(index)), residue: target(index) };
        const done =
          row === undefined
            ? await create(index, floor)
            : await this.#reassign(
                index,
                tag,
                { maxId: row.maxId, residue: row.residue as SegmentResidue },
                to,
              );
        if (!done) changed = true;
      }
      if (!changed) return seed('reformed', floor);
    }
    throw new IdMintError(
      'STORE_UNAVAILABLE',
      `joining tag "${tag}": its rows changed under every one of ${JOIN_ATTEMPTS} attempts; ` +
        `stop the nodes that allocate it outside idmint (Leaf) and run it again`,
      { details: { tag } },
    );
  }

  /**
   * A tag whose rows come from a set of M must list all M databases of it, or their IDs would be
   * missed. (A set of this set's size is this list itself: every index is in it.)
   */
  #checkWholeSets(tag: string, rows: readonly (TagRecord | undefined)[]): void {
    const sets = new Map<number, Set<number>>();
    for (const row of rows) {
      const residue = row?.residue;
      if (residue === undefined || residue.increment < 2 || residue.increment === this.size)
        continue;
      sets.set(residue.increment, (sets.get(residue.increment) ?? new Set()).add(residue.offset));
    }
    for (const [increment, offsets] of sets) {
      if (offsets.size === increment) continue;
      const absent = Array.from({ length: increment }, (_, r) => r).filter((r) => !offsets.has(r));
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `tag "${tag}": its rows say it is in a set of ${increment} databases, but ` +
          `database${absent.length === 1 ? '' : 's'} ${absent.join(', ')} of that set ` +
          `${absent.length === 1 ? 'is' : 'are'} not in the list; a database that issued IDs ` +
          `is never left out of its set (list all of them, in their order, then the new ones)`,
        { details: { tag, increment } },
      );
    }
  }

  /**
   * For a set no database records yet (formed by an older idmint): refuses a database with no
   * tags at all in a set whose other databases are already a set of this size. It most likely
   * replaces a database of the set, whose IDs no other database knows (no marks were kept), so a
   * row created above the others' max_id could repeat them.
   */
  #checkNoEmptyMember(lists: readonly (readonly TagRecord[])[]): void {
    const formed = lists.some((records, index) =>
      records.some((record) =>
        sameResidue(record.residue, { offset: index, increment: this.size }),
      ),
    );
    const empty = this.#indexes().filter((index) => (lists[index] ?? []).length === 0);
    if (!formed || empty.length === 0 || this.size === 1) return;
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `database ${empty.map((index) => `${index} (${this.#name(index)})`).join(', ')} has ` +
        `no tags, ` +
        `but the other databases are already a set of ${this.size}, formed before idmint ` +
        `recorded a set's ` +
        'members and high-water marks: if it replaces a database of the set, that ' +
        "database's IDs are known only " +
        'to it, so copy its table (rows and max_id as they are, from the database itself, ' +
        'not a backup) ' +
        `to the new database instead (${DOCS})`,
      { details: { key: 'segment.stores', databases: this.size } },
    );
  }

  /** What database `db` records of itself (set-membership.ts), for the start-up check. */
  async #readRecords(db: SetDatabase): Promise<MemberRecords> {
    const [self, set] = await db.store.readSetEntries([SELF_KEY, SET_KEY]);
    return {
      id: self === undefined ? null : parseSelf(self, db.name),
      set: set && parseSet(set, db.name),
    };
  }

  /** How the high-water marks reach the databases: one call at a time, counted in their health. */
  #markAccess(): MarkAccess {
    return {
      size: this.#databases.length,
      name: (index) => this.#name(index),
      call: (index, run) => this.#callOne(index, run),
      identity: async (index, fresh) => {
        const known = this.#identities[index];
        if (!fresh && known !== undefined) return known;
        const [self] = await this.#callOne(index, (store) => store.readSetEntries([SELF_KEY]));
        const id =
          self === undefined ? null : parseSelf(self, `database ${index} (${this.#name(index)})`);
        this.#identities[index] = id;
        return id;
      },
    };
  }

  /** Runs `run` on database index's store, its outcome counted in the database's health. */
  async #callOne<T>(index: number, run: (store: MarkStore) => Promise<T>): Promise<T> {
    const [outcome] = await this.#each([index], (db) => run(db.store));
    if (outcome === undefined || outcome.error !== undefined) throw outcome?.error;
    return outcome.value as T;
  }

  /**
   * Why database index's last range of `tag` could not be used (its mark not raised), while
   * every other database is still backing off: allocating again would only skip another range.
   */
  #stillUncovered(index: number, tag: string): IdMintError | undefined {
    const error = this.#uncovered.get(`${index}/${tag}`);
    if (error === undefined) return undefined;
    const now = this.#now();
    if (this.#health.every((h, other) => other === index || h.retryAt > now)) return error;
    this.#uncovered.delete(`${index}/${tag}`);
    return undefined;
  }

  async #reassign(
    index: number,
    tag: string,
    from: { maxId: bigint; residue: SegmentResidue },
    to: { maxId: bigint; residue: SegmentResidue },
  ): Promise<boolean> {
    const db = this.#databases[index] as SetDatabase;
    try {
      return await db.store.reassign(tag, from, to);
    } catch (cause) {
      throw asStoreError(cause, db.name, 'reassign');
    }
  }

  #indexes(): number[] {
    return this.#databases.map((_, index) => index);
  }

  /** Notes which of `records` are cluster-ordered (ordering is set at creation, never changed). */
  #learnOrdering<T extends TagRecord | TagListing | undefined>(records: readonly T[]): void {
    for (const record of records) {
      if (record === undefined) continue;
      if (record.ordering === undefined) this.#ordered.delete(record.tag);
      else this.#ordered.add(record.tag);
    }
  }

  #name(index: number): string {
    return (this.#databases[index] as SetDatabase).name;
  }

  /**
   * The databases to try, in round-robin order: those that are up, and the ones backing off left
   * out (`skipped`). When every one is backing off, the one whose backoff ends first is tried, so
   * a set that is wholly down costs one attempt per call and is found again when it is back.
   */
  #round(): { order: number[]; skipped: number[] } {
    const n = this.size;
    const start = this.#turn;
    this.#turn = (start + 1) % n;
    const now = this.#now();
    const rotated = Array.from({ length: n }, (_, k) => (start + k) % n);
    const up = rotated.filter((index) => (this.#health[index] as Health).retryAt <= now);
    if (up.length > 0)
      return { order: up, skipped: rotated.filter((index) => !up.includes(index)) };
    const soonest = rotated.reduce((a, b) =>
      (this.#health[a] as Health).retryAt <= (this.#health[b] as Health).retryAt ? a : b,
    );
    return { order: [soonest], skipped: rotated.filter((index) => index !== soonest) };
  }

  #succeeded(index: number): void {
    const h = this.#health[index] as Health;
    h.failuresInRow = 0;
    h.retryAt = 0;
    h.lastError = null;
  }

  /**
   * A database that is unavailable or timed out is skipped for a backoff; other errors (no such
   * tag) say nothing of its health.
   */
  #failed(index: number, error: IdMintError): void {
    if (error.code !== 'STORE_UNAVAILABLE') return;
    const h = this.#health[index] as Health;
    h.failures++;
    h.failuresInRow++;
    h.lastError = error.message;
    h.retryAt =
      this.#now() +
      Math.min(this.#maxBackoffMs, this.#backoffMs * 2 ** Math.min(h.failuresInRow - 1, 30));
  }

  /**
   * Runs `run` on each database of `indexes` at once; each outcome is its value or its IdMintError
   * (health updated).
   */
  async #each<T>(
    indexes: readonly number[],
    run: (db: SetDatabase, index: number) => Promise<T>,
  ): Promise<Outcome<T>[]> {
    return Promise.all(
      indexes.map(async (index): Promise<Outcome<T>> => {
        const db = this.#databases[index] as SetDatabase;
        try {
          const value = await run(db, index);
          this.#succeeded(index);
          return { index, value };
        } catch (cause) {
          const error = asStoreError(cause, db.name, 'call');
          this.#failed(index, error);
          return { index, error };
        }
      }),
    );
  }

  /**
   * Every outcome's value at its database's index (holes where `outcomes` skipped one), or the
   * combined error when any database failed.
   */
  #all<T>(what: string, outcomes: readonly Outcome<T>[]): T[] {
    const failed = outcomes.filter((o) => o.error !== undefined);
    if (failed.length > 0)
      throw this.#combined(`${what}: every database of the set must answer`, failed, []);
    const values: T[] = [];
    for (const o of outcomes) values[o.index] = o.value as T;
    return values;
  }

  /**
   * One error for a call no database could serve, naming each database and why. Its code is the
   * most hopeful one: STORE_UNAVAILABLE (retryable) when any database was down or skipped, since
   * it may serve once back; else the databases' own answer (TAG_MISCONFIGURED, ID_SPACE_EXHAUSTED,
   * TAG_NOT_FOUND).
   */
  #combined(
    what: string,
    failed: readonly Outcome<unknown>[],
    skipped: readonly number[],
  ): IdMintError {
    const errors = failed.flatMap((o) =>
      o.error === undefined ? [] : [{ index: o.index, error: o.error }],
    );
    const order: ErrorCode[] = [
      'STORE_UNAVAILABLE',
      'TAG_MISCONFIGURED',
      'ID_SPACE_EXHAUSTED',
      'TAG_EXISTS',
      'TAG_NOT_FOUND',
      'INVALID_ARGUMENT',
    ];
    const codes = new Set(errors.map((e) => e.error.code));
    const code: ErrorCode =
      skipped.length > 0
        ? 'STORE_UNAVAILABLE'
        : (order.find((c) => codes.has(c)) ?? errors[0]?.error.code ?? 'STORE_UNAVAILABLE');
    const parts = [
      ...errors.map((e) => `database ${e.index} (${this.#name(e.index)}): ${e.error.message}`),
      ...skipped.map(
        (index) =>
          `database ${index} (${this.#name(index)}): down, retried in ` +
          `${Math.max(0, Math.ceil((this.#health[index] as Health).retryAt - this.#now()))} ` +
          `ms`,
      ),
    ];
    const first = errors.find((e) => e.error.code === code)?.error;
    return new IdMintError(code, `${what}: ${parts.join('; ')}`, {
      ...(first === undefined ? {} : { cause: first }),
      details: { ...(first?.details ?? {}), databases: this.size },
    });
  }
}

function max(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

/**
 * The databases' lists (lowest database first) as one record per tag, each merged as {@link merge}.
 */
function mergeByName(lists: readonly (readonly TagRecord[])[]): TagRecord[] {
  const byName = new Map<string, TagRecord[]>();
  for (const list of lists)
    for (const record of list) byName.set(record.tag, [...(byName.get(record.tag) ?? []), record]);
  return [...byName.values()].map(merge);
}

/** Merges one tag's rows from several databases into one record (see MultiSegmentStore.getTag). */
function merge(records: readonly TagRecord[]): TagRecord {
  const first = records[0] as TagRecord;
  let maxId = first.maxId;
  let updatedAt = first.updatedAt;
  // Opaque if any database says so: a mark not yet written everywhere (an update cut short) must
  // never let a node serve the tag's dense IDs.
  let opaque = false;
  // A periodic tag's option is written with its row and never changed: any database's will do.
  let periodic: string | undefined;
  // Cluster-ordered if any database says so, as opaque: ordering is written with the row.
  let ordering: TagOrdering | undefined;
  for (const record of records) {
    periodic ??= record.periodic;
    ordering ??= record.ordering;
    if (record.maxId > maxId) maxId = record.maxId;
    if (record.updatedAt !== null && (updatedAt === null || record.updatedAt > updatedAt))
      updatedAt = record.updatedAt;
    if (record.opaque === true) opaque = true;
  }
  return {
    tag: first.tag,
    maxId,
    step: first.step,
    description: first.description,
    updatedAt,
    opaque,
    // Written to every database together (createTag, updateTag); the lowest one's is shown.
    ...(first.delta === undefined ? {} : { delta: first.delta }),
    ...(first.remainder === undefined ? {} : { remainder: first.remainder }),
    ...(periodic === undefined ? {} : { periodic }),
    ...(ordering === undefined ? {} : { ordering }),
  };
}

/**
 * An error from a database's store as an IdMintError (a store throws only those; anything else is
 * an outage).
 */
function asStoreError(cause: unknown, name: string, operation: string): IdMintError {
  if (isIdMintError(cause)) return cause;
  // One line as every store's (store-support.ts): the database, the operation in words, the
  // cause as the system gave it; never the method's name.
  const why = new BackendCauses().of(cause);
  return new IdMintError(
    'STORE_UNAVAILABLE',
    `segment store ${name}, ${operationWords(operation)}: ${why}`,
    { cause },
  );
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function describeIndexes(outcomes: readonly Outcome<unknown>[]): string {
  return outcomes.length === 0
    ? 'no database'
    : `database${outcomes.length === 1 ? '' : 's'} ${outcomes.map((o) => o.index).join(', ')}`;
}

function checkMs(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0 || value > 2 ** 31 - 1)
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${name} must be an integer from 0 to ${2 ** 31 - 1} ms, got ${String(value)}`,
    );
  return value;
}
