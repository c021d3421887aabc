// What the ID-family generators and decoders (UUID, ULID, ObjectId) share: the base of the
// time-ordered generators and small input checks.
import type { Clock } from '../ports/clock.ts';
import type { RollbackPolicy, RollbackPolicyOptions } from './clock-policy.ts';
import { IdMintError } from './errors.ts';
import { MonotonicTime } from './monotonic-time.ts';
import type { RandomFill } from './random-pool.ts';

/** Largest `nextBatch` count, the same bound as SnowflakeGenerator's. */
export const MAX_FAMILY_BATCH = 10_000_000;

/** Throws INVALID_ARGUMENT unless `count` is an integer from 1 to {@link MAX_FAMILY_BATCH}. */
export function checkCount(count: number): void {
  if (!Number.isSafeInteger(count) || count < 1 || count > MAX_FAMILY_BATCH) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `count must be an integer from 1 to ${MAX_FAMILY_BATCH}, got ${String(count)}`,
    );
  }
}

/** An input quoted for an error message, cut short so a huge string cannot flood a log. */
export function describeInput(input: unknown): string {
  if (typeof input !== 'string') return `a ${typeof input}`;
  return input.length > 40
    ? `"${input.slice(0, 40)}..." (${input.length} characters)`
    : `"${input}"`;
}

/** The options every time-ordered family generator takes (each family documents its own). */
export interface TimeOrderedOptions {
  readonly clock: Clock;
  readonly rollback?: RollbackPolicyOptions;
  readonly random?: RandomFill;
}

/** How a family reads time: its name in messages, time unit and largest unit. */
export interface FamilyTime {
  /** The generator class, for the message when options are missing. */
  readonly generator: string;
  /** The family, e.g. `UUIDv7`, for rollback and overflow messages. */
  readonly family: string;
  readonly unitMs: number;
  readonly maxUnit: number;
}

/**
 * Base of UuidV7Generator, UlidGenerator and ObjectIdGenerator: validates the options and holds
 * the clock and the {@link MonotonicTime} that decides each ID's time unit; the subclass keeps its
 * own counter and encoding.
 */
export abstract class TimeOrderedGenerator {
  protected readonly clock: Clock;
  protected readonly time: MonotonicTime;

  protected constructor(options: TimeOrderedOptions, time: FamilyTime) {
    if (options === null || typeof options !== 'object' || options.clock === undefined) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `${time.generator} needs options with a clock (for example new MonotonicClock())`,
      );
    }
    this.clock = options.clock;
    this.time = new MonotonicTime({
      clock: options.clock,
      unitMs: time.unitMs,
      maxUnit: time.maxUnit,
      family: time.family,
      rollback: options.rollback,
    });
  }

  /** The validated clock-rollback policy. */
  get policy(): RollbackPolicy {
    return this.time.policy;
  }

  /** The next ID in its canonical string form. */
  abstract nextString(): string;

  /** `count` ID strings, in the order they were made. */
  nextBatch(count: number): string[] {
    checkCount(count);
    const ids = new Array<string>(count);
    for (let i = 0; i < count; i++) ids[i] = this.nextString();
    return ids;
  }

  /** How many clock readings were behind an earlier one (each was handled by the policy). */
  rollbackCount(): number {
    return this.time.rollbackCount();
  }
}
