import { IdMintError } from './errors.ts';

/**
 * What a snowflake generator does when the clock reads earlier than the last timestamp it used.
 * See docs/layouts.md for the trade-offs.
 *
 * - `refuse`: throw CLOCK_MOVED_BACKWARDS at once, with the size of the jump.
 * - `wait`: Meituan Leaf's rule: a rollback of at most `maxBackwardMs` is waited out (twice the
 *   offset, then one more look); a larger one is refused. The default.
 * - `borrow`: time never goes back: keep issuing on the last timestamp and, when its sequence runs
 *   out, on the next one ("borrowing future time", Baidu CachedUidGenerator, Seata), as long as
 *   the issued time leads the clock by at most `maxLeadMs`; past that, wait up to `maxWaitMs` for
 *   the clock, then refuse.
 * - `history`: remember the last sequence of each of the last `historyMs` of time units; after a
 *   rollback inside that window, continue those sequences. Unique, but IDs issued after a rollback
 *   are smaller than those before it: the one policy that gives up strict order.
 */
export type RollbackPolicyName = 'refuse' | 'wait' | 'borrow' | 'history';

/** The policy names, in documentation order. */
export const ROLLBACK_POLICIES: readonly RollbackPolicyName[] = [
  'refuse',
  'wait',
  'borrow',
  'history',
];

/** Options for choosing and tuning a rollback policy; unset bounds take the defaults below. */
export interface RollbackPolicyOptions {
  /** Default `wait`. */
  readonly policy?: RollbackPolicyName;
  /** `wait`: largest rollback (ms) that is waited out. Default 5 (Leaf's hard-coded value). */
  readonly maxBackwardMs?: number;
  /**
   * `borrow`: how far (ms) issued time may run ahead of the clock. Default 1000 (a leap second).
   */
  readonly maxLeadMs?: number;
  /**
   * `borrow`: how long (ms) to block waiting for the clock once the lead is used up. Default 10.
   */
  readonly maxWaitMs?: number;
  /** `history`: window (ms) of time units whose last sequence is remembered. Default 2000. */
  readonly historyMs?: number;
}

/** A validated policy with every bound filled in. */
export interface RollbackPolicy {
  readonly name: RollbackPolicyName;
  readonly maxBackwardMs: number;
  readonly maxLeadMs: number;
  readonly maxWaitMs: number;
  readonly historyMs: number;
  /** False only for `history`: after a rollback its IDs are unique but not increasing. */
  readonly monotonic: boolean;
}

export const DEFAULT_ROLLBACK_POLICY: RollbackPolicyName = 'wait';

// Waits block the calling thread (the generator is synchronous, so it stays a counter increment on
// the hot path); an hour-long wait would freeze a server, which is Sonyflake's sleep bug. These
// caps keep every wait short enough to be invisible next to a network round trip. Exported so the
// server configuration states the same bounds.
export const ROLLBACK_LIMITS = {
  maxBackwardMs: { fallback: 5, max: 1000 },
  maxLeadMs: { fallback: 1000, max: 86_400_000 },
  maxWaitMs: { fallback: 10, max: 1000 },
  historyMs: { fallback: 2000, max: 600_000 },
} as const;

/** Validates options and fills defaults; a bad value is INVALID_ARGUMENT naming it. */
export function resolveRollbackPolicy(options: RollbackPolicyOptions = {}): RollbackPolicy {
  const name = options.policy ?? DEFAULT_ROLLBACK_POLICY;
  if (!ROLLBACK_POLICIES.includes(name)) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `rollback policy must be one of ${ROLLBACK_POLICIES.join(', ')}, got "${String(name)}"`,
    );
  }
  const bound = (key: keyof typeof ROLLBACK_LIMITS): number => {
    const value = options[key] ?? ROLLBACK_LIMITS[key].fallback;
    if (!Number.isInteger(value) || value < 0 || value > ROLLBACK_LIMITS[key].max) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `rollback ${key} must be an integer from 0 to ${ROLLBACK_LIMITS[key].max} ms, got ` +
          `${String(value)}`,
      );
    }
    return value;
  };
  return Object.freeze({
    name,
    maxBackwardMs: bound('maxBackwardMs'),
    maxLeadMs: bound('maxLeadMs'),
    maxWaitMs: bound('maxWaitMs'),
    historyMs: bound('historyMs'),
    monotonic: name !== 'history',
  });
}
