import { IdMintError } from './errors.ts';
import { MAX_TIMER_MS } from './time.ts';

/**
 * The limits of segment mode's values, checked in one place by the service and by every store, so
 * a bad value is refused with the same message whichever backend is configured.
 */

/** The largest ID (and `max_id`) a tag can reach: 2^63-1, the top of a signed 64-bit column. */
export const MAX_SEGMENT_ID = 2n ** 63n - 1n;

/** The largest step: Leaf's `step` column is a signed 32-bit `int`. */
export const MAX_TAG_STEP = 2 ** 31 - 1;

/**
 * Most databases one set can have (src/stores/multi/): the largest stride of a range. A limit of
 * idmint's, far above what a set needs; it keeps `step * stride` well inside 64 bits.
 */
export const MAX_SEGMENT_DATABASES = 64;

/**
 * The largest per-tag `delta` (TinyId's `tiny_id_info.delta`: a tag issues only IDs `≡ remainder
 * (mod delta)`). TinyId allows any int; 64 is far above the sequences it is used for (odd-only,
 * 1, 4, 7, ...) and keeps a tag's stride times a set's size (at most 64 * 64) small.
 */
export const MAX_TAG_DELTA = 64;

/** The largest distance between a range's IDs: a tag's delta times a set's size. */
export const MAX_SEGMENT_STRIDE = MAX_TAG_DELTA * MAX_SEGMENT_DATABASES;

/** A tag's own arithmetic sequence: IDs `≡ remainder (mod delta)` (TinyId's two columns). */
export interface TagSequence {
  /** 1 to {@link MAX_TAG_DELTA}; 1 is every ID. */
  readonly delta: number;
  /** 0 to `delta - 1`. */
  readonly remainder: number;
}

/** Every ID: the sequence of a tag without delta and remainder (a Leaf row). */
export const EVERY_ID: TagSequence = { delta: 1, remainder: 0 };

/**
 * Returns `{ delta, remainder }` if delta is an integer from 1 to 64 and remainder one from 0 to
 * delta - 1 (absent: 1 and 0); throws INVALID_ARGUMENT otherwise. TinyId accepts a remainder of
 * delta or more, and then never finds an ID of the class: idmint refuses it.
 */
export function checkSequence(delta: unknown = 1, remainder: unknown = 0): TagSequence {
  const whole = (value: unknown): value is number =>
    typeof value === 'number' && Number.isInteger(value);
  if (!whole(delta) || delta < 1 || delta > MAX_TAG_DELTA) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `delta must be an integer from 1 to ${MAX_TAG_DELTA}, got ${describe(delta)}`,
    );
  }
  if (!whole(remainder) || remainder < 0 || remainder >= delta) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `remainder must be an integer from 0 to delta - 1 (${delta - 1}), got ${describe(remainder)}`,
    );
  }
  return { delta, remainder };
}

/**
 * A stored delta and remainder as a sequence, or undefined when they are not one (written outside
 * idmint). Absent or null columns (a Leaf table) are every ID. Accepts numbers, bigints, strings.
 */
export function storedSequence(delta: unknown, remainder: unknown): TagSequence | undefined {
  const absent = (value: unknown) => value === undefined || value === null;
  if (absent(delta) && absent(remainder)) return EVERY_ID;
  const number = (value: unknown, fallback: number) =>
    absent(value) ? fallback : /^-?[0-9]{1,12}$/.test(String(value)) ? Number(value) : Number.NaN;
  const d = number(delta, 1);
  const r = number(remainder, 0);
  return Number.isInteger(d) &&
    d >= 1 &&
    d <= MAX_TAG_DELTA &&
    Number.isInteger(r) &&
    r >= 0 &&
    r < d
    ? { delta: d, remainder: r }
    : undefined;
}

/**
 * Most characters a tag has: Leaf's `biz_tag varchar(128)`, counted as databases count them (code
 * points).
 */
export const MAX_TAG_LENGTH = 128;

/**
 * Every tag a Leaf table can hold and every store can keep: 1 to 128 Unicode code points, any
 * except U+0000 (PostgreSQL cannot store it in text) and unpaired UTF-16 surrogates (no UTF-8
 * database can store them; a driver would silently turn one into U+FFFD, another tag).
 *
 * Control characters, spaces, `/`, `{`, `}` and `:` are allowed: a `varchar(128)` row can hold
 * them, and a tag moved from Leaf must stay reachable. They are harmless where tags go: URLs
 * carry them percent-encoded, JSON bodies and log lines escape them, Redis keys are binary-safe
 * and the SQL stores bind tags as parameters, never splice them into statements.
 */
const TAG_RULE = /^[^\u0000\p{Cs}]{1,128}$/u;

/**
 * The stricter rule for tags created through the JSON API (`POST /v1/tags`) and the CLI, and for
 * auth token rules: 1 to 128 characters that need no escaping in URLs, keys or logs. Older tags,
 * e.g. moved from Leaf, may be any name {@link checkTag} accepts.
 */
export const TAG_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Leaf's `description varchar(256)`, counted in code points as databases count characters. */
export const MAX_DESCRIPTION_LENGTH = 256;

/** Same exclusions as tags: what a database cannot store (U+0000, unpaired surrogates). */
const DESCRIPTION_RULE = /^[^\u0000\p{Cs}]{0,256}$/u;

/**
 * Returns `tag` if it is a business tag any store can hold (1 to 128 code points, no U+0000, no
 * unpaired surrogate); throws INVALID_ARGUMENT otherwise. The rule of every store, the service
 * and the ID routes; the JSON API creates tags under the stricter {@link TAG_PATTERN}.
 */
export function checkTag(tag: unknown): string {
  if (typeof tag !== 'string' || !TAG_RULE.test(tag)) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `tag must be 1 to ${MAX_TAG_LENGTH} characters, none of them U+0000 or an unpaired ` +
        `surrogate, got ${describe(tag)}`,
    );
  }
  return tag;
}

/**
 * Returns `tag` if it follows the stricter rule for tags idmint's own tools create (the JSON API's
 * `POST /v1/tags`, `idmint tags create`): {@link TAG_PATTERN}. Throws INVALID_ARGUMENT otherwise.
 */
export function checkNewTagName(tag: unknown): string {
  if (typeof tag !== 'string' || !TAG_PATTERN.test(tag)) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `tag must be 1 to 128 characters of A-Z a-z 0-9 _ . : - for a new tag (a tag moved ` +
        `from Leaf may hold any characters), got ${describe(tag)}`,
    );
  }
  return tag;
}

/** Returns `step` if it is an integer from 1 to 2^31-1; throws INVALID_ARGUMENT naming `name`. */
export function checkStep(step: unknown, name = 'step'): number {
  if (typeof step !== 'number' || !Number.isInteger(step) || step < 1 || step > MAX_TAG_STEP) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${name} must be an integer from 1 to ${MAX_TAG_STEP}, got ${describe(step)}`,
    );
  }
  return step;
}

/** Returns `id` if it is a bigint from 0 to 2^63-1; throws INVALID_ARGUMENT naming `name`. */
export function checkSegmentId(id: unknown, name: string): bigint {
  if (typeof id !== 'bigint' || id < 0n || id > MAX_SEGMENT_ID) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${name} must be a bigint from 0 to ${MAX_SEGMENT_ID}, got ${describe(id)}`,
    );
  }
  return id;
}

/**
 * The one rule for tag descriptions, on every store and at the HTTP edge: null or absent (no
 * description), or a string of at most 256 code points (Leaf's `varchar(256)`) without U+0000 or
 * an unpaired surrogate, which no database stores faithfully (PostgreSQL refuses U+0000; SQLite
 * would keep it while PostgreSQL cannot). Returns the description, null when absent; throws
 * INVALID_ARGUMENT otherwise.
 */
export function checkDescription(description: unknown): string | null {
  if (description === undefined || description === null) return null;
  if (typeof description !== 'string' || !DESCRIPTION_RULE.test(description)) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `description must be null or a string of at most ${MAX_DESCRIPTION_LENGTH} ` +
        `characters, none of them U+0000 or an unpaired surrogate, got ${describe(description)}`,
    );
  }
  return description;
}

/**
 * Returns `startId` if a tag starting there has room for at least one range of `step` below
 * 2^63-1; throws INVALID_ARGUMENT otherwise, so a tag that could only ever answer
 * ID_SPACE_EXHAUSTED is refused when it is created.
 */
export function checkStartId(startId: unknown, step: number): bigint {
  const id = checkSegmentId(startId, 'startId');
  const highest = MAX_SEGMENT_ID - BigInt(step);
  if (id > highest) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `startId must leave room for one range of step ${step} below ${MAX_SEGMENT_ID}: at ` +
        `most ${highest}, got ${id}n`,
    );
  }
  return id;
}

/**
 * A stored step as a valid step, or undefined when the row's value is not an integer from 1 to
 * 2^31-1 (a row written outside idmint: Leaf's table only says `int`). Accepts what drivers
 * return: a number, a bigint or a decimal string.
 */
export function storedStep(value: unknown): number | undefined {
  const text = typeof value === 'number' || typeof value === 'bigint' ? String(value) : value;
  if (typeof text !== 'string' || !/^[1-9][0-9]{0,9}$/.test(text)) return undefined;
  const step = Number(text);
  return step <= MAX_TAG_STEP ? step : undefined;
}

/**
 * The error for a row no range can be allocated from (a step of 0 or less, a negative max_id),
 * written there outside idmint. Not retryable: the row must be fixed. Names the tag and the value,
 * never a database message.
 */
export function tagMisconfigured(
  tag: string,
  column: 'step' | 'max_id' | 'delta',
  value: unknown,
): IdMintError {
  const allowed =
    column === 'step'
      ? `an integer from 1 to ${MAX_TAG_STEP}`
      : column === 'delta'
        ? `a delta from 1 to ${MAX_TAG_DELTA} with a remainder from 0 to delta - 1`
        : `an integer from 0 to ${MAX_SEGMENT_ID}`;
  const fix =
    column === 'step' ? '; set a valid step (idmint tags set-step, or PATCH /v1/tags/{tag})' : '';
  const text = String(value);
  const shown = /^-?[0-9]{1,40}$/.test(text) ? text : describe(text);
  return new IdMintError(
    'TAG_MISCONFIGURED',
    `tag "${tag}": its stored ${column} is ${shown}, which must be ${allowed}; no range can ` +
      `be allocated until the row is fixed${fix}`,
    {
      details: { tag, column, value: text },
    },
  );
}

/** The error every store raises when a range would pass 2^63-1. */
export function idSpaceExhausted(tag: string, maxId: bigint, step: number): IdMintError {
  return new IdMintError(
    'ID_SPACE_EXHAUSTED',
    `tag "${tag}": a range of ${step} from max_id ${maxId} would pass ${MAX_SEGMENT_ID}; ` +
      `nothing was allocated`,
    { details: { tag, maxId: maxId.toString(), step } },
  );
}

/** The error for a tag the store does not have. */
export function tagNotFound(tag: string): IdMintError {
  return new IdMintError('TAG_NOT_FOUND', `tag "${tag}" does not exist`, { details: { tag } });
}

function describe(value: unknown): string {
  if (typeof value === 'string')
    return JSON.stringify(value.length > 140 ? `${value.slice(0, 140)}...` : value);
  if (typeof value === 'bigint') return `${value}n`;
  return String(value);
}

/**
 * Rows per page of a full tag read: small enough that one page never holds the event loop long.
 * SQLite reads a page synchronously: 2,000 rows held the loop up to 17 ms at 100,000 tags on the
 * 2-core bench machine, 500 rows 6 ms (that machine's idle floor is 3 to 5 ms).
 */
export const TAG_PAGE_SIZE = 500;

/**
 * Defaults and bounds of the options, of SegmentService, checked once by its constructor; the
 * server configuration states the same bounds. Durations end up in timers (or beside them), so none
 * may reach 2^31 ms, which Node would clamp to 1 ms: a 30-day refresh interval would refresh a
 * thousand times a second.
 */
export const SEGMENT_SERVICE_BOUNDS = {
  prefetchThreshold: { min: 0, max: 1, fallback: 0.1 },
  waitTimeoutMs: { min: 1, max: MAX_TIMER_MS, fallback: 2000 },
  loadTimeoutMs: { min: 1, max: MAX_TIMER_MS, fallback: 5000 },
  retryAfterMs: { min: 0, max: MAX_TIMER_MS, fallback: 1000 },
  tagRefreshMs: { min: 0, max: MAX_TIMER_MS, fallback: 60_000 },
  tagFullRefreshMs: { min: 0, max: MAX_TIMER_MS, fallback: 3_600_000 },
  negativeCacheMs: { min: 0, max: MAX_TIMER_MS, fallback: 2000 },
} as const;
