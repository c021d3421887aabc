import type { Clock } from '../ports/clock.ts';
import { iso } from './time.ts';
import {
  resolveRollbackPolicy,
  type RollbackPolicy,
  type RollbackPolicyName,
  type RollbackPolicyOptions,
} from './clock-policy.ts';
import { IdMintError } from './errors.ts';

/** The rollback policies an ID family accepts: every one that keeps IDs strictly increasing. */
export const FAMILY_ROLLBACK_POLICIES: readonly RollbackPolicyName[] = ['borrow', 'wait', 'refuse'];

/** Options for {@link MonotonicTime}. */
export interface MonotonicTimeOptions {
  readonly clock: Clock;
  /** Length of the family's time unit: 1 ms (UUIDv7, ULID) or 1000 ms (ObjectId). */
  readonly unitMs: number;
  /** Largest unit the family's time field holds; later ones are TIME_OVERFLOW. */
  readonly maxUnit: number;
  /** Family name for messages, e.g. `UUIDv7`. */
  readonly family: string;
  /** `borrow` (the default), `wait` or `refuse`; `history` is refused, it gives up order. */
  readonly rollback?: RollbackPolicyOptions | undefined;
}

/**
 * The time unit (ms or s since the Unix epoch) the next ID of a family takes, never below the unit
 * of the last ID: the rollback handling of {@link SnowflakeGenerator}, shared by UUIDv7, ULID and
 * ObjectId. Each generator keeps its own counter; this decides only the time.
 *
 * When the clock reads earlier than the last unit used:
 * - `borrow` (default): keep issuing on the last unit, as RFC 9562 (section 6.2) and the ULID
 *   spec's monotonic rule do, while that unit leads the clock by at most `maxLeadMs`; further
 *   behind, wait up to `maxWaitMs` for the clock, then refuse with CLOCK_MOVED_BACKWARDS.
 * - `wait`: Leaf's rule, as for snowflakes: wait out a rollback of at most `maxBackwardMs`, refuse
 *   a larger one.
 * - `refuse`: CLOCK_MOVED_BACKWARDS at once.
 */
export class MonotonicTime {
  readonly policy: RollbackPolicy;
  readonly #clock: Clock;
  readonly #unitMs: number;
  readonly #maxUnit: number;
  readonly #family: string;
  readonly #maxLeadUnits: number;
  /** Unit of the last ID issued; -1 before the first. */
  #unit = -1;
  /** Highest clock reading seen; a lower one proves the clock went back. */
  #clockHigh = 0;
  #rollbacks = 0;

  constructor(options: MonotonicTimeOptions) {
    this.#clock = options.clock;
    this.#unitMs = options.unitMs;
    this.#maxUnit = options.maxUnit;
    this.#family = options.family;
    const policy = resolveRollbackPolicy({ policy: 'borrow', ...options.rollback });
    if (!FAMILY_ROLLBACK_POLICIES.includes(policy.name)) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `rollback policy for ${options.family} must be one of ` +
          `${FAMILY_ROLLBACK_POLICIES.join(', ')} (strict order), got "${policy.name}"`,
      );
    }
    this.policy = policy;
    this.#maxLeadUnits = Math.floor(policy.maxLeadMs / options.unitMs);
  }

  /** Unit of the last ID issued (-1 before the first). */
  get unit(): number {
    return this.#unit;
  }

  /** How many clock readings were behind an earlier one. */
  rollbackCount(): number {
    return this.#rollbacks;
  }

  /**
   * The unit the next ID takes, given a clock reading `now` (ms): the clock's unit when it is
   * ahead of the last one, else the last unit (the caller continues its counter there), after
   * the rollback policy had its say. Never returns less than the last unit.
   */
  current(now: number): number {
    if (now < this.#clockHigh) this.#rollbacks++;
    else this.#clockHigh = now;
    for (;;) {
      const unit = Math.floor(now / this.#unitMs);
      if (unit > this.#unit) return this.#enter(unit, now);
      if (unit === this.#unit) return unit;
      const policy = this.policy;
      if (policy.name === 'borrow') {
        if (this.#unit - unit <= this.#maxLeadUnits) return this.#unit;
        now = this.#waitForUnit(this.#unit - this.#maxLeadUnits, policy.maxWaitMs);
        if (Math.floor(now / this.#unitMs) < this.#unit - this.#maxLeadUnits)
          throw this.#backwards(now);
        continue;
      }
      if (policy.name === 'wait') {
        const offset = this.#unit * this.#unitMs - now;
        if (offset > policy.maxBackwardMs) throw this.#backwards(now);
        // Leaf's rule: wait twice the offset, look once more, refuse if still behind.
        this.#clock.sleep(offset * 2);
        now = this.#clock.now();
        if (Math.floor(now / this.#unitMs) < this.#unit) throw this.#backwards(now);
        continue;
      }
      throw this.#backwards(now);
    }
  }

  /**
   * The last unit is used up (its counter ran out): returns a later unit. With `mayBorrow` under
   * the `borrow` policy the next unit is taken at once while it leads the clock by at most
   * `maxLeadMs`; otherwise this blocks (via `clock.sleep`) until the clock reaches it, for at most
   * one unit plus `maxWaitMs`, and refuses with CLOCK_MOVED_BACKWARDS if it does not.
   */
  following(mayBorrow: boolean): number {
    const target = this.#unit + 1;
    if (target > this.#maxUnit) throw this.#timeOverflow();
    if (mayBorrow && this.policy.name === 'borrow') {
      let now = this.#clock.now();
      if (target - Math.floor(now / this.#unitMs) > this.#maxLeadUnits) {
        now = this.#waitForUnit(target - this.#maxLeadUnits, this.policy.maxWaitMs);
        if (Math.floor(now / this.#unitMs) < target - this.#maxLeadUnits)
          throw this.#backwards(now);
      }
      return this.#enter(target, now);
    }
    const now = this.#waitForUnit(target, this.#unitMs + this.policy.maxWaitMs);
    const unit = Math.floor(now / this.#unitMs);
    if (unit < target) throw this.#backwards(now);
    return this.#enter(unit, now);
  }

  #enter(unit: number, now: number): number {
    if (unit > this.#maxUnit) throw this.#timeOverflow(now);
    this.#unit = unit;
    return unit;
  }

  /**
   * Blocks until the clock reaches `targetUnit`. Returns early if the clock steps back meanwhile;
   * returns the last reading after `maxWaitMs` if it never got there (the caller refuses).
   */
  #waitForUnit(targetUnit: number, maxWaitMs: number): number {
    const start = this.#clock.now();
    let now = start;
    while (Math.floor(now / this.#unitMs) < targetUnit) {
      if (now < start || now - start > maxWaitMs) return now;
      // Never ask for more than the rest of the budget: a manual clock jumps by what is asked.
      this.#clock.sleep(
        Math.max(1, Math.min(targetUnit * this.#unitMs - now, maxWaitMs - (now - start) + 1)),
      );
      now = this.#clock.now();
    }
    return now;
  }

  #backwards(now: number): IdMintError {
    const last = this.#unit * this.#unitMs;
    const offset = last - now;
    const p = this.policy;
    const tolerance =
      p.name === 'wait'
        ? `tolerates up to ${p.maxBackwardMs} ms`
        : p.name === 'borrow'
          ? `leads the clock by at most ${p.maxLeadMs} ms and waits at most ${p.maxWaitMs} ms`
          : 'refuses any rollback';
    return new IdMintError(
      'CLOCK_MOVED_BACKWARDS',
      `${this.#family}: clock reads ${iso(now)}, ${offset} ms behind the time of the last ` +
        `ID (${iso(last)}); policy "${p.name}" ${tolerance}`,
      { details: { offsetMs: offset, policy: p.name, family: this.#family } },
    );
  }

  #timeOverflow(now = this.#clock.now()): IdMintError {
    const limit = (this.#maxUnit + 1) * this.#unitMs;
    return new IdMintError(
      'TIME_OVERFLOW',
      `${this.#family}: its time field cannot hold times from ${iso(limit)} on (clock reads ` +
        `${iso(now)}); no ID is issued rather than a wrapped one`,
      { details: { family: this.#family, expiresAtMs: limit } },
    );
  }
}
