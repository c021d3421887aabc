import type { Clock } from '../ports/clock.ts';
import {
  resolveRollbackPolicy,
  type RollbackPolicy,
  type RollbackPolicyOptions,
} from './clock-policy.ts';
import { IdMintError } from './errors.ts';
import { nodeBits, resolveLayout, type Layout, type LayoutSpec } from './layout.ts';
import { iso } from './time.ts';

/** Options for {@link SnowflakeGenerator}. */
export interface SnowflakeOptions {
  /** Clock to read time from. Required: core never reads the system time itself. */
  readonly clock: Clock;
  /** A preset name (default `idmint`), a spec, or a layout from `defineLayout`. */
  readonly layout?: Layout | LayoutSpec | string;
  /**
   * This generator's worker ID, 0 to the layout's maxWorkerId. Required: two generators running
   * with one worker ID issue the same IDs, so none is ever assumed. Unique per running generator;
   * a worker registry assigns one for you (`SnowflakeWorker.start({ registry })`, docs/workers.md).
   */
  readonly workerId: number;
  /** Datacenter ID for layouts with a datacenter field. Default 0. */
  readonly datacenterId?: number;
  /** Clock-rollback policy; default `wait` (see docs/layouts.md). */
  readonly rollback?: RollbackPolicyOptions;
  /**
   * Start each new time unit's sequence at a random value below this (Leaf uses 100), so IDs
   * issued at low traffic are not all even or all multiples of 2^k, which skews sharding by
   * `id % n`. Costs up to `sequenceSpread - 1` IDs of capacity per time unit. Default: the
   * layout's (100 for `leaf`, as Leaf; 0, off, for the others).
   */
  readonly sequenceSpread?: number;
  /** Source of randomness for `sequenceSpread`, returning [0, 1). Default `Math.random`. */
  readonly random?: () => number;
  /**
   * The last timestamp (ms) any earlier holder of this worker ID may have used. Every ID this
   * generator issues has a later time unit; the rollback policy applies if the clock is behind it.
   */
  readonly lastTimestamp?: number;
}

/**
 * How long, in ms, one batch may take to mint at most: a request for more than a layout issues in
 * this window is refused rather than served slowly (see {@link maxBatchFor}). 100 ms keeps a
 * batch of the largest size answered about as fast as a slow network round trip.
 */
export const BATCH_WINDOW_MS = 100;

/**
 * The largest batch a generator of `layout` mints within {@link BATCH_WINDOW_MS}: the IDs one time
 * unit holds (less what `sequenceSpread`, by default the layout's, may skip at its start)
 * times the time units in the
 * window, at least one. `js-safe` (64 IDs per ms): 6,400; `idmint` (4,096 per ms): 409,600;
 * `baidu` (8,192 per second): 8,192.
 */
export function maxBatchFor(layout: Layout, sequenceSpread = layout.sequenceSpread): number {
  const perUnit = layout.maxSequence + 1 - Math.max(0, sequenceSpread - 1);
  return perUnit * Math.max(1, Math.floor(BATCH_WINDOW_MS / layout.timeUnitMs));
}

/**
 * Generates snowflake IDs: unique for a (datacenter, worker) pair, strictly increasing (except
 * after a rollback under the `history` policy), and never wrapped or negative.
 *
 * The hot path is one clock read, two comparisons and a bigint increment: within a time unit the
 * next ID is the previous one plus one, so the bigint is composed from its parts only when the
 * time unit changes. Everything rarer (a new unit, sequence exhausted, clock rollback, fencing)
 * goes through `#nextSlow`.
 */
export class SnowflakeGenerator {
  readonly layout: Layout;
  readonly workerId: number;
  readonly datacenterId: number;
  readonly policy: RollbackPolicy;

  readonly #clock: Clock;
  readonly #epochMs: number;
  readonly #unitMs: number;
  readonly #maxSequence: number;
  readonly #timeShift: bigint;
  readonly #node: bigint;
  readonly #spread: number;
  readonly #random: () => number;
  readonly #maxLeadUnits: number;
  readonly #historyUnits: number;

  /** Time unit of the last ID issued (or of `lastTimestamp`); -1 before the first. */
  #lastUnit: number;
  /** Sequence of the last ID issued in `#lastUnit`. */
  #sequence: number;
  /** The last ID issued, kept so the next one in the same unit is `#lastId + 1n`. */
  #lastId = 0n;
  /** Lowest clock unit at which the fast path may keep issuing on `#lastUnit`. */
  #fastFloor: number;
  /** Highest time unit ever used; only `history` goes back below it. */
  #highUnit: number;
  /** `history` never returns to units at or below this: their use before start-up is unknown. */
  readonly #historyFloor: number;
  /** `history`: last sequence used per unit, in a ring indexed by unit mod length. */
  readonly #ringSequence: Int32Array | undefined;
  readonly #ringUnit: Float64Array | undefined;
  /** Fencing: no ID is issued once the clock reaches this (see {@link setValidUntil}). */
  #validUntil = Number.POSITIVE_INFINITY;
  /**
   * Highest clock reading seen on the slow path. A reading below it proves the clock went back;
   * the fast path does not update it, so a rollback may go uncounted but is never invented.
   */
  #clockHigh: number;
  #rollbacks = 0;

  constructor(options: SnowflakeOptions) {
    if (options === null || typeof options !== 'object' || options.clock === undefined) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        'SnowflakeGenerator needs options with a clock (for example new MonotonicClock())',
      );
    }
    if (options.workerId === undefined) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        'SnowflakeGenerator needs a workerId, unique per running generator ' +
          '(or lease one: SnowflakeWorker.start({ registry }))',
      );
    }
    this.#clock = options.clock;
    this.layout = resolveLayout(options.layout);
    this.policy = resolveRollbackPolicy(options.rollback);
    const layout = this.layout;
    this.workerId = checkInteger('workerId', options.workerId, 0, layout.maxWorkerId, layout);
    this.datacenterId = checkInteger(
      'datacenterId',
      options.datacenterId ?? 0,
      0,
      layout.maxDatacenterId,
      layout,
    );
    // Half the sequence space at most, so a spread start always leaves room in its time unit.
    this.#spread = checkInteger(
      'sequenceSpread',
      options.sequenceSpread ?? layout.sequenceSpread,
      0,
      Math.floor((layout.maxSequence + 1) / 2),
      layout,
    );
    this.#random = options.random ?? Math.random;

    this.#epochMs = layout.epochMs;
    this.#unitMs = layout.timeUnitMs;
    this.#maxSequence = layout.maxSequence;
    this.#timeShift = BigInt(layout.timeShift);
    this.#node = nodeBits(layout, this.workerId, this.datacenterId);
    this.#maxLeadUnits =
      this.policy.name === 'borrow' ? Math.floor(this.policy.maxLeadMs / this.#unitMs) : 0;
    this.#historyUnits = Math.max(1, Math.ceil(this.policy.historyMs / this.#unitMs));
    if (this.policy.name === 'history') {
      this.#ringSequence = new Int32Array(this.#historyUnits + 1);
      this.#ringUnit = new Float64Array(this.#historyUnits + 1).fill(-1);
    }

    const now = this.#clock.now();
    if (layout.epochMs > now) {
      throw new IdMintError(
        'LAYOUT_INVALID',
        `layout "${layout.name}": epoch ${iso(layout.epochMs)} is in the future (clock ` +
          `reads ${iso(now)})`,
      );
    }
    if (now >= layout.expiresAtMs) throw this.#timeOverflow();

    // A restarted worker starts as if its last unit were used up, so its first ID lands in a
    // later unit, and the rollback policy judges a clock that is behind it.
    if (options.lastTimestamp === undefined) {
      this.#lastUnit = -1;
      this.#sequence = this.#maxSequence;
    } else {
      const last = checkInteger(
        'lastTimestamp',
        options.lastTimestamp,
        0,
        Number.MAX_SAFE_INTEGER,
        layout,
      );
      this.#lastUnit = Math.max(-1, this.#unitOf(last));
      this.#sequence = this.#maxSequence;
    }
    this.#clockHigh = options.lastTimestamp ?? 0;
    this.#highUnit = this.#lastUnit;
    this.#historyFloor = this.#lastUnit;
    this.#fastFloor = this.#lastUnit - this.#maxLeadUnits;
  }

  /** The next ID. Throws CLOCK_MOVED_BACKWARDS, TIME_OVERFLOW or LEASE_LOST, never repeats. */
  next(): bigint {
    const now = this.#clock.now();
    const unit = Math.floor((now - this.#epochMs) / this.#unitMs);
    if (
      unit <= this.#lastUnit &&
      unit >= this.#fastFloor &&
      this.#sequence < this.#maxSequence &&
      now < this.#validUntil
    ) {
      this.#sequence++;
      return (this.#lastId += 1n);
    }
    return this.#nextSlow(now, unit, true);
  }

  /** The next ID as a decimal string, the form to put on the wire (IDs exceed 2^53). */
  nextString(): string {
    return this.next().toString();
  }

  /**
   * `count` IDs, strictly increasing. IDs that share a time unit are taken in one step, without
   * reading the clock for each.
   */
  nextBatch(count: number): bigint[] {
    if (!Number.isSafeInteger(count) || count < 1 || count > 10_000_000) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `count must be an integer from 1 to 10000000, got ${String(count)}`,
      );
    }
    const ids = new Array<bigint>(count);
    let i = 0;
    while (i < count) {
      i = this.nextReady(ids, i, count);
      // The current unit is used up: next() waits for the clock (blocking the thread), as ever.
      if (i < count) i = this.#fillUnit(ids, i, count, this.next());
    }
    return ids;
  }

  /**
   * Fills `ids[from]` up to `ids[to - 1]` with IDs that can be issued now, without waiting for the
   * clock, and returns the index after the last one filled: `to` when all could be, less (maybe
   * `from`) when the current time unit's sequence is used up and the clock has not reached the
   * next unit yet, or the clock went back by what the `wait` policy waits out. {@link readyAt}
   * then tells when to ask again; a caller that can wait without blocking (an async batch)
   * waits and calls again, and never blocks the thread. Throws as {@link next}.
   */
  nextReady(ids: bigint[], from: number, to: number): number {
    let i = from;
    while (i < to) {
      const now = this.#clock.now();
      const unit = Math.floor((now - this.#epochMs) / this.#unitMs);
      let id: bigint;
      if (
        unit <= this.#lastUnit &&
        unit >= this.#fastFloor &&
        this.#sequence < this.#maxSequence &&
        now < this.#validUntil
      ) {
        this.#sequence++;
        id = this.#lastId += 1n;
      } else {
        id = this.#nextSlow(now, unit, false);
        if (id < 0n) break;
      }
      i = this.#fillUnit(ids, i, to, id);
    }
    return i;
  }

  /**
   * The clock time (ms) from which {@link next} issues without waiting: the start of the next
   * time unit once the current one is used up (for `borrow`, the unit its lead allows), else the
   * current unit's (later than the clock only after a rollback). May be in the past.
   */
  readyAt(): number {
    const ahead = this.#sequence < this.#maxSequence ? 0 : 1;
    return this.#unitStart(this.#lastUnit + ahead - this.#maxLeadUnits);
  }

  /**
   * Puts `id`, just issued in #lastUnit, at `ids[i]`, then as much of the rest of that unit's
   * sequence as `to` allows, without a clock read: they share the instant `id` was issued at.
   */
  #fillUnit(ids: bigint[], i: number, to: number, id: bigint): number {
    ids[i++] = id;
    const room = Math.min(to - i, this.#maxSequence - this.#sequence);
    for (let k = 0; k < room; k++) ids[i++] = ++id;
    this.#sequence += room;
    this.#lastId = id;
    return i;
  }

  /**
   * Fencing: refuse with LEASE_LOST once the clock reaches `ms` (ms since the Unix epoch). A
   * worker registry sets this to its lease expiry minus a safety margin and moves it forwards on
   * each renewal, so a node that cannot renew stops issuing before its worker ID can be handed to
   * another node. `Infinity` lifts the fence.
   */
  setValidUntil(ms: number): void {
    if (Number.isNaN(ms))
      throw new IdMintError('INVALID_ARGUMENT', 'validUntil must be a number of ms, got NaN');
    this.#validUntil = ms;
  }

  /** The fencing deadline set by {@link setValidUntil}; Infinity when none. */
  validUntil(): number {
    return this.#validUntil;
  }

  /**
   * Start (ms since the Unix epoch) of the latest time unit used so far, or of `lastTimestamp`;
   * -1 if neither. A worker registry records this so the next holder of the worker ID starts later.
   */
  lastTimestamp(): number {
    return this.#highUnit < 0 ? -1 : this.#unitStart(this.#highUnit);
  }

  /**
   * How many calls found the clock behind a time it had shown before (or behind `lastTimestamp`).
   */
  rollbackCount(): number {
    return this.#rollbacks;
  }

  /**
   * Everything the fast path does not cover. With `wait` false it never blocks: where it would
   * wait for the clock it returns -1n instead (no ID is negative), having issued nothing.
   */
  #nextSlow(now: number, unit: number, wait: boolean): bigint {
    const policy = this.policy.name;
    if (now < this.#clockHigh) this.#rollbacks++;
    else this.#clockHigh = now;
    for (;;) {
      if (now >= this.#validUntil) {
        throw new IdMintError(
          'LEASE_LOST',
          `worker ${this.workerId} is fenced: its lease is not confirmed past ` +
            `${iso(this.#validUntil)}; no ID is issued until it is renewed`,
          {
            details: { workerId: this.workerId, validUntil: this.#validUntil },
          },
        );
      }
      if (unit < 0) {
        throw new IdMintError(
          'CLOCK_MOVED_BACKWARDS',
          `clock reads ${iso(now)}, before the epoch of layout "${this.layout.name}" ` +
            `(${iso(this.#epochMs)})`,
          {
            details: { offsetMs: this.#epochMs - now, policy },
          },
        );
      }
      if (unit < this.#lastUnit) {
        if (
          policy === 'history' &&
          unit > this.#historyFloor &&
          this.#highUnit - unit <= this.#historyUnits
        ) {
          this.#enter(unit, true);
        } else if (policy === 'wait') {
          const offset = this.#unitStart(this.#lastUnit) - now;
          if (offset > this.policy.maxBackwardMs) throw this.#backwards(now);
          if (!wait) return -1n;
          // Leaf's rule: wait twice the offset, look once more, refuse if still behind.
          this.#clock.sleep(offset * 2);
          now = this.#clock.now();
          unit = this.#unitOf(now);
          if (unit < this.#lastUnit) throw this.#backwards(now);
          continue;
        } else if (policy !== 'borrow') {
          throw this.#backwards(now);
        } else if (this.#lastUnit - unit > this.#maxLeadUnits) {
          if (!wait) {
            // A caller that waits without blocking may wait as long as next() would, no longer:
            // a clock further behind than the lead plus maxWaitMs is refused now, as next()
            // refuses it once its wait is spent.
            if (this.#unitStart(this.#lastUnit - this.#maxLeadUnits) - now > this.policy.maxWaitMs)
              throw this.#backwards(now);
            return -1n;
          }
          now = this.#waitForUnit(this.#lastUnit - this.#maxLeadUnits, this.policy.maxWaitMs);
          unit = this.#unitOf(now);
          continue;
        }
        // borrow, within its lead: keep issuing on #lastUnit below.
      } else if (unit > this.#lastUnit) {
        this.#enter(unit, true);
      }

      if (this.#sequence < this.#maxSequence) {
        this.#sequence++;
        return (this.#lastId += 1n);
      }

      // The sequence of #lastUnit is used up. `borrow` moves to the next unit at once (the loop
      // then waits for the clock if that puts it past the lead); the others wait for the clock.
      if (policy === 'borrow') {
        this.#enter(this.#lastUnit + 1, false);
        continue;
      }
      if (!wait) return -1n;
      now = this.#waitForUnit(this.#lastUnit + 1, this.#unitMs + this.policy.maxWaitMs);
      unit = this.#unitOf(now);
    }
  }

  /** Makes `unit` the current one, its next sequence ready to issue. */
  #enter(unit: number, spread: boolean): void {
    if (unit > this.layout.maxTimeUnits) throw this.#timeOverflow();
    const ring = this.#ringSequence;
    const ringUnit = this.#ringUnit;
    let first = spread && this.#spread > 0 ? Math.floor(this.#random() * this.#spread) : 0;
    if (ring !== undefined && ringUnit !== undefined) {
      if (this.#lastUnit >= 0) {
        const slot = this.#lastUnit % ring.length;
        ring[slot] = this.#sequence;
        ringUnit[slot] = this.#lastUnit;
      }
      // Only `history` comes back to a unit it used before: continue that unit's sequence.
      if (unit <= this.#highUnit) {
        const slot = unit % ring.length;
        if (ringUnit[slot] === unit) first = (ring[slot] ?? this.#maxSequence) + 1;
      }
    }
    if (unit > this.#highUnit) this.#highUnit = unit;
    this.#lastUnit = unit;
    this.#sequence = first - 1;
    this.#lastId = ((BigInt(unit) << this.#timeShift) | this.#node) + BigInt(first) - 1n;
    this.#fastFloor = unit - this.#maxLeadUnits;
  }

  /**
   * Blocks until the clock reaches `targetUnit`. Returns early if the clock steps back meanwhile
   * (the rollback policy then decides); throws CLOCK_MOVED_BACKWARDS after `maxWaitMs`.
   */
  #waitForUnit(targetUnit: number, maxWaitMs: number): number {
    const start = this.#clock.now();
    let now = start;
    while (this.#unitOf(now) < targetUnit) {
      if (now < start) return now;
      if (now - start > maxWaitMs) throw this.#backwards(now);
      // Never ask for more than the rest of the budget: a manual clock jumps by what is asked.
      this.#clock.sleep(Math.min(this.#unitStart(targetUnit) - now, maxWaitMs - (now - start) + 1));
      now = this.#clock.now();
    }
    return now;
  }

  #unitOf(ms: number): number {
    return Math.floor((ms - this.#epochMs) / this.#unitMs);
  }

  #unitStart(unit: number): number {
    return this.#epochMs + unit * this.#unitMs;
  }

  #backwards(now: number): IdMintError {
    const last = this.#unitStart(this.#lastUnit);
    const offset = last - now;
    const p = this.policy;
    const tolerance =
      p.name === 'wait'
        ? `tolerates up to ${p.maxBackwardMs} ms`
        : p.name === 'borrow'
          ? `leads the clock by at most ${p.maxLeadMs} ms and waits at most ${p.maxWaitMs} ms`
          : p.name === 'history'
            ? `continues only inside its ${p.historyMs} ms window`
            : 'refuses any rollback';
    return new IdMintError(
      'CLOCK_MOVED_BACKWARDS',
      `clock moved backwards: it reads ${iso(now)}, ${offset} ms behind the last timestamp ` +
        `used (${iso(last)}); policy "${p.name}" ${tolerance}`,
      { details: { offsetMs: offset, policy: p.name, workerId: this.workerId } },
    );
  }

  #timeOverflow(): IdMintError {
    const l = this.layout;
    return new IdMintError(
      'TIME_OVERFLOW',
      `layout "${l.name}" ran out of time at ${iso(l.expiresAtMs)}: its ${l.timeBits}-bit ` +
        `time field counts ${l.timeUnitMs} ms units from ${iso(l.epochMs)}`,
      { details: { layout: l.name, expiresAtMs: l.expiresAtMs } },
    );
  }
}

function checkInteger(
  name: string,
  value: unknown,
  min: number,
  max: number,
  layout: Layout,
): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${name} must be an integer from ${min} to ${max} for layout "${layout.name}", got ` +
        `${String(value)}`,
    );
  }
  return value;
}
