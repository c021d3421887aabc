// What every SegmentStore adapter shares: options, the bounded call that turns driver failures
// into STORE_UNAVAILABLE, and parsing of stored values into exact bigints.
import { IdMintError, isIdMintError } from '../core/errors.ts';
import { OPAQUE_SEGMENT_DOMAIN } from '../core/opaque.ts';
import {
  MAX_SEGMENT_DATABASES,
  MAX_SEGMENT_ID,
  MAX_TAG_STEP,
  checkDescription,
  checkSequence,
  type TagSequence,
  checkSegmentId,
  checkStartId,
  checkStep,
  checkTag,
} from '../core/segment-limits.ts';
import { PeriodicSequence, checkPeriodicTagName, type PeriodicOptions } from '../core/periodic.ts';
import { MAX_TIMER_MS } from '../core/time.ts';
import { BackendCauses, failureLine, inWords, saysNoAnswer } from '../shared/failure-cause.ts';
import { FirstAnswer } from '../shared/first-answer.ts';
import { withDeadline } from '../shared/timeout.ts';
import type {
  FenceMargin,
  NewTag,
  SegmentRange,
  SegmentResidue,
  StoreHistoryEvent,
  TagOrdering,
  TagRecord,
} from '../ports/segment-store.ts';
import { DEFAULT_STEP_POLICY } from '../core/step-policy.ts';
import { checkTableName } from '../sql/sql-driver.ts';
import type { IssuerInterleave } from './issuer-support.ts';
import { checkNewOrdering, toOrdering } from './tag-ordering.ts';

/** Options every store adapter takes. */
export interface SegmentStoreOptions {
  /**
   * Table (SQL) or key prefix (Redis). Default `leaf_alloc`, Leaf's own table. Letters, digits and
   * `_`.
   */
  readonly table?: string;
  /** Every store call is abandoned after this many ms with STORE_UNAVAILABLE. Default 3000. */
  readonly timeoutMs?: number;
  /**
   * This store is database `offset` of a set of `increment` databases (src/stores/multi/): it
   * allocates only from rows of that residue class, in ranges of stride `increment`, and its
   * table carries the `id_offset` and `id_increment` columns (added by `init()`). Absent: a store
   * of its own, on Leaf's table as it is.
   */
  readonly residue?: SegmentResidue;
  /**
   * How far the store raises every tag when it finds its database on a new history (a promoted
   * replica, a restore, no record yet). Default {@link DEFAULT_FENCE_MARGIN}: 64 of the largest
   * ranges a node may allocate. See docs/segments.md, Failover and restore.
   */
  readonly fence?: FenceMargin;
  /** Told when the store fences a new history or finds one (logs, metrics). Must not throw. */
  readonly onHistory?: (event: StoreHistoryEvent) => void;
  /**
   * Where the store is, without credentials (`db:5432`, a file), for failure messages. Set by
   * the catalog from the URL (src/backends/); absent, messages name the backend alone.
   */
  readonly where?: string;
  /** Tests only: pauses the store's issuer leases between two steps (issuer-support.ts). */
  readonly issuerInterleave?: IssuerInterleave;
}

/**
 * Fence margins in ranges: the default covers what a replica that lags can have lost, when every
 * range allocated while it lagged is at most `max(maxStep, step)`. Sizing in docs/segments.md.
 */
export const DEFAULT_FENCE_RANGES = 64;
/** At most a million ranges: with steps up to 2^31-1 a margin stays below 2^53, exact in Lua. */
export const FENCE_RANGES_BOUNDS = { min: 1, max: 1_000_000 } as const;
export const DEFAULT_FENCE_MARGIN: FenceMargin = {
  ranges: DEFAULT_FENCE_RANGES,
  maxStep: DEFAULT_STEP_POLICY.maxStep,
};

/** idmint's own table of recorded histories, one row per segment table (docs/segments.md). */
export const HISTORY_TABLE = 'idmint_history';

/**
 * The bound on one fence: it raises every row of the table in one transaction (a million rows take
 * seconds), so it gets longer than an allocation. A fence cut short rolls back whole.
 */
export function fenceTimeoutMs(timeoutMs: number): number {
  return Math.min(STORE_TIMEOUT_BOUNDS.max, Math.max(30_000, 10 * timeoutMs));
}

/**
 * `margin` if it is a valid {@link FenceMargin}; INVALID_ARGUMENT naming what is allowed otherwise.
 */
export function checkFenceMargin(margin: FenceMargin): FenceMargin {
  if (margin !== null && typeof margin === 'object' && 'ids' in margin) {
    if (typeof margin.ids !== 'bigint' || margin.ids < 1n || margin.ids > MAX_SEGMENT_ID) {
      const got = String(margin.ids);
      const allowed = `a bigint from 1 to ${MAX_SEGMENT_ID}`;
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `a fence margin in IDs must be ${allowed}, got ${got}`,
      );
    }
    return { ids: margin.ids };
  }
  const { ranges, maxStep } = (margin ?? {}) as { ranges?: unknown; maxStep?: unknown };
  const { min, max } = FENCE_RANGES_BOUNDS;
  if (!Number.isSafeInteger(ranges) || (ranges as number) < min || (ranges as number) > max) {
    const got = String(ranges);
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `fence ranges must be an integer from ${min} to ${max}, got ${got}`,
    );
  }
  if (
    !Number.isSafeInteger(maxStep) ||
    (maxStep as number) < 1 ||
    (maxStep as number) > MAX_TAG_STEP
  ) {
    const got = String(maxStep);
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `fence maxStep must be an integer from 1 to ${MAX_TAG_STEP}, got ${got}`,
    );
  }
  return { ranges: ranges as number, maxStep: maxStep as number };
}

/** A margin in words, for logs and the CLI. */
export function describeMargin(margin: FenceMargin): string {
  return 'ids' in margin
    ? `${margin.ids} IDs`
    : `${margin.ranges} ranges of max(${margin.maxStep}, the tag's step)`;
}

/**
 * Why an allocation is tried again: the history is not the recorded one, or the row changed between
 * statements.
 */
export interface AllocateRetry {
  readonly retry: 'history' | 'raced';
  readonly live?: string;
  readonly recorded?: string | undefined;
}

/**
 * The fence count a fence records (`fences` in idmint_history): one more than the record's. The
 * first record of a table that had no row to raise (a table `idmint db init` just created) counts
 * none: no ID was ever issued from it, so no issuer lease can have been lost with the record, and
 * claims do not wait for it. A first record of a table that had rows (a restore into a database
 * without idmint's own tables, a Leaf table) counts one: a node may still hold a lease the database
 * lost, so claims wait a TTL after it as after any fence (see SqlIssuerLeases, `settling`). The
 * Redis store's FENCE script applies the same rule.
 */
export function recordedFences(first: boolean, fences: number, raised: number): number {
  return first && raised === 0 ? 0 : fences + 1;
}

/** What one fence transaction (or script) did. */
export interface FenceOutcome {
  /** True when this call raised the rows and recorded the history. */
  readonly fenced: boolean;
  /** True when another fence claimed the record between this one's read and its claim. */
  readonly raced: boolean;
  readonly tags: number;
  /** The live history, recorded now if fenced. */
  readonly history: string;
  /** The history recorded before (undefined: none). */
  readonly from: string | undefined;
  readonly fences: number;
}

/**
 * An allocation that found the history changing under every try (a fence that cannot complete, a
 * database that moves between servers): retryable, as the store may settle.
 */
export function historyUnsettled(backend: string, tag: string, last: AllocateRetry): IdMintError {
  const live = `the database's history (${last.live ?? 'unknown'})`;
  const why =
    last.retry === 'history'
      ? `${live} is not the one recorded for the table (${last.recorded ?? 'none'}), and ` +
        `fencing it did not settle that`
      : 'the row changed between its statements every time';
  return new IdMintError(
    'STORE_UNAVAILABLE',
    `${backend} store: tag "${tag}": no range allocated: ${why}`,
    {
      details: { backend, tag },
    },
  );
}

/**
 * A store's watch over its database's history, shared by the SQL and Redis stores: one
 * verification (and fence, when the history is new) in flight at a time, whatever number of
 * allocations find the history unverified; and a report of each new history, fenced here or found.
 */
export class HistoryWatch {
  readonly #table: string;
  readonly #margin: FenceMargin;
  readonly #onHistory: ((event: StoreHistoryEvent) => void) | undefined;
  /** Runs the store's automatic fence: nothing when the recorded history is the live one. */
  readonly #fenceIfNew: () => Promise<FenceOutcome>;
  /** The history the latest allocation ran on: an allocation on another one is reported. */
  #last: string | undefined;
  #verifying: Promise<void> | undefined;

  constructor(options: {
    table: string;
    margin: FenceMargin;
    onHistory: ((event: StoreHistoryEvent) => void) | undefined;
    fenceIfNew: () => Promise<FenceOutcome>;
  }) {
    this.#table = options.table;
    this.#margin = options.margin;
    this.#onHistory = options.onHistory;
    this.#fenceIfNew = options.fenceIfNew;
  }

  /** Makes sure the recorded history is the live one, fencing it first when it is not. */
  verify(): Promise<void> {
    this.#verifying ??= this.#verify().finally(() => {
      this.#verifying = undefined;
    });
    return this.#verifying;
  }

  async #verify(): Promise<void> {
    const outcome = await this.#fenceIfNew();
    if (!outcome.fenced) return;
    // This store saw the change itself: its next allocation, on the new history, is no news.
    this.#last = outcome.history;
    // The first record of a table without tags (a new one) moved nothing: not a fence to report.
    if (outcome.from === undefined && outcome.tags === 0) return;
    const margin = describeMargin(this.#margin);
    const { from, history: to, tags } = outcome;
    this.#onHistory?.({
      type: 'history',
      action: 'fenced',
      table: this.#table,
      from,
      to,
      tags,
      margin,
    });
  }

  /** Notes the history an allocation ran on, and reports it when it is not the one before. */
  allocatedOn(history: string): void {
    const before = this.#last;
    this.#last = history;
    if (before === undefined || before === history) return;
    this.#onHistory?.({
      type: 'history',
      action: 'changed',
      table: this.#table,
      from: before,
      to: history,
    });
  }
}

/** Validates {@link SegmentStore.raise}'s target: an ID, in the store's residue class. */
export function checkRaise(atLeast: bigint, residue: SegmentResidue | undefined): void {
  checkSegmentId(atLeast, 'atLeast');
  if (residue !== undefined && !inResidue(atLeast, residue)) {
    const target = `the target must be ≡ ${residue.offset} (mod ${residue.increment})`;
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `raise to ${atLeast} on ${residueText(residue)}: ${target}`,
    );
  }
}

/** `count` if it is a fence count a request may name; INVALID_ARGUMENT otherwise. */
export function checkFenceCount(count: number | undefined): number | undefined {
  if (count !== undefined && (!Number.isSafeInteger(count) || count < 0)) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `ifFences must be an integer of 0 or more, got ${String(count)}`,
    );
  }
  return count;
}

export const DEFAULT_SEGMENT_TABLE = 'leaf_alloc';
export const DEFAULT_STORE_TIMEOUT_MS = 3000;
/**
 * A store call's timeout ends up in a timer, so it stays below 2^31 ms (Node clamps longer ones to
 * 1 ms).
 */
export const STORE_TIMEOUT_BOUNDS = { min: 1, max: MAX_TIMER_MS } as const;

/** The table name, timeout and residue class, validated. */
export function resolveStoreOptions(options: SegmentStoreOptions = {}): {
  table: string;
  timeoutMs: number;
  residue: SegmentResidue | undefined;
  fence: FenceMargin;
} {
  // Also the Redis key prefix: the same plain-identifier rule keeps keys and tables alike.
  const table = checkTableName(options.table ?? DEFAULT_SEGMENT_TABLE);
  const timeoutMs = options.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  if (
    !Number.isSafeInteger(timeoutMs) ||
    timeoutMs < STORE_TIMEOUT_BOUNDS.min ||
    timeoutMs > STORE_TIMEOUT_BOUNDS.max
  ) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `timeoutMs must be a positive integer number of ms, at most ` +
        `${STORE_TIMEOUT_BOUNDS.max}, got ${String(timeoutMs)}`,
    );
  }
  const fence = checkFenceMargin(options.fence ?? DEFAULT_FENCE_MARGIN);
  const residue = options.residue === undefined ? undefined : checkResidue(options.residue);
  return { table, timeoutMs, residue, fence };
}

/** `residue` if it names one database of a set: increment 1 to 64, offset 0 to increment - 1. */
export function checkResidue(residue: SegmentResidue): SegmentResidue {
  const { offset, increment } = residue ?? {};
  if (
    !Number.isSafeInteger(increment) ||
    increment < 1 ||
    increment > MAX_SEGMENT_DATABASES ||
    !Number.isSafeInteger(offset) ||
    offset < 0 ||
    offset >= increment
  ) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `residue must be { offset, increment } with increment an integer from 1 to ` +
        `${MAX_SEGMENT_DATABASES} and offset from 0 to increment - 1, got ` +
        `${JSON.stringify(residue)}`,
    );
  }
  return { offset, increment };
}

/**
 * The smallest ID at or above `id` in the residue class: where database `offset` of `increment` may
 * start.
 */
export function alignUp(id: bigint, residue: SegmentResidue): bigint {
  const n = BigInt(residue.increment);
  return id + ((BigInt(residue.offset) - (id % n) + n) % n);
}

/**
 * What one allocation of `step` IDs may add to max_id in a set: the range, and a realignment of at
 * most increment - 1 first.
 */
export function residueRoom(step: number, residue: SegmentResidue): bigint {
  return BigInt(step) * BigInt(residue.increment) + BigInt(residue.increment - 1);
}

/**
 * The range of `step` IDs of the class below `end` (the new max_id); a set of one gives consecutive
 * IDs, with no stride.
 */
export function residueRange(
  tag: string,
  end: bigint,
  step: number,
  tagStep: number,
  residue: SegmentResidue,
): SegmentRange {
  const n = residue.increment;
  return {
    tag,
    start: end - BigInt(step) * BigInt(n),
    end,
    step,
    ...(n === 1 ? {} : { stride: n }),
    tagStep,
  };
}

/** True when `id` is in the residue class. */
export function inResidue(id: bigint, residue: SegmentResidue): boolean {
  return id % BigInt(residue.increment) === BigInt(residue.offset);
}

/**
 * A row's residue class from its stored `id_offset` and `id_increment` (a SQL row with the
 * columns, a Redis hash with the fields), or undefined when it has neither: a plain Leaf row.
 */
export function storedResidue(offset: unknown, increment: unknown): SegmentResidue | undefined {
  if ((offset === undefined || offset === null) && (increment === undefined || increment === null))
    return undefined;
  return {
    offset: offset === undefined || offset === null ? 0 : Number(toBigInt(offset, 'id_offset')),
    increment:
      increment === undefined || increment === null
        ? 1
        : Number(toBigInt(increment, 'id_increment')),
  };
}

/** True for a row of no set: no residue columns, or `{ offset: 0, increment: 1 }`. */
export function isPlainResidue(residue: SegmentResidue | undefined): boolean {
  return residue === undefined || (residue.increment === 1 && residue.offset === 0);
}

/** True when a row's residue (absent: plain) is exactly `expected`. */
export function sameResidue(found: SegmentResidue | undefined, expected: SegmentResidue): boolean {
  const f = found ?? { offset: 0, increment: 1 };
  return f.offset === expected.offset && f.increment === expected.increment;
}

/** A residue as text for messages: "database 1 of 3", "fenced", "a plain row". */
export function residueText(residue: SegmentResidue | undefined): string {
  if (isPlainResidue(residue)) return 'a plain row (no set)';
  if (residue?.increment === 0)
    return 'fenced (id_increment 0) while idmint db init re-forms a set';
  return `database ${residue?.offset} of a set of ${residue?.increment}`;
}

/**
 * The error for a row whose residue class is not the store's: a row of a set read by a store of
 * its own (`expected` undefined), or a row of another database or set size. Nothing is allocated
 * from it: issuing from it would repeat IDs another database issues.
 */
export function residueMismatch(
  tag: string,
  found: SegmentResidue | undefined,
  expected: SegmentResidue | undefined,
): IdMintError {
  const fix =
    expected === undefined
      ? 'a database of a set is used only through the whole set (segment.stores, in order), ' +
        'never alone'
      : `this store is ${residueText(expected)}: list the set's URLs in the same order ` +
        `everywhere, and run "idmint db init" with them after changing the set ` +
        `(docs/segments.md, Several databases)`;
  return new IdMintError(
    'TAG_MISCONFIGURED',
    `tag "${tag}": its row is ${residueText(found)} (id_offset ${found?.offset ?? 0}, ` +
      `id_increment ${found?.increment ?? 1}); ${fix}; nothing was allocated from it`,
    {
      details: {
        tag,
        column: 'id_increment',
        value: String(found?.increment ?? 1),
        offset: found?.offset ?? 0,
      },
    },
  );
}

/**
 * Which store a failure is of, for its one line: the backend, where it is (no credentials), and
 * the causes it has seen (a driver that gives up in its own words failed for the last one).
 */
export class StorePlace {
  readonly backend: string;
  readonly where: string | undefined;
  readonly causes = new BackendCauses();
  /** Until the database first answers, one wait for all calls (a start fails within one). */
  readonly firstAnswer = new FirstAnswer();

  constructor(backend: string, where: string | undefined) {
    this.backend = backend;
    this.where = where;
  }

  /**
   * `postgres segment store at db:5432, allocating a range: connection refused`: the failure of
   * `operation` (a store method's name, said in words) as one line.
   */
  line(operation: string, cause: string): string {
    return failureLine(this.backend, 'segment store', this.where, operationWords(operation), cause);
  }
}

/** Store operations in words a reader of the log knows; any other is its name in words. */
const OPERATIONS: Readonly<Record<string, string>> = {
  init: 'creating the table',
  allocate: 'allocating a range',
  cover: 'allocating a range',
  fence: 'fencing a new history',
  history: "reading the database's history",
  raise: 'raising max_id',
  release: 'giving unissued IDs back',
  reassign: "moving a tag's row to another database",
  readSetEntries: "reading the set's records",
  writeSetEntry: "writing the set's record",
  listTags: 'reading the tag list',
  listTagChanges: 'reading the tags changed lately',
  listTagPage: 'reading a page of tags',
  getTag: 'reading a tag',
  createTag: 'creating a tag',
  updateTag: 'updating a tag',
  deleteTag: 'deleting a tag',
  claimIssuer: "claiming a tag's issuer lease",
  renewIssuer: "renewing a tag's issuer lease",
  releaseIssuer: "giving a tag's issuer lease back",
  currentIssuer: "reading a tag's issuer lease",
};

/** `operation` (a method's name) in words. */
export function operationWords(operation: string): string {
  return OPERATIONS[operation] ?? inWords(operation);
}

/**
 * Runs one store operation bounded by `timeoutMs`. IdMintErrors pass through; anything else (a
 * driver error, a refused connection) becomes STORE_UNAVAILABLE with the original as `cause`,
 * told as one line naming the store, where it is, the operation and the cause (see
 * {@link StorePlace}). On timeout `signal` aborts, so the adapter can destroy the connection:
 * the database then rolls back whatever it has not committed, and the caller treats the outcome
 * as unknown. `place` may be the backend's name alone (a store built without an address). Until
 * the database first answers, a call that finds no answer stands for the calls just after it
 * ({@link FirstAnswer}): a start fails within one timeout, not one per step.
 */
export async function storeCall<T>(
  place: StorePlace | string,
  operation: string,
  timeoutMs: number,
  run: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const at = typeof place === 'string' ? new StorePlace(place, undefined) : place;
  const { backend } = at;
  const timedOut = () =>
    new IdMintError('STORE_UNAVAILABLE', at.line(operation, at.causes.timedOut(timeoutMs)), {
      details: { backend, operation, timeoutMs },
    });
  const bounded = async () => {
    try {
      const result = await withDeadline(timeoutMs, timedOut, run);
      at.causes.succeeded();
      return result;
    } catch (error) {
      if (isIdMintError(error)) throw error;
      throw new IdMintError('STORE_UNAVAILABLE', at.line(operation, at.causes.of(error)), {
        cause: error,
        details: { backend, operation },
      });
    }
  };
  return at.firstAnswer.run(
    bounded,
    (error) => isIdMintError(error, 'STORE_UNAVAILABLE') && saysNoAnswer(error.message),
  );
}

/**
 * A stored integer (bigint, decimal string, or number where the driver had no choice) as an exact
 * bigint.
 */
export function toBigInt(value: unknown, column: string): bigint {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'string' && /^-?[0-9]+$/.test(value)) return BigInt(value);
  // A number above 2^53 has already lost digits; refusing it is the only safe answer.
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  throw new IdMintError(
    'STORE_UNAVAILABLE',
    `stored ${column} is not an exact integer: ${String(value)} (${typeof value}); is the ` +
      `driver parsing bigint columns as numbers?`,
  );
}

/** A stored `step` (int column) as a number. */
export function toStep(value: unknown): number {
  return Number(toBigInt(value, 'step'));
}

/**
 * A stored timestamp as a Date. Strings without a zone are UTC: idmint writes UTC, SQLite's
 * CURRENT_TIMESTAMP is UTC. Redis keeps ms since the epoch.
 */
export function toDate(value: unknown): Date | null {
  if (value === null || value === undefined || value === '') return null;
  if (value instanceof Date) return value;
  if (typeof value === 'string') {
    const date = /^[0-9]+$/.test(value)
      ? new Date(Number(value))
      : new Date(
          /(?:[zZ]|[+-][0-9]{2}(?::?[0-9]{2})?)$/.test(value)
            ? value
            : `${value.replace(' ', 'T')}Z`,
        );
    return Number.isNaN(date.getTime()) ? null : date;
  }
  return null;
}

/**
 * A row of Leaf's table, as the adapter read it, as a TagRecord (with its residue class where the
 * row has one; `opaque` is absent on a Leaf table).
 */
export function tagRecord(row: {
  biz_tag: unknown;
  max_id: unknown;
  step: unknown;
  description: unknown;
  update_time: unknown;
  id_offset?: unknown;
  id_increment?: unknown;
  opaque?: unknown;
  delta?: unknown;
  remainder?: unknown;
  periodic?: unknown;
  ordering?: unknown;
}): TagRecord {
  const residue = storedResidue(row.id_offset, row.id_increment);
  // As stored, even when not a valid sequence (allocation refuses such a row with its reason).
  const stored = (value: unknown, plain: number) =>
    value === undefined || value === null ? plain : Number(value);
  return {
    tag: String(row.biz_tag),
    maxId: toBigInt(row.max_id, 'max_id'),
    step: toStep(row.step),
    description:
      row.description === null || row.description === undefined ? null : String(row.description),
    updatedAt: toDate(row.update_time),
    ...(residue === undefined ? {} : { residue }),
    opaque: toOpaqueFlag(row.opaque),
    delta: stored(row.delta, 1),
    remainder: stored(row.remainder, 0),
    ...(row.periodic === null || row.periodic === undefined || row.periodic === ''
      ? {}
      : { periodic: String(row.periodic) }),
    ...toOrdering(row.ordering),
  };
}

/**
 * A stored opaque mark as a boolean: absent, null, 0 or '0' is a plain tag; anything else opaque.
 * A value written outside idmint (2, 'yes') errs on the side that leaks nothing.
 */
export function toOpaqueFlag(value: unknown): boolean {
  return !(
    value === undefined ||
    value === null ||
    value === '' ||
    value === false ||
    value === 0 ||
    value === 0n ||
    value === '0'
  );
}

/**
 * Validates {@link TagUpdate.opaque}: absent, or true; false is refused (an opaque tag never turns
 * back).
 */
export function checkOpaqueUpdate(opaque: unknown): boolean {
  if (opaque === undefined) return false;
  if (opaque !== true) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `opaque can only be set to true, got ${String(opaque)}: an opaque tag stays opaque ` +
        `(its opaque IDs are numbers its dense IDs could one day reach), and a plain tag ` +
        `stays plain unless marked`,
    );
  }
  return true;
}

/** Sorts tag records by name in JavaScript string order, whatever the database's collation. */
export function byTag(a: TagRecord, b: TagRecord): number {
  return a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0;
}

/**
 * Validates a new tag; shared by every store. The start must leave room for one range, and for
 * an opaque tag lie inside the opaque domain (its first ID must have an opaque form). A store of
 * a set starts the tag at the first ID of its class at or above `startId`, with room for one
 * range of `step` IDs `increment` apart.
 */
export function checkNewTag(
  tag: NewTag,
  residue?: SegmentResidue,
): {
  tag: string;
  step: number;
  startId: bigint;
  description: string | null;
  opaque: boolean;
  delta: number;
  remainder: number;
  periodic: string | null;
  ordering: TagOrdering | null;
} {
  if (tag === null || typeof tag !== 'object')
    throw new IdMintError('INVALID_ARGUMENT', 'a new tag needs { tag, step }');
  const step = checkStep(tag.step);
  const ordering = checkNewOrdering(tag);
  if (tag.periodic !== undefined) return checkNewPeriodicTag(tag, step);
  if (tag.opaque !== undefined && typeof tag.opaque !== 'boolean')
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `opaque must be true or false, got ${String(tag.opaque)}`,
    );
  const opaque = tag.opaque === true;
  const sequence = checkSequence(tag.delta, tag.remainder);
  if (residue !== undefined) checkSequenceInSet(String(tag.tag), sequence, residue.increment);
  // The first allocation raises max_id to the tag's class, so room for one range of the tag's
  // stride (and that realignment) is what the start must leave.
  const room = step * sequence.delta + sequence.delta - 1;
  const given = tag.startId === undefined ? 1n : checkStartId(tag.startId, room);
  const startId =
    residue === undefined
      ? given
      : checkStartId(alignUp(given, residue), Number(residueRoom(step, residue)));
  if (opaque) checkOpaqueStart(tag.tag, startId);
  return {
    tag: checkTag(tag.tag),
    step,
    startId,
    description: checkDescription(tag.description),
    opaque,
    ...sequence,
    periodic: null,
    ordering,
  };
}

/**
 * A periodic tag's own row (docs/segments.md, Periodic sequences): it holds the option and the
 * step its period rows are created with, and issues nothing itself. Its max_id starts at 2^63-1,
 * so a node that draws from it as from a plain tag (an older idmint, a route that knows no
 * periods) gets no range at all, in every residue class, rather than bare IDs.
 */
function checkNewPeriodicTag(tag: NewTag, step: number): ReturnType<typeof checkNewTag> {
  const sequence = PeriodicSequence.from(tag.periodic as PeriodicOptions);
  const name = checkTag(tag.tag);
  checkPeriodicTagName(name, sequence.period);
  sequence.checkStep(step);
  const plainSequence = (tag.delta ?? 1) === 1 && (tag.remainder ?? 0) === 0;
  if (tag.opaque === true || tag.startId !== undefined || !plainSequence)
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `a periodic tag takes no opaque, startId, delta or remainder (its periods start at ` +
        `periodic.start), tag "${name}"`,
    );
  return {
    tag: name,
    step,
    startId: MAX_SEGMENT_ID,
    description: checkDescription(tag.description),
    opaque: false,
    delta: 1,
    remainder: 0,
    periodic: sequence.toText(),
    ordering: null,
  };
}

/**
 * INVALID_ARGUMENT unless a tag's sequence can be served by a set of `size` databases. Each
 * database of a set issues its own class mod size; a delta that shares a factor with the size
 * would leave some databases no ID of the tag's class at all (delta 2 in a set of 2: every odd ID
 * is database 1's), so only a delta coprime to the size combines (by the Chinese remainder
 * theorem: one class mod size * delta per database, inside both the tag's and the database's).
 */
export function checkSequenceInSet(tag: string, sequence: TagSequence, size: number): void {
  if (sequence.delta === 1 || size === 1) return;
  if (gcd(sequence.delta, size) !== 1) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `tag "${tag}": delta ${sequence.delta} cannot be served by a set of ${size} databases: ` +
        `they share a factor, so some databases would hold no ID of the tag's class; use a ` +
        `delta coprime to ${size}, or a store of its own`,
      { details: { tag, delta: sequence.delta, databases: size } },
    );
  }
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/**
 * The one class mod `increment * delta` that is both database `offset`'s (mod increment) and the
 * tag's (mod delta), for a delta coprime to increment (checkSequenceInSet): where that database
 * allocates the tag. A store of its own (increment 1) is the tag's own class.
 */
export function combinedResidue(residue: SegmentResidue, sequence: TagSequence): SegmentResidue {
  const n = residue.increment;
  const d = sequence.delta;
  for (let k = 0; k < d; k++) {
    const candidate = residue.offset + n * k;
    if (candidate % d === sequence.remainder) return { offset: candidate, increment: n * d };
  }
  throw new IdMintError(
    'TAG_MISCONFIGURED',
    `delta ${d} and a set of ${n} databases share a factor: no class serves both`,
  );
}

/** INVALID_ARGUMENT unless an opaque tag's next ID, `next`, still has an opaque form. */
export function checkOpaqueStart(tag: string, next: bigint): void {
  const limit = OPAQUE_SEGMENT_DOMAIN.denseLimit;
  if (next >= limit) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `tag "${String(tag)}" cannot be opaque from ID ${next}: opaque segment IDs encode ` +
        `dense IDs below ${limit} (10^15) only`,
      {
        details: { tag: String(tag) },
      },
    );
  }
}

/**
 * Validates the bounds of a release; shared by every store. A store of a set takes only bounds of
 * its class.
 */
export function checkRelease(from: bigint, to: bigint, residue?: SegmentResidue): void {
  checkSegmentId(from, 'from');
  checkSegmentId(to, 'to');
  if (from >= to)
    throw new IdMintError('INVALID_ARGUMENT', `release needs from < to, got [${from}, ${to})`);
  if (residue !== undefined && !(inResidue(from, residue) && inResidue(to, residue))) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `release of [${from}, ${to}) on ${residueText(residue)}: both bounds must be ≡ ` +
        `${residue.offset} (mod ${residue.increment})`,
    );
  }
}

/** The largest page {@link SegmentStore.listTagPage} takes. */
export const MAX_TAG_PAGE = 100_000;

/** `limit` if it is a page size from 1 to {@link MAX_TAG_PAGE}; INVALID_ARGUMENT otherwise. */
export function checkPageLimit(limit: unknown): number {
  if (
    typeof limit !== 'number' ||
    !Number.isSafeInteger(limit) ||
    limit < 1 ||
    limit > MAX_TAG_PAGE
  ) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `limit must be an integer from 1 to ${MAX_TAG_PAGE}, got ${String(limit)}`,
    );
  }
  return limit;
}

/**
 * How far before its cursor a change read looks again. A row's `update_time` is stamped when its
 * write begins (PostgreSQL's now() is the transaction's start) and only seen once the write
 * commits; an idmint write that has not committed within the store timeout is abandoned and
 * rolled back. So a read from `cursor - overlap` sees every idmint write that was still in flight
 * at the previous read, with a second more for timestamps kept in whole seconds (SQLite, MySQL)
 * and another for the distance between one database connection's clock reading and the next.
 * Writers outside idmint with longer transactions, and a database clock stepped back further than
 * this, are caught by the next full read (segment.tagFullRefreshMs).
 */
export function changeOverlapMs(timeoutMs: number): number {
  return timeoutMs + 2000;
}

/** A change cursor: ms since the epoch on the store's clock, as a decimal string. */
export function changeCursor(ms: number): string {
  return String(Math.trunc(ms));
}

/** The ms of a cursor {@link changeCursor} made; INVALID_ARGUMENT for anything else. */
export function parseChangeCursor(cursor: unknown): number {
  const ms = typeof cursor === 'string' && /^\d{1,16}$/.test(cursor) ? Number(cursor) : NaN;
  if (!Number.isSafeInteger(ms))
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `a tag change cursor is a store time this store returned (ms since the epoch), got ` +
        `${JSON.stringify(cursor)}`,
    );
  return ms;
}
