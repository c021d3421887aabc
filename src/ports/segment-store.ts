/**
 * Where segment mode keeps its ranges: one row (or hash) per business tag, Leaf's `leaf_alloc`
 * table. Implemented once per backend under src/stores/<backend>/; every implementation passes the
 * same conformance suite (test/support/segment-store-suite.ts).
 *
 * All IDs are bigint end to end: a tag's max_id may be anywhere up to 2^63-1.
 */

/** A tag as stored. */
export interface TagRecord {
  /** The business tag (Leaf's `biz_tag`), `^[A-Za-z0-9_.:-]{1,128}$`. */
  readonly tag: string;
  /** The next range starts here: Leaf's `max_id` (the first ID not yet handed out by the store). */
  readonly maxId: bigint;
  /** IDs per range, as configured (Leaf's `step`); the service may allocate larger ranges. */
  readonly step: number;
  /** Free text for operators, up to 256 characters. */
  readonly description: string | null;
  /** Last change, as the store reports it; informational only, null where the row has none. */
  readonly updatedAt: Date | null;
}

/** A range handed out by {@link SegmentStore.allocate}: IDs `start` (inclusive) to `end` (exclusive). */
export interface SegmentRange {
  readonly tag: string;
  /** First ID of the range: `max_id - step` after the update, exactly as Leaf computes it. */
  readonly start: bigint;
  /** One past the last ID: the new `max_id`. */
  readonly end: bigint;
  /** The step this range was allocated with (`end - start`). */
  readonly step: number;
  /**
   * The tag's configured step as stored when the range was allocated, read in the same atomic
   * step. The service never shrinks its dynamic step below it (Leaf's `minStep`), so a step an
   * operator raises is the floor of the loads that follow.
   */
  readonly tagStep: number;
}

/** What {@link SegmentStore.createTag} needs. */
export interface NewTag {
  readonly tag: string;
  /** IDs per range, 1 to 2^31-1 (the column is Leaf's `int`). */
  readonly step: number;
  /** First ID the tag will issue, 0 to 2^63-1. Default 1, as Leaf's table default. Stored as `max_id`. */
  readonly startId?: bigint;
  readonly description?: string | null;
}

/** Changes to a tag; absent fields stay as they are. */
export interface TagUpdate {
  readonly step?: number;
  /** New description; null clears it. */
  readonly description?: string | null;
}

export interface SegmentStore {
  /** Backend name for logs and metrics: `sqlite`, `postgres`, `mysql`, `redis`. */
  readonly backend: string;

  /**
   * Creates the table (SQL) if missing, and nothing else. Idempotent. Called by `idmint db init`
   * and, where configured, at start-up. Redis needs no schema: a no-op there.
   */
  init(): Promise<void>;

  /**
   * Atomically advances the tag's `max_id` by `step` (the tag's stored step when omitted) and
   * returns `[max_id - step, max_id)` after the update. Correct with any number of processes
   * allocating the same tag at once: one atomic statement, or one transaction holding the row.
   *
   * Throws IdMintError: TAG_NOT_FOUND (no such tag), ID_SPACE_EXHAUSTED (max_id would pass
   * 2^63-1; nothing is changed), INVALID_ARGUMENT (a bad step), STORE_UNAVAILABLE (the backend
   * failed or timed out; retryable). After a timeout the outcome is unknown: the caller must treat
   * the range as lost (skipped), never guess it.
   */
  allocate(tag: string, step?: number): Promise<SegmentRange>;

  /**
   * Gives back the unissued tail `[from, to)` of the most recent range: sets `max_id` to `from`
   * only if it is still `to` (compare-and-set), that is, if nobody allocated after the caller.
   * Resolves true when given back. The caller must issue no ID of `[from, to)` afterwards. Used by
   * a graceful shutdown so a restart wastes nothing. Throws STORE_UNAVAILABLE, INVALID_ARGUMENT.
   */
  release(tag: string, from: bigint, to: bigint): Promise<boolean>;

  /** Every tag, sorted by name (JavaScript string order). Throws STORE_UNAVAILABLE. */
  listTags(): Promise<TagRecord[]>;

  /** One tag, or undefined. Throws STORE_UNAVAILABLE. */
  getTag(tag: string): Promise<TagRecord | undefined>;

  /** Creates a tag. Throws TAG_EXISTS, INVALID_ARGUMENT, STORE_UNAVAILABLE. */
  createTag(tag: NewTag): Promise<TagRecord>;

  /** Changes a tag's step and/or description. Throws TAG_NOT_FOUND, INVALID_ARGUMENT, STORE_UNAVAILABLE. */
  updateTag(tag: string, update: TagUpdate): Promise<TagRecord>;

  /** Releases connections the store opened itself (a pool passed in by the caller stays open). */
  close(): Promise<void>;
}
