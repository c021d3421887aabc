/**
 * Where segment mode keeps its ranges: one row (or hash) per business tag, Leaf's `leaf_alloc`
 * table. Implemented once per backend under src/stores/<backend>/; every implementation passes the
 * same conformance suite (test/support/segment-store-suite.ts).
 *
 * All IDs are bigint end to end: a tag's max_id may be anywhere up to 2^63-1.
 */

import type { IssuerLeases } from './issuer-lease.ts';

/** A tag as stored. */
export interface TagRecord {
  /** The business tag (Leaf's `biz_tag`): 1 to 128 code points, no U+0000 (core's `checkTag`). */
  readonly tag: string;
  /** The next range starts here: Leaf's `max_id` (the first ID not yet handed out by the store). */
  readonly maxId: bigint;
  /** IDs per range, as configured (Leaf's `step`); the service may allocate larger ranges. */
  readonly step: number;
  /** Free text for operators, up to 256 code points, no U+0000 (core's `checkDescription`). */
  readonly description: string | null;
  /** Last change, as the store reports it; informational only, null where the row has none. */
  readonly updatedAt: Date | null;
  /**
   * The residue class the row issues from, where the table records one (idmint's `id_offset` and
   * `id_increment` columns, TinyId's `remainder` and `delta`): a row of database `offset` in a set
   * of `increment` databases issues only IDs `≡ offset (mod increment)`. An increment of 0 marks a
   * row fenced while a set is re-formed (`idmint db init`): nothing allocates from it. Absent on a
   * Leaf table without those columns, and on a record a multi-database store merged from several
   * rows; `{ offset: 0, increment: 1 }` is a plain row, every ID.
   */
  readonly residue?: SegmentResidue;
  /**
   * True when the tag issues opaque IDs (docs/formats.md, Opaque IDs): its dense IDs are served
   * FF1-encoded. Stored in idmint's `opaque` column (a hash field on Redis); absent or false on a
   * row without it, such as a Leaf table's. Once true it stays true (see {@link TagUpdate.opaque}).
   */
  readonly opaque?: boolean;
  /**
   * The tag's own sequence (TinyId's `delta` and `remainder`, idmint's columns of the same names):
   * the tag issues only IDs `≡ remainder (mod delta)`, each range's IDs `delta` apart (times a
   * set's size). Absent on a row without the columns (a Leaf table): 1 and 0, every ID.
   */
  readonly delta?: number;
  readonly remainder?: number;

  /**
   * Present on a periodic tag's own row (docs/segments.md, Periodic sequences): its option as
   * stored, canonical JSON of core's PeriodicOptions (parse with core's parsePeriodic). Such a row
   * issues nothing itself (its max_id is 2^63-1); each period draws from its own plain row,
   * `<tag>@<period key>`. Stored in idmint's `periodic` column (a hash field on Redis); set only
   * when the tag is created, never changed.
   */
  readonly periodic?: string;

  /**
   * `cluster` on a cluster-ordered tag (docs/segments.md, Cluster order): one node at a time
   * issues it, holding the tag's issuer lease ({@link SegmentStore.issuers}), so every answer is
   * above every answer that came before it anywhere in the cluster. Stored in idmint's `ordering`
   * column (a hash field on Redis); absent on every other tag. Set only when the tag is created.
   */
  readonly ordering?: TagOrdering;
}

/** How a tag's IDs are ordered across nodes: `cluster`, strictly increasing cluster-wide. */
export type TagOrdering = 'cluster';

/**
 * A residue class of IDs: `offset`, `offset + increment`, `offset + 2 * increment`, ... (see
 * docs/segments.md, Several databases).
 */
export interface SegmentResidue {
  /**
   * 0 to `increment - 1`: which database of the set (MySQL's `auto_increment_offset` minus one,
   * TinyId's `remainder`).
   */
  readonly offset: number;
  /**
   * How many databases share the tag, 1 to 64 (`MAX_SEGMENT_DATABASES`, core/segment-limits.ts;
   * MySQL's `auto_increment_increment`, TinyId's `delta`); 0 only on a fenced row.
   */
  readonly increment: number;
}

/**
 * A range handed out by {@link SegmentStore.allocate}: `step` IDs from `start` (inclusive) to
 * `end` (exclusive), `stride` apart: `start`, `start + stride`, ..., `end - stride`.
 *
 * Every consumer of a range must step by {@link stride} (absent means 1): a range from one
 * database of a set of N is `start, start + N, start + 2N, ...`, and the numbers between belong
 * to the other databases. Counting IDs is `(end - start) / stride`, never `end - start`.
 */
export interface SegmentRange {
  readonly tag: string;
  /**
   * First ID of the range: `max_id - step * stride` after the update, as Leaf computes it (stride
   * 1).
   */
  readonly start: bigint;
  /** One past the range: the new `max_id`, `start + step * stride`. */
  readonly end: bigint;
  /** How many IDs the range holds, the step it was allocated with (`(end - start) / stride`). */
  readonly step: number;
  /**
   * Distance between consecutive IDs of the range: absent (or 1) for a range of consecutive IDs,
   * the one-database case; N for a range from one database of a set of N, whose IDs all share
   * `start`'s residue mod N. Always 1 to 64 (`MAX_SEGMENT_DATABASES`).
   */
  readonly stride?: number;
  /**
   * The tag's configured step as stored when the range was allocated, read in the same atomic
   * step. The service never shrinks its dynamic step below it (Leaf's `minStep`), so a step an
   * operator raises is the floor of the loads that follow.
   */
  readonly tagStep: number;
}

/**
 * What a store knows of its database's history (docs/segments.md, Failover and restore): the
 * history it runs on now, and the one its table was last fenced for. A promoted replica or a
 * restore starts a new history, which may lack allocations the old one made.
 */
export interface StoreHistory {
  /** Which database of a set (its URL, password hidden); absent for a store of its own. */
  readonly database?: string;
  /**
   * The database's history as it reports it now: `postgres system <id> timeline <n>`, `mysql
   * server_id <n>`, `redis replid <id>`, `sqlite`. Changes on a promotion (and, on Redis, a
   * restart); a restore that keeps it is what `idmint db fence` is for.
   */
  readonly live: string;
  /** The history the table was last fenced for; undefined when none is recorded yet. */
  readonly recorded: string | undefined;
  /** Fences so far: automatic (one per new history) and by an operator. 0 when none. */
  readonly fences: number;
}

/**
 * How far a fence raises each tag's `max_id`: `ranges` of the largest range a node may allocate
 * for the tag (`max(maxStep, the tag's stored step)`), or exactly `ids`. Either is capped at
 * 2^63-1 (the tag is then exhausted, never wrapped).
 */
export type FenceMargin =
  | { readonly ranges: number; readonly maxStep: number }
  | { readonly ids: bigint };

/** What {@link SegmentStore.fence} is asked. */
export interface FenceRequest {
  /** Default: the store's own margin (its `fence` option). */
  readonly margin?: FenceMargin;
  /** Only this tag (TAG_NOT_FOUND if it does not exist); default every tag. */
  readonly tag?: string;
  /**
   * Fence only if the table has been fenced exactly this many times ({@link StoreHistory.fences}),
   * so that a retry after an unknown outcome does nothing twice. Default: fence in any case.
   */
  readonly ifFences?: number;
}

/** What {@link SegmentStore.fence} did, per database. */
export interface FenceReport {
  /** Which database of a set; absent for a store of its own. */
  readonly database?: string;
  /** False when `ifFences` did not match: nothing was changed. */
  readonly fenced: boolean;
  /** Rows raised (tags; a row with a negative max_id, written outside idmint, is left as it is). */
  readonly tags: number;
  /** The history now recorded (the live one). */
  readonly history: string;
  /** Fences so far, this one included. */
  readonly fences: number;
}

/**
 * A store found its database on a new history (its `onHistory` option, for logs and metrics):
 * `fenced`, it fenced the new history itself (it was the first to see it); `changed`, it found the
 * history other than the one it last allocated on, already fenced (by another node, or an
 * operator).
 */
export interface StoreHistoryEvent {
  readonly type: 'history';
  readonly action: 'fenced' | 'changed';
  /** The table (SQL) or key prefix (Redis). */
  readonly table: string;
  /** Which database of a set; absent for a store of its own. */
  readonly database?: string;
  /** The history before: recorded (fenced) or last allocated on (changed); undefined if none. */
  readonly from: string | undefined;
  readonly to: string;
  /** Fenced: the rows raised, and the margin in words. */
  readonly tags?: number;
  readonly margin?: string;
}

/** What {@link SegmentStore.createTag} needs. */
export interface NewTag {
  readonly tag: string;
  /** IDs per range, 1 to 2^31-1 (the column is Leaf's `int`). */
  readonly step: number;
  /**
   * First ID the tag will issue, 0 to 2^63-1 minus `step` (room for one range). Default 1, as
   * Leaf's table default. Stored as `max_id`.
   */
  readonly startId?: bigint;
  readonly description?: string | null;
  /**
   * Create the tag opaque. Needs the `opaque` column (SQL): a table without it, such as Leaf's,
   * refuses with OPAQUE_UNAVAILABLE until `idmint db init` adds it.
   */
  readonly opaque?: boolean;
  /**
   * The tag's own sequence: only IDs `≡ remainder (mod delta)`, delta 1 to 64, remainder 0 to
   * delta - 1 (default 1 and 0). Needs idmint's `delta` and `remainder` columns (SQL): a table
   * without them refuses a delta above 1 with INVALID_ARGUMENT until `idmint db init` adds them.
   */
  readonly delta?: number;
  readonly remainder?: number;

  /**
   * Create a periodic tag (docs/segments.md, Periodic sequences) with this option, checked by
   * core's PeriodicSequence.from; its step must fit one period's `{seq:N}`. Takes neither
   * `opaque` nor `startId`. Needs the `periodic` column (SQL): `idmint db init` adds it.
   */
  readonly periodic?: PeriodicOptions;

  /**
   * Create a cluster-ordered tag. Needs the `ordering` column (SQL): `idmint db init` adds it; a
   * store without {@link SegmentStore.issuers} refuses with INVALID_ARGUMENT naming the reason.
   */
  readonly ordering?: TagOrdering;
}

/** Changes to a tag; absent fields stay as they are. */
export interface TagUpdate {
  readonly step?: number;
  /** New description; null clears it. */
  readonly description?: string | null;
  /**
   * Marks the tag opaque. Only `true`: an opaque tag never turns back, since its opaque IDs are
   * numbers its dense IDs could one day reach. OPAQUE_UNAVAILABLE on a table without the column.
   */
  readonly opaque?: true;
  /**
   * A new sequence (both are set together: an absent remainder is 0). Safe on a store of its own:
   * every later ID is above max_id, every earlier one below it. A set refuses a change where the
   * new class could reach IDs another database issued (see MultiSegmentStore).
   */
  readonly delta?: number;
  readonly remainder?: number;
}

/** What {@link SegmentStore.listTagChanges} found. */
export interface TagChanges {
  /**
   * Tags created or changed at or after the cursor given (by `update_time` or the store's own
   * record of writes), in no particular order; a few changed a little earlier may come again
   * (the overlap that covers writes still in flight). None when no cursor was given.
   */
  readonly records: TagRecord[];
  /** Where the next read starts: pass it back. Opaque; a time on the store's own clock. */
  readonly cursor: string;
}

/**
 * What a full read of the tag list needs of each tag: its name, its step, its opaque mark and its
 * ordering. A page carries no more, so a store reads no more: at a million tags, parsing every
 * row's max_id, description and update_time too made the read over twice as slow on PostgreSQL
 * and doubled the garbage it left. A store may return whole {@link TagRecord}s (they are listings
 * too).
 */
export type TagListing = Pick<TagRecord, 'tag' | 'step' | 'opaque' | 'ordering'>;

/** One page of {@link SegmentStore.listTagPage}. */
export interface TagPage {
  readonly records: TagListing[];
  /** Pass back for the next page; undefined after the last one. Opaque. */
  readonly next: string | undefined;
}

export interface SegmentStore {
  /** Backend name for logs and metrics: `sqlite`, `postgres`, `mysql`, `redis`, `multi`. */
  readonly backend: string;

  /**
   * Present when this store is one database of a set (see src/stores/multi/): it allocates only
   * from rows of this residue class, in ranges of stride `increment`. Absent on a store of its
   * own, which refuses a row of a set (TAG_MISCONFIGURED) rather than issue every ID from it.
   */
  readonly residue?: SegmentResidue;

  /**
   * Creates the table (SQL) if missing, and adds idmint's columns (`opaque`, `periodic`, `delta`
   * and `remainder`, `ordering`, and a set's `id_offset`/`id_increment`) to a table that lacks
   * them (a Leaf table); creates idmint's history table (`idmint_history`) and issuer lease table
   * (`idmint_issuer`) and verifies the history, fencing it if it is new (see {@link allocate});
   * nothing else. Idempotent. Called by `idmint db init` and, where
   * configured, at start-up. Redis needs no schema: there it only verifies the history.
   */
  init(): Promise<void>;

  /**
   * Atomically advances the tag's `max_id` by `step` (the tag's stored step when omitted) and
   * returns `[max_id - step, max_id)` after the update. A store with a {@link residue} first
   * raises `max_id` to its class and then advances it by `step * increment`, returning a range of
   * stride `increment`. Correct with any number of processes
   * allocating the same tag at once: one atomic statement, or one transaction holding the row.
   *
   * Only on a verified history: the same statement (transaction, script) checks that the history
   * recorded for the table is the database's live one. When it is not (a promoted replica, a
   * restart of Redis, no record yet), the store first fences the new history, once for every node
   * that sees it (see {@link fence}; a compare-and-set on the record, with the store's margin),
   * then allocates. No range is ever allocated from an unfenced history.
   *
   * Throws IdMintError: TAG_NOT_FOUND (no such tag), ID_SPACE_EXHAUSTED (max_id would pass
   * 2^63-1; nothing is changed), TAG_MISCONFIGURED (the row's step is not 1 to 2^31-1 or its
   * max_id is negative, written outside idmint; or the row's residue class is not this store's:
   * a row of a set read by a store of its own, or of another database or set size; nothing is
   * issued from it), INVALID_ARGUMENT (a bad
   * step), STORE_UNAVAILABLE (the backend failed or timed out; retryable). After a timeout the
   * outcome is unknown: the caller must treat the range as lost (skipped), never guess it.
   */
  allocate(tag: string, step?: number): Promise<SegmentRange>;

  /**
   * The history of the store's database now and as recorded for its table, one entry per
   * database (one for a store of its own). Throws STORE_UNAVAILABLE.
   */
  history(): Promise<StoreHistory[]>;

  /**
   * An operator's fence (`idmint db fence`), for what the store cannot reveal (a restore that
   * keeps the history, a hand edit): raises every tag's (or one tag's) `max_id` by the margin and
   * records the live history, in one transaction (one Lua script), with a compare-and-set on the
   * record. Never lowers anything. Throws TAG_NOT_FOUND (the tag given does not exist),
   * INVALID_ARGUMENT, STORE_UNAVAILABLE.
   */
  fence(request?: FenceRequest): Promise<FenceReport[]>;

  /**
   * Raises the tag's `max_id` to `atLeast` if it is below (never lowers it): a node that finds the
   * store handing out a range below IDs it already holds moves the row past them. `atLeast` is
   * in the store's residue class (the end of a range of it). Resolves true when raised. Throws
   * INVALID_ARGUMENT, STORE_UNAVAILABLE.
   */
  raise(tag: string, atLeast: bigint): Promise<boolean>;

  /**
   * Gives back the unissued tail `[from, to)` of the most recent range (of any stride: `from`
   * and `to` are in the range's residue class): sets `max_id` to `from`
   * only if it is still `to` (compare-and-set), that is, if nobody allocated after the caller,
   * and only on a verified history (false otherwise: a tail is never given back to a new one).
   * Resolves true when given back. The caller must issue no ID of `[from, to)` afterwards. Used by
   * a graceful shutdown so a restart wastes nothing. Throws STORE_UNAVAILABLE, INVALID_ARGUMENT.
   */
  release(tag: string, from: bigint, to: bigint): Promise<boolean>;

  /** Every tag, sorted by name (JavaScript string order). Throws STORE_UNAVAILABLE. */
  listTags(): Promise<TagRecord[]>;

  /**
   * The tag refresh's incremental read: the tags written since `since`, a cursor an earlier call
   * returned, found through an index, so its cost is the rows changed, not the rows that exist.
   * With `since` undefined: no records, only a cursor (the store's time now), taken before a full
   * read so that the next incremental read misses nothing written during it. A deleted tag is
   * never reported (a full read finds it gone). Times are the store's own clock, never this
   * process's. Throws STORE_UNAVAILABLE, INVALID_ARGUMENT (a cursor this store did not make).
   */
  listTagChanges(since: string | undefined): Promise<TagChanges>;

  /**
   * The tag refresh's full read, a page at a time: up to `limit` (1 to 100,000) tags after the
   * cursor `after` (undefined: from the start). Every tag that exists from the first page to the
   * last is in some page; one may come twice (Redis). Throws STORE_UNAVAILABLE, INVALID_ARGUMENT.
   */
  listTagPage(after: string | undefined, limit: number): Promise<TagPage>;

  /** One tag, or undefined. Throws STORE_UNAVAILABLE. */
  getTag(tag: string): Promise<TagRecord | undefined>;

  /**
   * Creates a tag. Throws TAG_EXISTS, INVALID_ARGUMENT (a bad value, or one the table cannot
   * store, e.g. a character outside a Leaf table's character set), STORE_UNAVAILABLE.
   */
  createTag(tag: NewTag): Promise<TagRecord>;

  /**
   * Changes a tag's step and/or description. Throws TAG_NOT_FOUND, INVALID_ARGUMENT,
   * STORE_UNAVAILABLE.
   */
  updateTag(tag: string, update: TagUpdate): Promise<TagRecord>;

  /**
   * Deletes a tag's row (every database's, for a set); resolves false when there was none. For
   * rows nothing draws from any more: a periodic tag's old periods (`idmint tags clean`), whose
   * numbers a node would issue again from the start if it re-created the row. Optional: a store
   * without it cannot clean. Throws STORE_UNAVAILABLE, INVALID_ARGUMENT.
   */
  deleteTag?(tag: string): Promise<boolean>;

  /**
   * The issuer leases of cluster-ordered tags (src/ports/issuer-lease.ts), kept in this store's
   * database. Absent on a store that cannot keep them: it refuses `ordering: cluster` tags.
   */
  readonly issuers?: IssuerLeases;

  /** Releases connections the store opened itself (a pool passed in by the caller stays open). */
  close(): Promise<void>;
}

/** The reset period of a periodic tag (docs/segments.md, Periodic sequences). */
export type PeriodUnit = 'day' | 'month';

/**
 * A periodic tag's option, as given and as stored (canonical JSON in the row's `period` column).
 */
export interface PeriodicOptions {
  readonly period: PeriodUnit;
  /** An IANA time zone (`Asia/Shanghai`, `UTC`): where the day or month is read. */
  readonly timeZone: string;
  /** The formatted ID: literals and `{yyyy}` `{yy}` `{MM}` `{dd}` `{seq:N}` (see parseTemplate). */
  readonly template: string;
  /** The first sequence number of each period. Default 1. */
  readonly start?: number;
}
