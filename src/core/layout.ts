import { IdMintError } from './errors.ts';

/**
 * How a snowflake ID's bits are split, as data. From the most significant bit down:
 *
 * ```
 * [sign 0][time: timeBits][datacenter: datacenterBits][worker: workerBits][sequence: sequenceBits]
 * ```
 *
 * `time` counts `timeUnitMs` units since `epoch`. The sign bit is always 0, so IDs are positive
 * signed 64-bit integers (Java `long`, SQL `bigint`).
 */
export interface LayoutSpec {
  /** Name shown in errors and decode output. */
  readonly name?: string;
  /** Bits of the time field. */
  readonly timeBits: number;
  /** Bits of the datacenter field (high part of the node ID, Twitter's 5+5 split). Default 0. */
  readonly datacenterBits?: number;
  /** Bits of the worker field. */
  readonly workerBits: number;
  /** Bits of the per-time-unit sequence. */
  readonly sequenceBits: number;
  /** Start of the time field: ms since the Unix epoch, or an ISO-8601 date string. */
  readonly epoch: number | string;
  /**
   * Length of one time unit in ms: 1 (default), 10 like Sonyflake, 1000 like Baidu's uid-generator.
   */
  readonly timeUnitMs?: number;
  /**
   * Bits an ID may use: 63 (a signed 64-bit integer, the default) or 53 (stays below 2^53, so
   * JavaScript can hold it as a number). The fields must add up to exactly this.
   */
  readonly totalBits?: 63 | 53;
  /**
   * The generator's `sequenceSpread` when none is given: each time unit's sequence starts at a
   * random value below this. 0 (default) to half the sequence space. `leaf` has 100, Leaf's
   * `RANDOM.nextInt(100)` (SnowflakeIDGenImpl), so its IDs are spread over low digits as Leaf's.
   */
  readonly sequenceSpread?: number;
}

/**
 * A validated layout with its derived limits. Create with {@link defineLayout} or {@link
 * getLayout}.
 */
export interface Layout {
  readonly name: string;
  readonly timeBits: number;
  readonly datacenterBits: number;
  readonly workerBits: number;
  readonly sequenceBits: number;
  readonly totalBits: 63 | 53;
  /** ms since the Unix epoch. */
  readonly epochMs: number;
  readonly timeUnitMs: number;
  /** Largest value of the time field. */
  readonly maxTimeUnits: number;
  readonly maxDatacenterId: number;
  readonly maxWorkerId: number;
  readonly maxSequence: number;
  /** Bit offsets of each field. */
  readonly workerShift: number;
  readonly datacenterShift: number;
  readonly timeShift: number;
  /** Largest ID the layout can hold. */
  readonly maxId: bigint;
  /** IDs one worker can issue per second at most: 2^sequenceBits per time unit. */
  readonly maxIdsPerSecond: number;
  /**
   * First ms (since the Unix epoch) the time field cannot represent: from then on the generator
   * refuses with TIME_OVERFLOW instead of wrapping into negative or repeated IDs.
   */
  readonly expiresAtMs: number;
  /** The spread a generator of this layout uses unless given one (see {@link LayoutSpec}). */
  readonly sequenceSpread: number;
}

/** The parts of an ID, as decoded by {@link decomposeId}. */
export interface IdParts {
  /** Start of the ID's time unit, in ms since the Unix epoch. */
  readonly timestamp: number;
  readonly date: Date;
  /** Present only when the layout has a datacenter field. */
  readonly datacenterId?: number;
  readonly workerId: number;
  readonly sequence: number;
}

/** Names of the built-in layouts; see docs/layouts.md. */
export type LayoutPresetName = 'idmint' | 'leaf' | 'twitter' | 'js-safe' | 'baidu';

const TWITTER_EPOCH = 1288834974657; // 2010-11-04T01:42:54.657Z, also Meituan Leaf's epoch
const IDMINT_EPOCH = Date.UTC(2026, 0, 1); // recent, so 41 bits of ms last until 2095

const PRESETS: Readonly<Record<LayoutPresetName, LayoutSpec>> = {
  // Default: Twitter's 41/10/12 split with a recent epoch, so the 69.7-year time field lasts to
  // 2095.
  idmint: { name: 'idmint', timeBits: 41, workerBits: 10, sequenceBits: 12, epoch: IDMINT_EPOCH },
  // Meituan Leaf's layout and epoch: IDs and decoding match Leaf-snowflake exactly (runs out 2080).
  // Each millisecond's sequence starts at a random 0-99, as Leaf's does.
  leaf: {
    name: 'leaf',
    timeBits: 41,
    workerBits: 10,
    sequenceBits: 12,
    epoch: TWITTER_EPOCH,
    sequenceSpread: 100,
  },
  // Twitter's original: the 10 node bits split into 5 datacenter + 5 worker bits.
  twitter: {
    name: 'twitter',
    timeBits: 41,
    datacenterBits: 5,
    workerBits: 5,
    sequenceBits: 12,
    epoch: TWITTER_EPOCH,
  },
  // Below 2^53: 64 workers x 64 IDs/ms (64,000 IDs/s per worker), lasting until 2095.
  'js-safe': {
    name: 'js-safe',
    timeBits: 41,
    workerBits: 6,
    sequenceBits: 6,
    epoch: IDMINT_EPOCH,
    totalBits: 53,
  },
  // Baidu uid-generator's default (28 bits of seconds since 2016-05-20, 22 worker, 13 sequence).
  // Its time field ran out on 2024-11-20; kept so its IDs can still be decoded, and as the proof
  // that idmint refuses instead of wrapping.
  baidu: {
    name: 'baidu',
    timeBits: 28,
    workerBits: 22,
    sequenceBits: 13,
    epoch: '2016-05-20T00:00:00Z',
    timeUnitMs: 1000,
  },
};

/** The names of the built-in layouts. */
export const LAYOUT_PRESETS: readonly LayoutPresetName[] = Object.keys(
  PRESETS,
) as LayoutPresetName[];

/** The default layout name. */
export const DEFAULT_LAYOUT: LayoutPresetName = 'idmint';

/** A built-in layout by name; throws LAYOUT_INVALID naming the known presets otherwise. */
export function getLayout(name: string): Layout {
  const spec = Object.hasOwn(PRESETS, name) ? PRESETS[name as LayoutPresetName] : undefined;
  if (spec === undefined) {
    throw new IdMintError(
      'LAYOUT_INVALID',
      `unknown layout "${name}"; known layouts: ${LAYOUT_PRESETS.join(', ')}`,
    );
  }
  return defineLayout(spec);
}

/**
 * Accepts a preset name, a spec or an already validated layout; undefined is the default layout.
 * Anything else (null, a number) is LAYOUT_INVALID, never a TypeError from reading its fields.
 */
export function resolveLayout(layout: Layout | LayoutSpec | string | undefined): Layout {
  if (layout === undefined) return getLayout(DEFAULT_LAYOUT);
  if (typeof layout === 'string') return getLayout(layout);
  if (layout === null || typeof layout !== 'object') {
    const presets = LAYOUT_PRESETS.join(', ');
    const forms = `a preset name (${presets}), a spec or a layout from defineLayout`;
    throw new IdMintError(
      'LAYOUT_INVALID',
      `layout must be ${forms}, got ${describeValue(layout)}`,
    );
  }
  if (isLayout(layout)) return layout;
  return defineLayout(layout);
}

function describeValue(value: unknown): string {
  return value === null ? 'null' : `a ${typeof value}`;
}

const validated = new WeakSet<Layout>();

function isLayout(value: Layout | LayoutSpec): value is Layout {
  return validated.has(value as Layout);
}

/**
 * Validates a spec and derives its limits. Throws LAYOUT_INVALID naming the field, its value and
 * what is allowed. `nowMs`, when given, also rejects an epoch in the future.
 */
export function defineLayout(spec: LayoutSpec, nowMs?: number): Layout {
  if (spec === null || typeof spec !== 'object') {
    throw new IdMintError(
      'LAYOUT_INVALID',
      `layout spec must be an object, got ${describeValue(spec)}`,
    );
  }
  const name = spec.name ?? 'custom';
  const fail = (message: string): never => {
    throw new IdMintError('LAYOUT_INVALID', `layout "${name}": ${message}`);
  };
  const bits = (field: string, value: unknown, min: number, max: number): number => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      fail(`${field} must be an integer from ${min} to ${max}, got ${String(value)}`);
    }
    return value as number;
  };

  const totalBits = spec.totalBits ?? 63;
  if (totalBits !== 63 && totalBits !== 53)
    fail(`totalBits must be 63 or 53, got ${String(totalBits)}`);
  // The time field counts units in a JS number and the sequence in a small integer; these bounds
  // keep both exact and cost nothing in practice (2^30 IDs per time unit is beyond any process).
  const timeBits = bits('timeBits', spec.timeBits, 1, 53);
  const datacenterBits = bits('datacenterBits', spec.datacenterBits ?? 0, 0, 31);
  const workerBits = bits('workerBits', spec.workerBits, 0, 31);
  const sequenceBits = bits('sequenceBits', spec.sequenceBits, 1, 30);
  if (datacenterBits + workerBits > 31)
    fail(`datacenterBits + workerBits must be at most 31, got ${datacenterBits + workerBits}`);
  const sum = timeBits + datacenterBits + workerBits + sequenceBits;
  if (sum !== totalBits) {
    fail(
      `bits must total ${totalBits} (the sign bit stays 0), got ` +
        `${timeBits}+${datacenterBits}+${workerBits}+${sequenceBits} = ${sum}`,
    );
  }

  const timeUnitMs = spec.timeUnitMs ?? 1;
  if (!Number.isInteger(timeUnitMs) || timeUnitMs < 1 || timeUnitMs > 86_400_000) {
    fail(`timeUnitMs must be an integer from 1 to 86400000, got ${String(timeUnitMs)}`);
  }
  const epochMs = parseEpoch(spec.epoch, fail);
  if (nowMs !== undefined && epochMs > nowMs) {
    fail(
      `epoch ${new Date(epochMs).toISOString()} is in the future (now ` +
        `${new Date(nowMs).toISOString()})`,
    );
  }
  const maxTimeUnits = 2 ** timeBits - 1;
  const expiresAtMs = epochMs + (maxTimeUnits + 1) * timeUnitMs;
  // 8.64e15 ms is the last instant a JS Date can represent (year 275760).
  if (expiresAtMs > 8.64e15)
    fail(
      `the time field would outlast year 275760, the end of JS dates; use fewer timeBits or ` +
        `a smaller timeUnitMs`,
    );

  // Half the sequence space at most, so a spread start always leaves room in its time unit.
  const sequenceSpread = bits(
    'sequenceSpread',
    spec.sequenceSpread ?? 0,
    0,
    2 ** (sequenceBits - 1),
  );
  const workerShift = sequenceBits;
  const datacenterShift = sequenceBits + workerBits;
  const timeShift = sequenceBits + workerBits + datacenterBits;
  const layout: Layout = Object.freeze({
    name,
    timeBits,
    datacenterBits,
    workerBits,
    sequenceBits,
    totalBits,
    epochMs,
    timeUnitMs,
    maxTimeUnits,
    maxDatacenterId: 2 ** datacenterBits - 1,
    maxWorkerId: 2 ** workerBits - 1,
    maxSequence: 2 ** sequenceBits - 1,
    workerShift,
    datacenterShift,
    timeShift,
    maxId: (1n << BigInt(totalBits)) - 1n,
    maxIdsPerSecond: (2 ** sequenceBits * 1000) / timeUnitMs,
    expiresAtMs,
    sequenceSpread,
  });
  validated.add(layout);
  return layout;
}

function parseEpoch(epoch: unknown, fail: (message: string) => never): number {
  if (typeof epoch === 'number') {
    if (!Number.isSafeInteger(epoch) || epoch < 0)
      fail(`epoch must be a non-negative integer of ms since 1970, got ${epoch}`);
    return epoch;
  }
  if (typeof epoch === 'string') {
    const ms = Date.parse(epoch);
    if (Number.isNaN(ms) || ms < 0)
      fail(`epoch must be an ISO-8601 date after 1970, got "${epoch}"`);
    return ms;
  }
  return fail(`epoch must be ms since 1970 or an ISO-8601 date, got ${String(epoch)}`);
}

/** The node part of an ID: datacenter and worker fields, already shifted into place. */
export function nodeBits(layout: Layout, workerId: number, datacenterId = 0): bigint {
  return (
    (BigInt(datacenterId) << BigInt(layout.datacenterShift)) |
    (BigInt(workerId) << BigInt(layout.workerShift))
  );
}

/**
 * Builds an ID from its parts under `layout` (a layout, a spec or a preset name). Throws
 * INVALID_ARGUMENT when a part does not fit its field, so a composed ID always decodes back to
 * the same parts.
 */
export function composeId(
  layoutOrName: Layout | LayoutSpec | string,
  parts: {
    readonly timestamp: number;
    readonly workerId: number;
    readonly datacenterId?: number;
    readonly sequence: number;
  },
): bigint {
  const layout = resolveLayout(layoutOrName);
  if (parts === null || typeof parts !== 'object') {
    const got = describeValue(parts);
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `composeId needs { timestamp, workerId, sequence }, got ${got}`,
    );
  }
  const units = Math.floor((parts.timestamp - layout.epochMs) / layout.timeUnitMs);
  checkPart('timestamp', parts.timestamp, units, layout.maxTimeUnits, layout);
  checkPart('workerId', parts.workerId, parts.workerId, layout.maxWorkerId, layout);
  checkPart(
    'datacenterId',
    parts.datacenterId ?? 0,
    parts.datacenterId ?? 0,
    layout.maxDatacenterId,
    layout,
  );
  checkPart('sequence', parts.sequence, parts.sequence, layout.maxSequence, layout);
  return (
    (BigInt(units) << BigInt(layout.timeShift)) |
    nodeBits(layout, parts.workerId, parts.datacenterId) |
    BigInt(parts.sequence)
  );
}

function checkPart(field: string, given: number, value: number, max: number, layout: Layout): void {
  if (!Number.isSafeInteger(value) || value < 0 || value > max) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${field} ${given} does not fit layout "${layout.name}" (field holds 0 to ${max})`,
    );
  }
}

const CANONICAL_DECIMAL = /^(?:0|[1-9][0-9]{0,19})$/;

/**
 * Parses an ID strictly: a bigint, a safe non-negative integer number, or a canonical decimal
 * string (digits only, no sign, spaces or leading zeros). Anything negative, above the layout's
 * largest ID, or not an integer is INVALID_ID, never a silently different number. `layout` is a
 * layout, a spec or a preset name; default `idmint`.
 */
export function parseId(input: unknown, layoutOrName?: Layout | LayoutSpec | string): bigint {
  const layout = resolveLayout(layoutOrName);
  let id: bigint;
  if (typeof input === 'bigint') {
    id = input;
  } else if (typeof input === 'number') {
    if (!Number.isSafeInteger(input)) {
      throw new IdMintError(
        'INVALID_ID',
        `ID ${input} is not a safe integer; pass IDs above 2^53 as strings or bigints`,
      );
    }
    id = BigInt(input);
  } else if (typeof input === 'string') {
    if (!CANONICAL_DECIMAL.test(input)) {
      throw new IdMintError(
        'INVALID_ID',
        `ID "${truncate(input)}" is not a decimal integer (digits only, no sign or leading zeros)`,
      );
    }
    id = BigInt(input);
  } else {
    throw new IdMintError(
      'INVALID_ID',
      `ID must be a bigint, number or decimal string, got ${typeof input}`,
    );
  }
  if (id < 0n) throw new IdMintError('INVALID_ID', `ID ${id} is negative; IDs are never negative`);
  if (id > layout.maxId) {
    throw new IdMintError(
      'INVALID_ID',
      `ID ${id} is above ${layout.maxId}, the largest ID of layout "${layout.name}" ` +
        `(${layout.totalBits} bits)`,
    );
  }
  return id;
}

function truncate(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}

/**
 * Splits an ID (any form {@link parseId} accepts) into its parts under `layout`: a layout, a spec
 * or a preset name, as SnowflakeGenerator takes; default `idmint`, the generator's default. Bad
 * input is INVALID_ID or LAYOUT_INVALID.
 */
export function decomposeId(input: unknown, layoutOrName?: Layout | LayoutSpec | string): IdParts {
  const layout = resolveLayout(layoutOrName);
  const id = parseId(input, layout);
  const sequence = Number(id & BigInt(layout.maxSequence));
  const workerId = Number((id >> BigInt(layout.workerShift)) & BigInt(layout.maxWorkerId));
  const units = Number(id >> BigInt(layout.timeShift));
  const timestamp = layout.epochMs + units * layout.timeUnitMs;
  const base = { timestamp, date: new Date(timestamp), workerId, sequence };
  if (layout.datacenterBits === 0) return base;
  const datacenterId = Number(
    (id >> BigInt(layout.datacenterShift)) & BigInt(layout.maxDatacenterId),
  );
  return { timestamp, date: base.date, datacenterId, workerId, sequence };
}
