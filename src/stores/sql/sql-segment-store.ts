import { IdMintError } from '../../core/errors.ts';
import {
  MAX_SEGMENT_ID,
  MAX_TAG_STEP,
  checkDescription,
  checkStep,
  checkTag,
  idSpaceExhausted,
  storedStep,
  tagMisconfigured,
  tagNotFound,
  checkSequence,
  storedSequence,
  EVERY_ID,
  MAX_TAG_DELTA,
} from '../../core/segment-limits.ts';
import type {
  FenceMargin,
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
  TagRecord,
  TagUpdate,
} from '../../ports/segment-store.ts';
import type {
  SqlConnection,
  SqlDialect,
  SqlDriver,
  SqlRow,
  SqlValue,
} from '../../sql/sql-driver.ts';
import {
  HISTORY_TABLE,
  byTag,
  changeCursor,
  checkFenceCount,
  checkFenceMargin,
  checkRaise,
  fenceTimeoutMs,
  historyUnsettled,
  changeOverlapMs,
  checkNewTag,
  checkPageLimit,
  checkOpaqueUpdate,
  checkRelease,
  checkSequenceInSet,
  combinedResidue,
  isPlainResidue,
  parseChangeCursor,
  recordedFences,
  residueMismatch,
  residueRange,
  residueRoom,
  resolveStoreOptions,
  sameResidue,
  StorePlace,
  storeCall,
  storedResidue,
  tagRecord,
  toBigInt,
  toOpaqueFlag,
  toStep,
  HistoryWatch,
  type AllocateRetry,
  type FenceOutcome,
  type SegmentStoreOptions,
} from '../store-support.ts';
import {
  ORDERING_COLUMN,
  ORDERING_COLUMN_TYPE,
  noOrderingColumn,
  orderedInFirstDatabase,
  orderedNotOpaque,
  toOrdering,
} from '../tag-ordering.ts';
import { SqlIssuerLeases } from './sql-issuer-leases.ts';

/**
 * The residue columns of a set's databases (TinyId's `remainder` and `delta`), and their values on
 * a plain row.
 */
const RESIDUE_COLUMNS = [
  ['id_offset', 0],
  ['id_increment', 1],
] as const;

/**
 * idmint's column for opaque tags: 1 marks one (docs/segments.md, Opaque tags). A Leaf table lacks
 * it until `idmint db init` adds it; rows are read whole (`SELECT *`), so a table without it reads
 * as having no opaque tags, and only marking a tag opaque needs it.
 */
const OPAQUE_COLUMN = 'opaque';

/**
 * A tag's own sequence (TinyId's `delta` and `remainder`, with TinyId's names and defaults): the
 * tag issues only IDs `≡ remainder (mod delta)`. Added by `idmint db init`; a Leaf table without
 * them issues every ID, and refuses a tag with a delta above 1.
 */
const SEQUENCE_COLUMNS = [
  ['delta', 1],
  ['remainder', 0],
] as const;

/**
 * idmint's column for periodic tags (docs/segments.md, Periodic sequences): the option as JSON on
 * a periodic tag's own row, NULL on every other row. Added by init like the opaque column.
 */
const PERIODIC_COLUMN = 'periodic';
const PERIODIC_COLUMN_TYPE = 'varchar(255) DEFAULT NULL';

/**
 * The columns an allocation returns the live history in, beside the row (and the recorded one,
 * MySQL).
 */
const HISTORY_COLUMN = 'idmint_history';
const RECORDED_COLUMN = 'idmint_recorded';

/**
 * Tries of one allocation: a fence of a new history between the first two, and one more for a
 * fence (or another change) landing between an allocation's statements.
 */
const ALLOCATE_ATTEMPTS = 3;

/** Why the guarded UPDATE matched no row: an error to throw, or a reason to try again. */
type NotAllocated = IdMintError | AllocateRetry;

/** A range, and the history it was allocated on. */
interface Allocated {
  readonly range: SegmentRange;
  readonly history: string;
}

/** Thrown inside an allocation found on an unverified history: rolls its transaction back. */
class HistoryMismatch extends Error {
  readonly retry: AllocateRetry;
  constructor(retry: AllocateRetry) {
    super('the history is not the one recorded for the table');
    this.retry = retry;
  }
}

/**
 * Thrown inside a fence transaction whose claim another fence won: rolls it back, carrying what was
 * found.
 */
class FenceRaced extends Error {
  readonly outcome: FenceOutcome;
  constructor(outcome: FenceOutcome) {
    super('another fence claimed the history record first');
    this.outcome = outcome;
  }
}

/** What a fence transaction is asked: an automatic fence runs only on a new history. */
interface FenceCall {
  readonly margin: FenceMargin;
  readonly automatic: boolean;
  readonly tag?: string;
  readonly ifFences?: number;
}

/**
 * A SegmentStore on Leaf's `leaf_alloc` table, for any SQL backend: SQLite, PostgreSQL, MySQL and
 * MariaDB each provide a {@link SqlDriver} (src/sql/); the statements are shared.
 *
 * Allocation is one atomic step: `UPDATE ... SET max_id = max_id + step ... RETURNING` where the
 * dialect has it (SQLite, PostgreSQL); otherwise the same UPDATE and a SELECT of the row inside
 * one transaction, the row locked by the UPDATE until commit (MySQL, MariaDB: Leaf's own way).
 * The UPDATE's WHERE clause refuses a step that would pass 2^63-1, and a row whose stored step or
 * max_id no range can come from (written outside idmint), so nothing changes then.
 *
 * With the `residue` option the store is one database of a set (src/stores/multi/): its table has
 * two more columns, `id_offset` and `id_increment`, and an allocation is still one atomic step,
 * guarded by them: `max_id` is raised to the first ID of the class and advanced by `step *
 * increment`, only on a row of exactly this class. Rows are read whole (`SELECT *`), so a store
 * of its own sees those columns where a table has them and refuses a row of a set rather than
 * issue every ID from it.
 */
export class SqlSegmentStore implements SegmentStore {
  readonly backend: string;
  /** The table this store uses. */
  readonly table: string;
  readonly #driver: SqlDriver;
  readonly #timeoutMs: number;
  readonly #sql: ReturnType<typeof statements>;
  readonly #setSql: ReturnType<typeof setStatements>;
  readonly residue?: SegmentResidue;
  /**
   * Whether the table had the opaque column at the last full read's first page (undefined: not
   * looked yet).
   */
  #listsOpaque: boolean | undefined;
  /**
   * Whether the table has the sequence columns: true once seen (columns are never dropped); false
   * is looked at again by init() and each full read's first page, when `idmint db init` may have
   * added them (until then every tag of the table issues every ID, as no row can say otherwise).
   */
  #sequence: boolean | undefined;
  /** How far a new history is fenced. */
  readonly #fence: FenceMargin;
  readonly #history: HistoryWatch;
  /** This store in failure messages: backend, address, causes seen. */
  readonly #place: StorePlace;
  /**
   * Whether the table had the ordering column at the last full read's first page (undefined: not
   * looked yet); looked at again like {@link #listsOpaque}.
   */
  #listsOrdering: boolean | undefined;
  /** The issuer leases of this table's cluster-ordered tags, in idmint_issuer beside it. */
  readonly issuers: SqlIssuerLeases;
  /**
   * On database r > 0 of a set: the allocation statements that pass over cluster-ordered rows,
   * which only database 0 allocates (docs/segments.md, Where a cluster-ordered tag's ordering and
   * issuer lease are kept). Undefined on database 0 and on a store of its own.
   */
  readonly #orderedGuard:
    | { readonly plain: AllocationStatements; readonly sequenced: AllocationStatements }
    | undefined;

  constructor(driver: SqlDriver, options: SegmentStoreOptions = {}) {
    const { table, timeoutMs, residue, fence } = resolveStoreOptions(options);
    this.backend = driver.dialect.backend;
    this.#place = new StorePlace(this.backend, options.where);
    this.table = table;
    this.#driver = driver;
    this.#timeoutMs = timeoutMs;
    if (residue !== undefined) this.residue = residue;
    this.#fence = fence;
    this.#sql = statements(table, driver.dialect, residue);
    this.#orderedGuard =
      residue === undefined || residue.offset === 0
        ? undefined
        : {
            plain: guardOrdering(this.#sql),
            sequenced: guardOrdering(this.#sql.sequenced),
          };
    this.#setSql = setStatements(table, driver.dialect);
    this.#history = new HistoryWatch({
      table,
      margin: fence,
      onHistory: options.onHistory,
      fenceIfNew: () => this.#fenceCall({ margin: fence, automatic: true }),
    });
    this.issuers = new SqlIssuerLeases({
      backend: this.backend,
      dialect: driver.dialect,
      table,
      call: (operation, transaction, run, absent) =>
        this.#call(operation, transaction, run, absent),
      // A read first: the fence's transaction only where the history is new (SQLite's several
      // stores in one process could not all hold one at once).
      verifyHistory: async () => {
        const [found] = await this.history();
        if (found?.recorded !== found?.live) await this.#history.verify();
      },
      ...(options.issuerInterleave === undefined ? {} : { interleave: options.issuerInterleave }),
    });
  }

  /**
   * Creates the table if missing. A store of a set also adds the residue columns to a table
   * that lacks them (a Leaf table, a table of a store of its own): every row then reads as a
   * plain row, which the set refuses until `idmint db init` joins it (MultiSegmentStore.join).
   */
  async init(): Promise<void> {
    await this.#call('init', false, async (db) => {
      await this.#createIfMissing(db, this.#sql.createTable);
      if (this.residue !== undefined) {
        await this.#addResidueColumns(db);
        await this.#createSetTable(db);
      }
      await this.#addOpaqueColumn(db);
      await this.#addColumns(db, SEQUENCE_COLUMNS);
      this.#sequence = true;
      await this.#addPeriodicColumn(db);
      await this.#addColumn(db, ORDERING_COLUMN, ORDERING_COLUMN_TYPE);
      this.#listsOrdering = true;
      await this.#addChangeIndex(db);
      await this.#createIfMissing(db, this.#sql.createHistoryTable);
      await this.#createIfMissing(db, this.issuers.createTable);
    });
    // A new table, or a table first seen by an idmint that records histories, is fenced now.
    await this.#history.verify();
  }

  /** A CREATE ... IF NOT EXISTS. */
  async #createIfMissing(db: SqlConnection, statement: string): Promise<void> {
    try {
      await db.query(statement, []);
    } catch (error) {
      // Two `IF NOT EXISTS` racing on PostgreSQL: the loser trips over the winner's catalog row.
      if (!this.#driver.dialect.isDuplicateKey(error)) throw error;
    }
  }

  async allocate(tag: string, step?: number): Promise<SegmentRange> {
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    const returning = this.#driver.dialect.supportsReturning;
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.#call(
        'allocate',
        !returning,
        (db) => this.#allocateOnce(db, tag, step),
        () => {
          throw tagNotFound(tag);
        },
      ).catch((error: unknown) => {
        // Thrown inside the call so that a transaction rolls back: the allocation did not happen.
        const cause = (error as { cause?: unknown }).cause;
        if (cause instanceof HistoryMismatch) return cause.retry;
        throw error;
      });
      if ('range' in outcome) {
        this.#history.allocatedOn(outcome.history);
        return outcome.range;
      }
      if (attempt >= ALLOCATE_ATTEMPTS) throw historyUnsettled(this.backend, tag, outcome);
      if (outcome.retry === 'history') await this.#history.verify();
    }
  }

  /**
   * One allocation, guarded by the history check in the same statement (or transaction): a range,
   * or why to try again (the history is not the recorded one, or a fence landed meanwhile).
   */
  async #allocateOnce(
    db: SqlConnection,
    tag: string,
    step: number | undefined,
  ): Promise<Allocated | AllocateRetry> {
    const bound = step ?? null;
    let row: SqlRow | undefined;
    this.#sequence ??= await this.#hasColumns(db, SEQUENCE_COLUMNS);
    const sequenced = this.#sequence;
    const sql = this.#allocation(sequenced, await this.#guardsOrdering(db));
    try {
      if (this.#driver.dialect.supportsReturning) {
        row = (await db.query(sql.allocateReturning, [bound, tag, bound])).rows[0];
      } else if ((await db.query(sql.allocate, [bound, tag, bound])).affectedRows === 1) {
        // In the transaction, after the UPDATE locked the row: a fence needs that lock too, so
        // the record read here is the one the range is allocated under. Read without a lock, so
        // a fence (rows first, then the record) cannot deadlock with it.
        row = (await db.query(this.#sql.readAllocated, [tag])).rows[0];
        const recorded = row?.[RECORDED_COLUMN];
        if (row !== undefined && recorded !== row[HISTORY_COLUMN]) {
          const found = recorded === null || recorded === undefined ? undefined : String(recorded);
          throw new HistoryMismatch({
            retry: 'history',
            live: String(row[HISTORY_COLUMN]),
            recorded: found,
          });
        }
      }
    } catch (error) {
      // No history table yet (a Leaf table, an idmint from before it): verifying creates it.
      if (this.#isMissingHistoryTable(error)) throw new HistoryMismatch({ retry: 'history' });
      throw error;
    }
    if (row === undefined) {
      const why = await this.#whyNotAllocated(db, tag, step);
      if (why instanceof IdMintError) throw why;
      return why;
    }
    // A cluster-ordered row, found by a statement without the guard (the column was added since
    // this store last looked): MySQL's transaction rolls back; with RETURNING the range is
    // skipped, never issued, and the guard is used from now on.
    if (this.#orderedElsewhere(row)) {
      this.#listsOrdering = true;
      throw orderedInFirstDatabase(tag, this.residue);
    }
    // The row comes back whole (`*`): a table this store took for a Leaf table shows the sequence
    // columns once `idmint db init` has added them. A tag given a delta meanwhile has just been
    // advanced by `step` alone, not `step * delta`, so a range read with the row's delta would
    // reach back over the previous range (duplicates): that advance is skipped, never issued, and
    // the tag allocated again in its class, in the same transaction where there is one. Before,
    // the store kept the old statement until its next full tag read.
    if (!sequenced && 'delta' in row) {
      this.#sequence = true;
      const sequence = storedSequence(row['delta'], row['remainder']);
      if (sequence === undefined || sequence.delta !== 1 || sequence.remainder !== 0)
        return this.#allocateOnce(db, tag, step);
    }
    const end = toBigInt(row['max_id'], 'max_id');
    const tagStep = toStep(row['step']);
    const used = step ?? tagStep;
    const residue = this.residue;
    const history = String(row[HISTORY_COLUMN]);
    // The statement's guard admitted only a valid sequence (every ID where the table has none).
    const sequence = storedSequence(row['delta'], row['remainder']) ?? EVERY_ID;
    if (residue === undefined) {
      // A row of a set, read by a store of its own: its range spans every database's IDs.
      // MySQL's transaction rolls back; with RETURNING the update is made, and its range is
      // skipped, never issued (the set's own allocations raise max_id to their class anyway).
      const found = storedResidue(row['id_offset'], row['id_increment']);
      if (!isPlainResidue(found)) throw residueMismatch(tag, found, undefined);
    }
    const own = combinedResidue(residue ?? { offset: 0, increment: 1 }, sequence);
    return { range: residueRange(tag, end, used, tagStep, own), history };
  }

  /** The allocation statements to use: with the sequence columns or not, guarded or not. */
  #allocation(sequenced: boolean, guarded: boolean): AllocationStatements {
    const guard = guarded ? this.#orderedGuard : undefined;
    if (guard !== undefined) return sequenced ? guard.sequenced : guard.plain;
    return sequenced ? this.#sql.sequenced : this.#sql;
  }

  /**
   * Whether this store passes over cluster-ordered rows: on database r > 0 of a set, once the
   * table has the ordering column (a table without it holds no ordered tag; `db init` may add
   * it, and each full read's first page and every ordered row found look again).
   */
  async #guardsOrdering(db: SqlConnection): Promise<boolean> {
    if (this.#orderedGuard === undefined) return false;
    this.#listsOrdering ??= await this.#hasColumn(db, ORDERING_COLUMN);
    return this.#listsOrdering;
  }

  /** True for a cluster-ordered row read by database r > 0 of a set, which must not issue it. */
  #orderedElsewhere(row: SqlRow): boolean {
    return (
      this.#orderedGuard !== undefined && toOrdering(row[ORDERING_COLUMN]).ordering !== undefined
    );
  }

  /**
   * One fence transaction, bounded by the fence timeout; the history table is created first
   * where it is missing (only then: creating it needs a privilege a node may lack).
   */
  async #fenceCall(request: FenceCall): Promise<FenceOutcome> {
    try {
      return await this.#fenceOnce(request);
    } catch (error) {
      if (!this.#isMissingHistoryTable((error as { cause?: unknown }).cause ?? error)) throw error;
    }
    const create = (db: SqlConnection) => this.#createIfMissing(db, this.#sql.createHistoryTable);
    await this.#call('fence', false, create).catch((error: unknown) => {
      const reason = error instanceof Error ? error.message : String(error);
      const fix = 'run "idmint db init" as a user who may create tables';
      const message = `cannot create idmint's history table ${HISTORY_TABLE} (${reason}); ${fix}`;
      throw new IdMintError('STORE_UNAVAILABLE', message, {
        cause: error,
        details: { backend: this.backend },
      });
    });
    return this.#fenceOnce(request);
  }

  /**
   * {@link #fenceTransaction}; a claim lost to another fence rolls the transaction back (`raced`).
   */
  async #fenceOnce(request: FenceCall): Promise<FenceOutcome> {
    try {
      const fence = (db: SqlConnection) => this.#fenceTransaction(db, request);
      return await this.#call('fence', true, fence, undefined, fenceTimeoutMs(this.#timeoutMs));
    } catch (error) {
      const cause = (error as { cause?: unknown }).cause;
      if (cause instanceof FenceRaced) return cause.outcome;
      throw error;
    }
  }

  /**
   * In one transaction: reads the live and the recorded history; unless an automatic fence finds
   * them equal (nothing to do) or `ifFences` does not match, raises the rows, then claims the fence
   * by a compare-and-set on the record (an insert where there is none). A claim lost to another
   * fence throws FenceRaced, which rolls the raise back. Rows are locked before the record: an
   * allocation holds its row's lock and reads the record without one (MySQL; PostgreSQL's reads
   * never lock), so a fence waits for it and never the other way round. (A give-back's UPDATE may
   * take a shared lock on the record, on MySQL; one that deadlocks with a fence fails, and its
   * tail is wasted, never reissued.) Rows with a negative max_id (written outside idmint) stay.
   */
  async #fenceTransaction(db: SqlConnection, request: FenceCall): Promise<FenceOutcome> {
    const found = await this.#readHistory(db);
    const unchanged: FenceOutcome = {
      fenced: false,
      raced: false,
      tags: 0,
      history: found.live,
      from: found.recorded,
      fences: found.fences,
    };
    if (request.automatic && found.recorded === found.live) return unchanged;
    if (request.ifFences !== undefined && found.fences !== request.ifFences) return unchanged;
    if (request.tag !== undefined && (await this.#read(db, request.tag)) === undefined)
      throw tagNotFound(request.tag);
    const raise = fenceStatement(
      this.table,
      this.#driver.dialect,
      request.margin,
      request.tag !== undefined,
    );
    const tags = (await db.query(raise, request.tag === undefined ? [] : [request.tag]))
      .affectedRows;
    const fences = recordedFences(found.recorded === undefined, found.fences, tags);
    const claimed =
      found.recorded === undefined
        ? (await db.query(this.#sql.recordHistory, [found.live, fences])).affectedRows === 1
        : (await db.query(this.#sql.claimHistory, [found.live, found.recorded, found.fences]))
            .affectedRows === 1;
    if (!claimed) throw new FenceRaced({ ...unchanged, raced: true });
    return { fenced: true, raced: false, tags, history: found.live, from: found.recorded, fences };
  }

  /** The live history and the record (none when the table has no row in the history table). */
  async #readHistory(
    db: SqlConnection,
  ): Promise<{ live: string; recorded: string | undefined; fences: number }> {
    const row = (await db.query(this.#sql.readHistory, [])).rows[0];
    const recorded = row?.['recorded'];
    const fences = row?.['fences'];
    return {
      live: String(row?.['live']),
      recorded: recorded === null || recorded === undefined ? undefined : String(recorded),
      fences: fences === null || fences === undefined ? 0 : Number(toBigInt(fences, 'fences')),
    };
  }

  #isMissingHistoryTable(error: unknown): boolean {
    const message = String((error as { message?: unknown } | null)?.message);
    return this.#driver.dialect.isMissingTable(error) && message.includes(HISTORY_TABLE);
  }

  async history(): Promise<StoreHistory[]> {
    return this.#call('history', false, async (db) => {
      try {
        return [await this.#readHistory(db)];
      } catch (error) {
        if (!this.#isMissingHistoryTable(error)) throw error;
        const live = String((await db.query(this.#sql.readLiveHistory, [])).rows[0]?.['live']);
        return [{ live, recorded: undefined, fences: 0 }];
      }
    });
  }

  async fence(request: FenceRequest = {}): Promise<FenceReport[]> {
    const margin = checkFenceMargin(request.margin ?? this.#fence);
    if (request.tag !== undefined) checkTag(request.tag);
    const ifFences = checkFenceCount(request.ifFences);
    const call: FenceCall = {
      margin,
      automatic: false,
      ...(request.tag === undefined ? {} : { tag: request.tag }),
      ...(ifFences === undefined ? {} : { ifFences }),
    };
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.#fenceCall(call);
      // Another fence claimed the record between the read and the claim: read it again (with
      // ifFences, the count it names is gone: nothing to do).
      if (outcome.raced && ifFences === undefined && attempt < ALLOCATE_ATTEMPTS) continue;
      return [
        {
          fenced: outcome.fenced,
          tags: outcome.tags,
          history: outcome.history,
          fences: outcome.fences,
        },
      ];
    }
  }

  async raise(tag: string, atLeast: bigint): Promise<boolean> {
    checkTag(tag);
    checkRaise(atLeast, this.residue);
    const raise = async (db: SqlConnection) => {
      return (await db.query(this.#sql.raise, [atLeast, tag, atLeast])).affectedRows === 1;
    };
    return this.#call('raise', false, raise, () => false);
  }

  async release(tag: string, from: bigint, to: bigint): Promise<boolean> {
    checkTag(tag);
    checkRelease(from, to, this.residue);
    return this.#call(
      'release',
      false,
      async (db) => (await db.query(this.#sql.release, [from, tag, to])).affectedRows === 1,
      () => false,
    );
  }

  /**
   * Re-forms a set, for MultiSegmentStore.join (`idmint db init`) only: sets the row's `max_id`
   * and residue class to `to` if they are still exactly `from` (compare-and-set). Resolves true
   * when set. The table must have the residue columns (a store of a set adds them in init()).
   */
  async reassign(
    tag: string,
    from: { maxId: bigint; residue: SegmentResidue },
    to: { maxId: bigint; residue: SegmentResidue },
  ): Promise<boolean> {
    checkTag(tag);
    const params = [
      to.maxId,
      to.residue.offset,
      to.residue.increment,
      tag,
      from.maxId,
      from.residue.offset,
      from.residue.increment,
    ];
    return this.#call(
      'reassign',
      false,
      async (db) => (await db.query(this.#sql.reassign, params)).affectedRows === 1,
      () => false,
    );
  }

  /**
   * The set's own records (MultiSegmentStore: the set's members, this database's identity, the
   * high-water marks), in {@link setTableName}, for `keys`: each entry's text and version, or
   * undefined where there is none. Undefined for all of them when the table does not exist (a
   * table of a store of its own, or of a set `idmint db init` has not recorded yet).
   */
  async readSetEntries(
    keys: readonly string[],
  ): Promise<({ version: number; value: string } | undefined)[]> {
    return this.#call('readSetEntries', false, async (db) => {
      const found = new Map<string, { version: number; value: string }>();
      for (let i = 0; i < keys.length; i += SET_READ_CHUNK) {
        const chunk = keys.slice(i, i + SET_READ_CHUNK);
        let rows: readonly SqlRow[];
        try {
          rows = (await db.query(this.#setSql.read(chunk.length), [this.table, ...chunk])).rows;
        } catch (error) {
          // The database answers, but the table is not there (or cannot be read): no entries.
          if (
            await db.query('SELECT 1', []).then(
              () => true,
              () => false,
            )
          )
            return keys.map(() => undefined);
          throw error;
        }
        for (const row of rows) {
          found.set(String(row['entry']), {
            version: Number(row['version']),
            value: String(row['value']),
          });
        }
      }
      return keys.map((key) => found.get(key));
    });
  }

  /**
   * Writes a set record: `value` under `key` if its version is still `version` (undefined: if
   * there is none yet), compare-and-set; the version then goes up by one (a new entry's is 1).
   * Resolves true when written.
   */
  async writeSetEntry(key: string, version: number | undefined, value: string): Promise<boolean> {
    return this.#call('writeSetEntry', false, async (db) => {
      const written =
        version === undefined
          ? await db.query(this.#setSql.insert, [this.table, key, value])
          : await db.query(this.#setSql.update, [value, this.table, key, version]);
      return written.affectedRows === 1;
    });
  }

  listTags(): Promise<TagRecord[]> {
    return this.#call('listTags', false, async (db) =>
      (await db.query(this.#sql.list, [])).rows.map(asRecord).sort(byTag),
    );
  }

  /**
   * Rows whose `update_time` is at or after the cursor less {@link changeOverlapMs}, through the
   * index init() adds (a Leaf table not yet initialised is scanned by the database, and still
   * sends only those rows). The new cursor is the database clock read before the rows, in the
   * same connection, so a write stamped after it is in this read or the next.
   */
  async listTagChanges(since: string | undefined): Promise<TagChanges> {
    const from =
      since === undefined ? undefined : parseChangeCursor(since) - changeOverlapMs(this.#timeoutMs);
    return this.#call('listTagChanges', false, async (db) => {
      const now = Number((await db.query(this.#sql.clock, [])).rows[0]?.['now_ms']);
      if (!Number.isSafeInteger(now))
        throw new IdMintError('STORE_UNAVAILABLE', `the database clock read as ${String(now)}`);
      const records =
        from === undefined
          ? []
          : (await db.query(this.#sql.changedSince, [Math.max(0, from)])).rows.map(asRecord);
      return { records, cursor: changeCursor(now) };
    });
  }

  /**
   * Keyset pages in the database's order of `biz_tag` (its primary key), `next` the last tag read.
   */
  async listTagPage(after: string | undefined, limit: number): Promise<TagPage> {
    checkPageLimit(limit);
    if (after !== undefined) checkTag(after);
    return this.#call('listTagPage', false, async (db) => {
      // Only the listing's columns (see TagListing). The opaque column is looked for at each full
      // read's first page: a Leaf table has none, and `idmint db init` may add it meanwhile.
      if (after === undefined || this.#listsOpaque === undefined)
        this.#listsOpaque = await this.#hasOpaqueColumn(db);
      if (after === undefined || this.#listsOrdering === undefined)
        this.#listsOrdering = await this.#hasColumn(db, ORDERING_COLUMN);
      if (after === undefined && this.#sequence !== true)
        this.#sequence = await this.#hasColumns(db, SEQUENCE_COLUMNS);
      // `db init` adds both columns at once: a table with the ordering column has the opaque one.
      const page = this.#listsOrdering
        ? this.#sql.pageWithOrdering
        : this.#listsOpaque
          ? this.#sql.pageWithOpaque
          : this.#sql.page;
      const rows = (
        after === undefined
          ? await db.query(`${page.first} ${this.#driver.dialect.limit(limit)}`, [])
          : await db.query(`${page.next} ${this.#driver.dialect.limit(limit)}`, [after])
      ).rows;
      const records = rows.map(asListing);
      return {
        records,
        next: records.length < limit ? undefined : records[records.length - 1]?.tag,
      };
    });
  }

  async getTag(tag: string): Promise<TagRecord | undefined> {
    checkTag(tag);
    return this.#call(
      'getTag',
      false,
      (db) => this.#read(db, tag),
      () => undefined,
    );
  }

  async createTag(tag: NewTag): Promise<TagRecord> {
    const values = checkNewTag(tag, this.residue);
    const residue = this.residue === undefined ? [] : [this.residue.offset, this.residue.increment];
    // The sequence columns are named only for a tag with a delta: a Leaf table takes the others.
    const sequenced = values.delta !== 1;
    const sql = sequenced ? this.#sql.sequenced : this.#sql;
    // A table's first tag records its history first (a table with none is fenced before it gets
    // one), so a table idmint fills from empty is never fenced at its first allocation.
    await this.#history.verify();
    return this.#call('createTag', false, async (db) => {
      try {
        // The opaque and periodic columns are named only when set: a Leaf table without them
        // takes plain tags. A periodic row is written whole in one INSERT: no moment without it.
        const params = [values.tag, values.startId, values.step, values.description, ...residue];
        if (values.periodic !== null)
          await db.query(this.#sql.insertPeriodic, [...params, values.periodic]);
        else if (values.ordering !== null)
          await db.query(this.#sql.sequenced.insertOrdered, [
            ...params,
            values.delta,
            values.remainder,
            values.ordering,
          ]);
        else
          await db.query(values.opaque ? sql.insertOpaque : sql.insert, [
            ...params,
            ...(sequenced ? [values.delta, values.remainder] : []),
          ]);
      } catch (error) {
        if (this.#driver.dialect.isDuplicateKey(error))
          throw new IdMintError('TAG_EXISTS', `tag "${values.tag}" already exists`, {
            details: { tag: values.tag },
          });
        if (values.periodic !== null && !(await this.#hasColumn(db, PERIODIC_COLUMN)))
          throw new IdMintError(
            'INVALID_ARGUMENT',
            `tag "${values.tag}" cannot be periodic: table ${this.table} has no ` +
              `${PERIODIC_COLUMN} column (a Leaf table); run "idmint db init" on it to add the ` +
              `column`,
            { cause: error, details: { tag: values.tag } },
          );
        if (values.ordering !== null && !(await this.#hasColumn(db, ORDERING_COLUMN)))
          throw noOrderingColumn(values.tag, this.table, error);
        if (values.opaque && !(await this.#hasOpaqueColumn(db)))
          throw this.#noOpaqueColumn(values.tag, error);
        if (sequenced && !(await this.#hasColumns(db, SEQUENCE_COLUMNS)))
          throw this.#noSequenceColumns(values.tag, error);
        throw this.#refusedValue(error, values.tag);
      }
      return (await this.#read(db, values.tag)) ?? failRead(values.tag);
    });
  }

  async updateTag(tag: string, update: TagUpdate): Promise<TagRecord> {
    checkTag(tag);
    const sets: string[] = [];
    const params: SqlValue[] = [];
    if (update.step !== undefined) {
      sets.push('step = ?');
      params.push(checkStep(update.step));
    }
    if (update.description !== undefined) {
      sets.push('description = ?');
      params.push(checkDescription(update.description));
    }
    const opaque = checkOpaqueUpdate(update.opaque);
    // Only ever set to 1, never back to 0 (see TagUpdate.opaque).
    if (opaque) sets.push(`${OPAQUE_COLUMN} = 1`);
    const sequenced = update.delta !== undefined || update.remainder !== undefined;
    if (sequenced) {
      // Safe at any time: later IDs are above max_id, earlier ones below it; in a set each
      // database's class stays inside its own residue mod the set's size.
      const sequence = checkSequence(update.delta, update.remainder);
      if (this.residue !== undefined) checkSequenceInSet(tag, sequence, this.residue.increment);
      sets.push('delta = ?', 'remainder = ?');
      params.push(sequence.delta, sequence.remainder);
    }
    return this.#call(
      'updateTag',
      false,
      async (db) => {
        // A tag's ordering never changes, so read first is enough: an ordered tag stays plain.
        if (opaque && (await this.#read(db, tag))?.ordering !== undefined)
          throw orderedNotOpaque(tag);
        if (sets.length > 0) {
          try {
            await db.query(
              `UPDATE ${this.table} SET ${sets.join(', ')}, ` +
                `update_time = ${this.#driver.dialect.nowTimestamp} WHERE biz_tag = ?`,
              [...params, tag],
            );
          } catch (error) {
            if (opaque && !(await this.#hasOpaqueColumn(db)))
              throw this.#noOpaqueColumn(tag, error);
            if (sequenced && !(await this.#hasColumns(db, SEQUENCE_COLUMNS)))
              throw this.#noSequenceColumns(tag, error);
            throw this.#refusedValue(error, tag);
          }
        }
        // Read back rather than trust affectedRows: MySQL counts only rows whose values changed.
        const record = await this.#read(db, tag);
        if (record === undefined) throw tagNotFound(tag);
        return record;
      },
      () => {
        throw tagNotFound(tag);
      },
    );
  }

  async deleteTag(tag: string): Promise<boolean> {
    checkTag(tag);
    return this.#call(
      'deleteTag',
      false,
      async (db) =>
        (await db.query(`DELETE FROM ${this.table} WHERE biz_tag = ?`, [tag])).affectedRows === 1,
      () => false,
    );
  }

  close(): Promise<void> {
    return this.#driver.close();
  }

  /**
   * Runs `run` on one connection, bounded by the store's timeout. `absent`, when given, answers
   * for a tag the table cannot hold, which the database refuses even to compare (a tag with a
   * character a Leaf table's character set lacks): no row can have it.
   */
  #call<T>(
    operation: string,
    transaction: boolean,
    run: (db: SqlConnection) => Promise<T>,
    absent?: () => T,
    timeoutMs = this.#timeoutMs,
  ): Promise<T> {
    const guarded =
      absent === undefined
        ? run
        : async (db: SqlConnection) => {
            try {
              return await run(db);
            } catch (error) {
              if (this.#driver.dialect.isValueRefused(error)) return absent();
              throw error;
            }
          };
    const call = (signal: AbortSignal) =>
      this.#driver.withConnection(guarded, { transaction, signal });
    return storeCall(this.#place, operation, timeoutMs, call);
  }

  /**
   * Adds the opaque column where the table lacks it (a Leaf table, or one made before idmint had
   * it). Neither MySQL nor SQLite has `ADD COLUMN IF NOT EXISTS`, so the column is looked for
   * first; a concurrent init that added it first is not an error.
   */
  async #addOpaqueColumn(db: SqlConnection): Promise<void> {
    if (await this.#hasOpaqueColumn(db)) return;
    try {
      await db.query(
        `ALTER TABLE ${this.table} ADD COLUMN ${OPAQUE_COLUMN} smallint NOT NULL DEFAULT 0`,
        [],
      );
    } catch (error) {
      if (!(await this.#hasOpaqueColumn(db))) throw error;
    }
  }

  /** Adds the periodic column where the table lacks it, as {@link #addOpaqueColumn} does. */
  #addPeriodicColumn(db: SqlConnection): Promise<void> {
    return this.#addColumn(db, PERIODIC_COLUMN, PERIODIC_COLUMN_TYPE);
  }

  /** Adds `column` of `type` where the table lacks it, as {@link #addOpaqueColumn} does. */
  async #addColumn(db: SqlConnection, column: string, type: string): Promise<void> {
    if (await this.#hasColumn(db, column)) return;
    try {
      await db.query(`ALTER TABLE ${this.table} ADD COLUMN ${column} ${type}`, []);
    } catch (error) {
      if (!(await this.#hasColumn(db, column))) throw error;
    }
  }

  #hasColumn(db: SqlConnection, column: string): Promise<boolean> {
    return db.query(`SELECT ${column} FROM ${this.table} WHERE 1 = 0`, []).then(
      () => true,
      () => false,
    );
  }

  /**
   * The index on `update_time` the incremental tag refresh reads through. Created where missing;
   * on a large live table this takes a while (PostgreSQL blocks writes to it meanwhile).
   */
  async #addChangeIndex(db: SqlConnection): Promise<void> {
    const { dialect } = this.#driver;
    try {
      await db.query(
        dialect.createIndex(this.table, changeIndexName(this.table), 'update_time'),
        [],
      );
    } catch (error) {
      if (!dialect.isDuplicateIndex(error)) throw error;
    }
  }

  #hasOpaqueColumn(db: SqlConnection): Promise<boolean> {
    return db.query(`SELECT ${OPAQUE_COLUMN} FROM ${this.table} WHERE 1 = 0`, []).then(
      () => true,
      () => false,
    );
  }

  #noSequenceColumns(tag: string, cause: unknown): IdMintError {
    return new IdMintError(
      'INVALID_ARGUMENT',
      `tag "${tag}" cannot have a delta or remainder: table ${this.table} has no delta and ` +
        'remainder columns (a Leaf table); run "idmint db init" on it to add them',
      { cause, details: { tag } },
    );
  }

  #noOpaqueColumn(tag: string, cause: unknown): IdMintError {
    return new IdMintError(
      'OPAQUE_UNAVAILABLE',
      `tag "${tag}" cannot be made opaque: table ${this.table} has no ${OPAQUE_COLUMN} column ` +
        `(a Leaf table); run "idmint db init" on it to add the column ` +
        `(plain tags keep working without it)`,
      {
        cause,
        details: { tag },
      },
    );
  }

  /**
   * A write the database refused because the table cannot hold a value: bad input, not an outage.
   */
  #refusedValue(error: unknown, tag: string): unknown {
    if (!this.#driver.dialect.isValueRefused(error)) return error;
    const reason = error instanceof Error ? error.message : String(error);
    return new IdMintError(
      'INVALID_ARGUMENT',
      `tag "${tag}": table ${this.table} cannot store this tag or description (${reason}); ` +
        `on MySQL, a table in the utf8mb4 character set holds every tag`,
      {
        cause: error,
        details: { tag },
      },
    );
  }

  async #read(db: SqlConnection, tag: string): Promise<TagRecord | undefined> {
    const row = (await db.query(this.#sql.get, [tag])).rows[0];
    return row === undefined ? undefined : asRecord(row);
  }

  /**
   * Adds `id_offset` and `id_increment` where the table lacks them. Neither MySQL nor SQLite has
   * `ADD COLUMN IF NOT EXISTS`, so each column is looked for first; a concurrent init that added
   * it first is not an error.
   */
  #addResidueColumns(db: SqlConnection): Promise<void> {
    return this.#addColumns(db, RESIDUE_COLUMNS);
  }

  /** Whether the table has every one of `columns`. */
  #hasColumns(
    db: SqlConnection,
    columns: readonly (readonly [string, number])[],
  ): Promise<boolean> {
    const names = columns.map(([column]) => column).join(', ');
    return db.query(`SELECT ${names} FROM ${this.table} WHERE 1 = 0`, []).then(
      () => true,
      () => false,
    );
  }

  /** Adds each of `columns` (an int, NOT NULL, with its default) where the table lacks it. */
  async #addColumns(
    db: SqlConnection,
    columns: readonly (readonly [string, number])[],
  ): Promise<void> {
    const has = (column: string) => this.#hasColumns(db, [[column, 0]]);
    for (const [column, plain] of columns) {
      if (await has(column)) continue;
      try {
        await db.query(
          `ALTER TABLE ${this.table} ADD COLUMN ${column} int NOT NULL DEFAULT ${plain}`,
          [],
        );
      } catch (error) {
        if (!(await has(column))) throw error;
      }
    }
  }

  /**
   * The set's own table ({@link setTableName}); a concurrent init that created it first is not an
   * error.
   */
  async #createSetTable(db: SqlConnection): Promise<void> {
    try {
      await db.query(this.#setSql.create, []);
    } catch (error) {
      if (!this.#driver.dialect.isDuplicateKey(error)) throw error;
    }
  }

  /**
   * The guarded UPDATE matched no row: the history is not the recorded one, no such tag, a row of
   * another class, a row no range can come from, or the step would pass 2^63-1; else the row
   * changed between the two statements (a fence landed, the tag was created): try again.
   */
  async #whyNotAllocated(
    db: SqlConnection,
    tag: string,
    step: number | undefined,
  ): Promise<NotAllocated> {
    const history = await this.#readHistory(db);
    if (history.recorded !== history.live)
      return { retry: 'history', live: history.live, recorded: history.recorded };
    const row = (await db.query(this.#sql.readMaxId, [tag])).rows[0];
    if (row === undefined) return tagNotFound(tag);
    if (this.#orderedElsewhere(row)) return orderedInFirstDatabase(tag, this.residue);
    const residue = this.residue;
    const found = storedResidue(row['id_offset'], row['id_increment']);
    if (residue !== undefined && !sameResidue(found, residue))
      return residueMismatch(tag, found, residue);
    const stored = storedStep(row['step']);
    if (stored === undefined) return tagMisconfigured(tag, 'step', row['step']);
    const maxId = toBigInt(row['max_id'], 'max_id');
    if (maxId < 0n) return tagMisconfigured(tag, 'max_id', maxId);
    const sequence = storedSequence(row['delta'], row['remainder']);
    if (sequence === undefined) return tagMisconfigured(tag, 'delta', row['delta']);
    if (residue !== undefined) {
      try {
        checkSequenceInSet(tag, sequence, residue.increment);
      } catch (error) {
        return tagMisconfigured(tag, 'delta', `${row['delta']} (${(error as Error).message})`);
      }
    }
    const used = step ?? stored;
    // Room for the range and for raising max_id to the class first (at most increment - 1).
    const own = combinedResidue(residue ?? { offset: 0, increment: 1 }, sequence);
    const needed = residueRoom(used, own);
    return maxId > MAX_SEGMENT_ID - needed
      ? idSpaceExhausted(tag, maxId, used)
      : { retry: 'raced' };
  }
}

function statements(table: string, dialect: SqlDialect, residue: SegmentResidue | undefined) {
  const now = dialect.nowTimestamp;
  const step = 'COALESCE(?, step)';
  // The table's row in the history table (the table name is a validated identifier, a literal
  // here), and the guard every allocation and give-back carries: the recorded history is the
  // database's live one, read on the server the statement runs on, in the same statement (with
  // RETURNING; else in the same transaction, read back with the row: see #allocateOnce).
  const live = dialect.liveHistory;
  const record = `${HISTORY_TABLE} WHERE segment_table = '${table}'`;
  const verified = `EXISTS (SELECT 1 FROM ${record} AND history = ${live})`;
  // What an allocation returns as its history: the record, which the guard just found equal to
  // the live history (in the same snapshot), read by its key instead of evaluating that again
  // (PostgreSQL's reads the control file: about 20 us here).
  const recorded = `(SELECT history FROM ${record})`;
  const history = {
    createHistoryTable:
      `CREATE TABLE IF NOT EXISTS ${HISTORY_TABLE} ` +
      `(segment_table varchar(64) NOT NULL PRIMARY KEY, ` +
      `history varchar(255) NOT NULL, fences bigint NOT NULL DEFAULT 0, ` +
      `${dialect.autoTimestampColumn('update_time')})${dialect.tableOptions}`,
    readHistory:
      `SELECT ${live} AS live, (SELECT history FROM ${record}) AS recorded, ` +
      `(SELECT fences FROM ${record}) AS fences`,
    readLiveHistory: `SELECT ${live} AS live`,
    recordHistory: dialect.insertIfAbsent(
      HISTORY_TABLE,
      ['segment_table', 'history', 'fences', 'update_time'],
      [`'${table}'`, '?', '?', now],
    ),
    claimHistory:
      `UPDATE ${HISTORY_TABLE} SET history = ?, fences = fences + 1, update_time = ${now} ` +
      `WHERE segment_table = '${table}' AND history = ? AND fences = ?`,
    readAllocated:
      `SELECT *, ${live} AS ${HISTORY_COLUMN}, ` +
      `(SELECT history FROM ${record}) AS ${RECORDED_COLUMN} ` +
      `FROM ${table} WHERE biz_tag = ?`,
  };
  // Leaf's columns and types (scripts/leaf_alloc.sql), so Leaf's own table works unchanged and
  // vice versa; update_time as Leaf's: set on insert (and on update where the database can).
  const leafColumns =
    'biz_tag varchar(128) NOT NULL PRIMARY KEY, max_id bigint NOT NULL DEFAULT 1, ' +
    'step int NOT NULL, description varchar(256) DEFAULT NULL, ' +
    `${dialect.autoTimestampColumn('update_time')}`;
  // Defaults that leave a plain tag, so Leaf's own INSERTs still work on idmint's table.
  const opaqueColumn =
    `${OPAQUE_COLUMN} smallint NOT NULL DEFAULT 0, ${PERIODIC_COLUMN} ${PERIODIC_COLUMN_TYPE}, ` +
    `${ORDERING_COLUMN} ${ORDERING_COLUMN_TYPE}`;
  const sequenceColumns = SEQUENCE_COLUMNS.map(
    ([column, plain]) => `${column} int NOT NULL DEFAULT ${plain}`,
  ).join(', ');
  const release =
    `UPDATE ${table} SET max_id = ?, update_time = ${now} ` +
    `WHERE biz_tag = ? AND max_id = ? AND ${verified}`;
  // Never lowers: only a max_id below the target is moved.
  const raise =
    `UPDATE ${table} SET max_id = ?, ` + `update_time = ${now} WHERE biz_tag = ? AND max_id < ?`;
  const insert = `INSERT INTO ${table} (biz_tag, max_id, step, description, update_time`;
  const shared = {
    ...history,
    // Whole rows: a store of its own must see a set's residue columns where the table has them.
    readMaxId: `SELECT * FROM ${table} WHERE biz_tag = ?`,
    list: `SELECT * FROM ${table}`,
    clock: `SELECT ${dialect.nowMs} AS now_ms`,
    changedSince: `SELECT * FROM ${table} WHERE update_time >= ${dialect.timestampFromMs('?')}`,
    // A full read's pages: the listing's columns only (see TagListing), opaque where the table has
    // it.
    page: pageQueries(table, 'biz_tag, step'),
    pageWithOpaque: pageQueries(table, `biz_tag, step, ${OPAQUE_COLUMN}`),
    pageWithOrdering: pageQueries(table, `biz_tag, step, ${OPAQUE_COLUMN}, ${ORDERING_COLUMN}`),
    get: `SELECT * FROM ${table} WHERE biz_tag = ?`,
    reassign:
      `UPDATE ${table} SET max_id = ?, id_offset = ?, id_increment = ?, update_time = ${now} ` +
      'WHERE biz_tag = ? AND max_id = ? AND id_offset = ? AND id_increment = ?',
  };
  const sequenced = sequencedStatements(table, dialect, residue, step, verified, recorded, {
    insert,
    leafColumns,
    opaqueColumn,
  });
  if (residue === undefined) {
    // A row written outside idmint may hold a step of 0 or less (no range, or one going backwards)
    // or a negative max_id: such a row is never updated (#whyNotAllocated names it). CASE, not AND,
    // so the overflow guard is evaluated only for a valid step: `MAX - step` with a negative step
    // overflows (an error on PostgreSQL and MySQL, a lossy float on SQLite), and SQL promises no
    // order for the terms of an AND.
    const allocate =
      `UPDATE ${table} SET max_id = max_id + ${step}, update_time = ${now} ` +
      `WHERE biz_tag = ? AND CASE WHEN step BETWEEN 1 AND ${MAX_TAG_STEP} AND max_id >= 0 ` +
      `THEN max_id <= ${MAX_SEGMENT_ID} - ${step} ELSE 1 = 0 END`;
    return {
      ...shared,
      createTable:
        `CREATE TABLE IF NOT EXISTS ${table} ` +
        `(${leafColumns}, ${opaqueColumn}, ${sequenceColumns})${dialect.tableOptions}`,
      allocate,
      allocateReturning:
        `${allocate} AND ${verified} ` + `RETURNING *, ${recorded} AS ${HISTORY_COLUMN}`,
      release,
      raise,
      insert: `${insert}) VALUES (?, ?, ?, ?, ${now})`,
      insertOpaque: `${insert}, ${OPAQUE_COLUMN}) VALUES (?, ?, ?, ?, ${now}, 1)`,
      sequenced,
      insertPeriodic: `${insert}, ${PERIODIC_COLUMN}) VALUES (?, ?, ?, ?, ${now}, ?)`,
    };
  }
  // Database r of a set of N. Offset and increment are validated integers, written into the
  // statements as literals. max_id is first raised to the next ID of class r (a row a Leaf node or
  // a store of its own moved is realigned, skipping only IDs of class r that no one issued), then
  // advanced by step * N (in 64 bits: PostgreSQL multiplies two ints in 32); the range is the step
  // IDs of class r below the new max_id. The residue columns guard the row: a row of another class
  // or set size, or one fenced (id_increment 0) while a set is re-formed, is never updated. The
  // overflow guard leaves room for the realignment (at most N - 1: residueRoom).
  const { offset: r, increment: n } = residue;
  const wide = dialect.castToBigint(step);
  const guard = `id_offset = ${r} AND id_increment = ${n}`;
  const allocate =
    `UPDATE ${table} SET max_id = max_id + (${r + n} - max_id % ${n}) % ${n} + ${wide} * ${n}, ` +
    `update_time = ${now} WHERE biz_tag = ? AND ${guard} ` +
    `AND CASE WHEN step BETWEEN 1 AND ${MAX_TAG_STEP} AND max_id >= 0 ` +
    `THEN max_id <= ${MAX_SEGMENT_ID} - ${wide} * ${n} - ${n - 1} ELSE 1 = 0 END`;
  return {
    ...shared,
    createTable:
      `CREATE TABLE IF NOT EXISTS ${table} (${leafColumns}, ` +
      'id_offset int NOT NULL DEFAULT 0, id_increment int NOT NULL DEFAULT 1, ' +
      `${opaqueColumn}, ${sequenceColumns})${dialect.tableOptions}`,
    allocate,
    allocateReturning: `${allocate} AND ${verified} RETURNING *, ${recorded} AS ${HISTORY_COLUMN}`,
    release: `${release} AND ${guard}`,
    raise: `${raise} AND ${guard}`,
    insert: `${insert}, id_offset, id_increment) VALUES (?, ?, ?, ?, ${now}, ?, ?)`,
    insertOpaque:
      `${insert}, id_offset, id_increment, ${OPAQUE_COLUMN}) ` +
      `VALUES (?, ?, ?, ?, ${now}, ?, ?, 1)`,
    sequenced,
    insertPeriodic:
      `${insert}, id_offset, id_increment, ${PERIODIC_COLUMN}) ` +
      `VALUES (?, ?, ?, ?, ${now}, ?, ?, ?)`,
  };
}

/**
 * The statements of a table with the sequence columns (`delta`, `remainder`): allocation aligns
 * max_id to the row's class and advances it by `step * stride`, in one statement as before. The
 * class is the tag's own (remainder mod delta) on a store of its own; on database r of a set of
 * N, the one class mod N * delta inside both r mod N and the tag's class (combinedResidue),
 * written out per delta coprime to N as `r + N * ((remainder - r) * inverse(N) mod delta)`. A
 * delta sharing a factor with N has no such class: the guard then matches no row, and
 * #whyNotAllocated names it. Every ID the statement hands out stays in the database's class mod
 * N, so a set's own guards (give-back, raise, re-forming) hold unchanged.
 */
function sequencedStatements(
  table: string,
  dialect: SqlDialect,
  residue: SegmentResidue | undefined,
  step: string,
  verified: string,
  recorded: string,
  parts: { insert: string; leafColumns: string; opaqueColumn: string },
) {
  const now = dialect.nowTimestamp;
  const { offset: r, increment: n } = residue ?? { offset: 0, increment: 1 };
  const wide = dialect.castToBigint(step);
  const stride = n === 1 ? 'delta' : `(delta * ${n})`;
  const deltas = Array.from({ length: MAX_TAG_DELTA }, (_, i) => i + 1).filter(
    (d) => gcdOf(d, n) === 1,
  );
  const klass =
    n === 1
      ? 'remainder'
      : `CASE delta ${deltas
          .map(
            (d) =>
              `WHEN ${d} THEN ${r} + ${n} * ` +
              `(((remainder + ${d * n - r}) * ${inverseMod(n, d)}) % ${d})`,
          )
          .join(' ')} END`;
  const sane = `delta IN (${deltas.join(', ')}) AND remainder >= 0 AND remainder < delta`;
  const guard = residue === undefined ? '' : ` AND id_offset = ${r} AND id_increment = ${n}`;
  const align = `(${klass} + ${stride} - max_id % ${stride}) % ${stride}`;
  const room = `${MAX_SEGMENT_ID} - ${wide} * ${stride} - (${stride} - 1)`;
  const allocate =
    `UPDATE ${table} SET max_id = max_id + ${align} + ${wide} * ${stride}, ` +
    `update_time = ${now} WHERE biz_tag = ?${guard} AND CASE WHEN step BETWEEN 1 AND ` +
    `${MAX_TAG_STEP} AND max_id >= 0 AND ${sane} THEN max_id <= ${room} ELSE 1 = 0 END`;
  const residueColumns = residue === undefined ? '' : ', id_offset, id_increment';
  const residueMarks = residue === undefined ? '' : ', ?, ?';
  return {
    allocate,
    allocateReturning: `${allocate} AND ${verified} RETURNING *, ${recorded} AS ${HISTORY_COLUMN}`,
    insert:
      `${parts.insert}${residueColumns}, delta, remainder) ` +
      `VALUES (?, ?, ?, ?, ${now}${residueMarks}, ?, ?)`,
    insertOpaque:
      `${parts.insert}${residueColumns}, delta, remainder, ${OPAQUE_COLUMN}) ` +
      `VALUES (?, ?, ?, ?, ${now}${residueMarks}, ?, ?, 1)`,
    // A cluster-ordered tag names the sequence columns too: `db init` adds them with this one.
    insertOrdered:
      `${parts.insert}${residueColumns}, delta, remainder, ${ORDERING_COLUMN}) ` +
      `VALUES (?, ?, ?, ?, ${now}${residueMarks}, ?, ?, ?)`,
  };
}

/** The two forms of an allocation a dialect runs (RETURNING, or UPDATE then SELECT). */
interface AllocationStatements {
  readonly allocate: string;
  readonly allocateReturning: string;
}

/** `statements`' allocation, matching only rows that are not cluster-ordered. */
function guardOrdering(statements: AllocationStatements): AllocationStatements {
  const guard = (sql: string) => {
    const where = 'WHERE biz_tag = ?';
    if (sql.indexOf(where) < 0 || sql.indexOf(where) !== sql.lastIndexOf(where))
      throw new Error(`an allocation statement without one "${where}": ${sql}`);
    return sql.replace(where, `${where} AND ${ORDERING_COLUMN} IS NULL`);
  };
  return {
    allocate: guard(statements.allocate),
    allocateReturning: guard(statements.allocateReturning),
  };
}

function gcdOf(a: number, b: number): number {
  return b === 0 ? a : gcdOf(b, a % b);
}

/** `x` with `a * x ≡ 1 (mod m)`, for `a` coprime to `m` (1 when m is 1). */
function inverseMod(a: number, m: number): number {
  for (let x = 1; x < m; x++) if ((a * x) % m === 1) return x;
  return 1;
}

/**
 * Keys read in one statement, so a read of every tag's marks stays within every backend's limits.
 */
const SET_READ_CHUNK = 200;

/**
 * The table of a set's own records (MultiSegmentStore: set-records.ts), beside the segment table:
 * `<table>_set`, cut to stay within 63 characters. Its rows name the segment table they belong to,
 * so two long table names cut to the same one never share records. Leaf's table is not touched.
 */
export function setTableName(table: string): string {
  return `${table.slice(0, 59)}_set`;
}

function setStatements(table: string, dialect: SqlDialect) {
  const name = setTableName(table);
  const columns = [
    'segment_table varchar(63) NOT NULL',
    'entry varchar(200) NOT NULL',
    'version bigint NOT NULL',
    'value text NOT NULL',
    'PRIMARY KEY (segment_table, entry)',
  ];
  const marks = (keys: number) => Array.from({ length: keys }, () => '?').join(', ');
  return {
    create: `CREATE TABLE IF NOT EXISTS ${name} (${columns.join(', ')})${dialect.tableOptions}`,
    read: (keys: number) =>
      `SELECT entry, version, value FROM ${name} ` +
      `WHERE segment_table = ? AND entry IN (${marks(keys)})`,
    insert: dialect.insertIfAbsent(
      name,
      ['segment_table', 'entry', 'version', 'value'],
      ['?', '?', '1', '?'],
    ),
    update:
      `UPDATE ${name} SET value = ?, version = version + 1 ` +
      'WHERE segment_table = ? AND entry = ? AND version = ?',
  };
}

/**
 * The fence's UPDATE: every row (or the one tag, a `?`) raised by the margin, capped at 2^63-1 so
 * a tag near the top is exhausted rather than wrapped. In ranges, the margin is per row: `ranges`
 * of the largest range a node may take for it, `max(maxStep, step)` (a stored step above maxStep
 * is the dynamic step's floor). Computed in 64 bits: at most 10^6 * (2^31 - 1), below 2^53. The
 * margin is validated numbers, written as literals. A row with a negative max_id is left alone.
 */
function fenceStatement(
  table: string,
  dialect: SqlDialect,
  margin: FenceMargin,
  oneTag: boolean,
): string {
  const amount =
    'ids' in margin
      ? dialect.castToBigint(margin.ids.toString())
      : `${dialect.castToBigint(String(margin.ranges))} * ` +
        `${dialect.greatest(String(margin.maxStep), 'step')}`;
  const raised =
    `CASE WHEN max_id > ${MAX_SEGMENT_ID} - ${amount} ` +
    `THEN ${MAX_SEGMENT_ID} ELSE max_id + ${amount} END`;
  const rows = oneTag ? 'max_id >= 0 AND biz_tag = ?' : 'max_id >= 0';
  return (
    `UPDATE ${table} SET max_id = ${raised}, ` +
    `update_time = ${dialect.nowTimestamp} WHERE ${rows}`
  );
}

/**
 * The update_time index's name. Index names are per schema on PostgreSQL and SQLite, so it names
 * the table; cut to stay within every backend's 63-character limit.
 */
export function changeIndexName(table: string): string {
  return `${table.slice(0, 50)}_update_time`;
}

/**
 * The first page and the next ones (after a biz_tag) of `columns`, in biz_tag order; the caller
 * adds the dialect's limit.
 */
function pageQueries(
  table: string,
  columns: string,
): { readonly first: string; readonly next: string } {
  return {
    first: `SELECT ${columns} FROM ${table} ORDER BY biz_tag`,
    next: `SELECT ${columns} FROM ${table} WHERE biz_tag > ? ORDER BY biz_tag`,
  };
}

/** A page's row (biz_tag, step and, where the table has it, opaque) as a TagListing. */
function asListing(row: SqlRow): TagListing {
  return {
    tag: String(row['biz_tag']),
    step: toStep(row['step']),
    opaque: toOpaqueFlag(row[OPAQUE_COLUMN]),
    ...toOrdering(row[ORDERING_COLUMN]),
  };
}

function asRecord(row: SqlRow): TagRecord {
  return tagRecord({
    biz_tag: row['biz_tag'],
    max_id: row['max_id'],
    step: row['step'],
    description: row['description'],
    update_time: row['update_time'],
    id_offset: row['id_offset'],
    id_increment: row['id_increment'],
    opaque: row[OPAQUE_COLUMN],
    delta: row['delta'],
    remainder: row['remainder'],
    periodic: row[PERIODIC_COLUMN],
    ordering: row[ORDERING_COLUMN],
  });
}

function failRead(tag: string): never {
  throw new IdMintError('STORE_UNAVAILABLE', `tag "${tag}" was created but could not be read back`);
}

/** Options of a store on a connection pool (PostgreSQL, MySQL). */
export interface PooledSegmentStoreOptions<Pool> extends SegmentStoreOptions {
  /** The driver's pool (or anything shaped like the part idmint uses). */
  readonly pool: Pool;
  /** End the pool on close(). Default false: a pool you pass in is yours to end. */
  readonly closePool?: boolean;
}

/** Options of a store that opens its own pool from a URL. */
export interface ConnectSegmentStoreOptions extends SegmentStoreOptions {
  /** Connections in the pool. Default 10. */
  readonly poolSize?: number;
}
