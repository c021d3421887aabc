import { IdMintError } from '../core/errors.ts';
import type { SnowflakeGenerator } from '../core/snowflake.ts';
import type { Clock } from '../ports/clock.ts';
import type { Timers } from '../ports/timers.ts';
import type {
  NodeIdentity,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from '../ports/worker-registry.ts';
import { withTimeout } from '../shared/timeout.ts';
import {
  DEFAULT_RENEW_INTERVAL_MS,
  MAX_START_WAIT_MS,
  leaseRenewIntervalMs,
} from '../core/lease-policy.ts';
import { iso } from '../core/time.ts';
import { sleep } from '../shared/time.ts';

// One lease and the generator issuing under it: how it is taken (acquire, clock checks, a first
// horizon) and how it is renewed. What happens over time between leases (which transition runs
// when, losing and recovering) is the LeaseHolder's (lease-holder.ts).

/** A lease and the generator issuing under it. */
export interface Holding {
  readonly lease: WorkerLease;
  readonly generator: SnowflakeGenerator;
  /** The highest lastTimestamp recorded for this lease (by us or, before us, by the registry). */
  recorded: number;
  /** Set when the holding stops issuing for good (lost, switched away from, closed). */
  retired: boolean;
  /** Why the registry said the lease is gone; undefined while it is held. */
  lost: IdMintError | undefined;
}

/** The fixed terms every lease of one worker is taken and renewed on. */
export interface LeaseTerms {
  readonly registry: WorkerRegistry;
  readonly identity: NodeIdentity;
  /** Every time in the lease logic is read from this clock. */
  readonly clock: Clock;
  /**
   * Renewal timers, request timeouts and waits for the clock: the host's (`systemTimers`), or
   * virtual ones in the simulation (test/support/sim/).
   */
  readonly timers: Timers;
  /** Worker IDs 0 to maxWorkers - 1 may be leased (2^workerBits of the layout). */
  readonly maxWorkers: number;
  /** The generator stops this long before the lease could expire. */
  readonly marginMs: number;
  /** How far a `borrow` generator may issue ahead of its clock; 0 for the other policies. */
  readonly leadMs: number;
  /** The configured renewal interval; undefined: derived from the TTL (see renewIntervalFor). */
  readonly renewIntervalMs: number | undefined;
  /**
   * `switch-worker`: a clock behind a worker ID's record moves to another ID instead of refusing.
   */
  readonly switchWorker: boolean;
  /** A generator for a worker ID, starting after `lastTimestamp` (when given). */
  readonly createGenerator: (
    workerId: number,
    lastTimestamp: number | undefined,
  ) => SnowflakeGenerator;
}

/** What establishing a lease needs from the one holding leases over time. */
export interface EstablishContext {
  /**
   * The last timestamp this process reached with a worker ID, should it get that ID back; -1 if
   * none.
   */
  highWater(workerId: number): number;
  /** True once the worker is closing: a wait for the clock gives up. */
  closing(): boolean;
  /** A switch-worker move at start-up happened (for the counters and the log). */
  switched(message: string): void;
  /** Say something to the log. */
  waiting(workerId: number, message: string): void;
}

/** Extra conditions when acquiring, for `switch-worker`. */
export interface Wanted {
  readonly exclude?: readonly number[];
  readonly lastTimestampBelow?: number;
}

/** The renewal interval for a lease; throws INVALID_ARGUMENT if its TTL cannot hold two of them. */
export function renewIntervalFor(terms: LeaseTerms, lease: WorkerLease): number {
  return leaseRenewIntervalMs(lease.ttlMs, {
    renewIntervalMs: terms.renewIntervalMs,
    safetyMarginMs: terms.marginMs,
  });
}

/** How long to wait before trying again after a failed recovery or switch. */
export function retryIntervalFor(terms: LeaseTerms): number {
  return terms.renewIntervalMs ?? DEFAULT_RENEW_INTERVAL_MS;
}

/**
 * Acquire, check the clock, create the generator (fenced), record a horizon, then unfence. On
 * any failure the lease is released with its record as found: nothing was issued under it.
 */
export async function establishHolding(
  terms: LeaseTerms,
  context: EstablishContext,
  wanted: Wanted,
): Promise<Holding> {
  const { registry, clock } = terms;
  const { exclude, lastTimestampBelow } = wanted;
  const lease = await registry.acquire({
    identity: terms.identity,
    maxWorkers: terms.maxWorkers,
    exclude,
    lastTimestampBelow,
  });
  try {
    const now = clock.now();
    // switch-worker asks for IDs last used before the clock (lastTimestampBelow): such an ID
    // is safe at once, whatever a previous holder's clock read when it reported.
    if (lease.reportedAt >= 0 && now < lease.reportedAt && lastTimestampBelow === undefined) {
      const behind = clockBehind(registry.backend, lease, now);
      if (!terms.switchWorker) throw behind;
      return await switchAtStart(terms, context, lease, behind);
    }
    await waitForClock(terms, context, lease);
    const lastTimestamp = Math.max(lease.lastTimestamp, context.highWater(lease.workerId));
    const generator = terms.createGenerator(
      lease.workerId,
      lastTimestamp >= 0 ? lastTimestamp : undefined,
    );
    // Nothing is issued until the registry has recorded a horizon above it.
    generator.setValidUntil(Number.NEGATIVE_INFINITY);
    const holding: Holding = {
      lease,
      generator,
      recorded: lease.lastTimestamp,
      retired: false,
      lost: undefined,
    };
    await renewHolding(terms, holding);
    return holding;
  } catch (error) {
    // Leave the record as we found it: nothing was issued under this lease.
    await lease.release(unchanged(lease)).catch(() => {});
    throw error;
  }
}

/**
 * Renews the lease, reporting a horizon: everything the generator can issue before the new
 * fence. Only once the registry confirms is the fence moved up to it. Returns the clock reading
 * the renewal was sent at when it moved the fence, undefined when the holding was retired
 * meanwhile (a renewal that finishes after its holding was lost, switched or closed must not
 * lift the fence that retired it).
 */
export async function renewHolding(
  terms: LeaseTerms,
  holding: Holding,
): Promise<number | undefined> {
  const t0 = terms.clock.now();
  const { lease, generator } = holding;
  const fence = t0 + lease.ttlMs - terms.marginMs;
  const horizon = Math.max(fence + terms.leadMs, generator.lastTimestamp(), holding.recorded);
  const renewal = lease.renew({ lastTimestamp: horizon, reportedAt: t0 });
  const granted = await withTimeout(
    renewal,
    Math.max(1000, renewIntervalFor(terms, lease)),
    () =>
      new IdMintError(
        'REGISTRY_UNAVAILABLE',
        `${terms.registry.backend} registry did not confirm the renewal of worker ` +
          `${lease.workerId} in time`,
      ),
    terms.timers,
  );
  holding.recorded = horizon;
  if (holding.retired) return undefined;
  // A TTL granted shorter than asked shortens the fence; a longer one never lifts it past the
  // horizon just recorded.
  generator.setValidUntil(Math.min(t0 + granted - terms.marginMs, horizon - terms.leadMs));
  return t0;
}

/** Stops a holding's generator for good. */
export function retire(holding: Holding): void {
  holding.retired = true;
  holding.generator.setValidUntil(Number.NEGATIVE_INFINITY);
}

/** What release records: the exact last timestamp, never below what the registry had. */
export function finalReport(holding: Holding, clock: Clock): WorkerReport {
  return {
    lastTimestamp: Math.max(holding.generator.lastTimestamp(), holding.lease.lastTimestamp),
    reportedAt: clock.now(),
  };
}

/** `switch-worker` at start-up: the clock is behind this ID's record, so take another ID. */
async function switchAtStart(
  terms: LeaseTerms,
  context: EstablishContext,
  lease: WorkerLease,
  behind: IdMintError,
): Promise<Holding> {
  let other: Holding;
  try {
    other = await establishHolding(terms, context, {
      exclude: [lease.workerId],
      lastTimestampBelow: terms.clock.now(),
    });
  } catch (error) {
    throw new IdMintError(
      'CLOCK_MOVED_BACKWARDS',
      `${behind.message}; switch-worker found no other worker ID to use ` +
        `(${(error as Error).message})`,
      {
        cause: error,
        details: behind.details,
      },
    );
  }
  await lease.release(unchanged(lease)).catch(() => {});
  context.switched(
    `${behind.message}; switched to worker ${other.lease.workerId}, last used before the clock`,
  );
  return other;
}

/**
 * The previous holder reserved up to `lease.lastTimestamp` (a horizon above anything it could
 * issue). The clock is not behind its reports, so this is no clock fault, only the end of its
 * reservation, as after a kill: wait (without blocking the event loop) until the clock passes,
 * keeping the lease alive meanwhile with the record left as it is.
 */
async function waitForClock(
  terms: LeaseTerms,
  context: EstablishContext,
  lease: WorkerLease,
): Promise<void> {
  const { clock } = terms;
  const intervalMs = renewIntervalFor(terms, lease);
  let now = clock.now();
  if (now > lease.lastTimestamp) return;
  const waitMs = lease.lastTimestamp - now;
  if (waitMs > MAX_START_WAIT_MS) throw clockBehind(terms.registry.backend, lease, now);
  context.waiting(
    lease.workerId,
    `worker ${lease.workerId}: waiting ${waitMs} ms for the clock to pass ` +
      `${iso(lease.lastTimestamp)}, the horizon its previous holder reserved`,
  );
  let renewedAt = now;
  while (now <= lease.lastTimestamp) {
    if (context.closing())
      throw new IdMintError('LEASE_LOST', 'the worker was closed while starting');
    if (now - renewedAt >= intervalMs) {
      renewedAt = now;
      await lease.renew(unchanged(lease));
    }
    await sleep(Math.min(lease.lastTimestamp - now + 1, 250), terms.timers);
    now = clock.now();
  }
}

function clockBehind(backend: string, lease: WorkerLease, now: number): IdMintError {
  const offset = lease.reportedAt - now;
  return new IdMintError(
    'CLOCK_MOVED_BACKWARDS',
    `worker ${lease.workerId}: the local clock reads ${iso(now)}, ${offset} ms behind ` +
      `${iso(lease.reportedAt)}, the time its previous holder's clock showed at its last report ` +
      `to the ${backend} registry (its IDs reach ${iso(lease.lastTimestamp)})`,
    {
      details: {
        workerId: lease.workerId,
        clockMs: now,
        recordedMs: lease.reportedAt,
        lastTimestamp: lease.lastTimestamp,
        offsetMs: offset,
      },
    },
  );
}

/** A report that leaves a lease's record as the registry had it. */
function unchanged(lease: WorkerLease): WorkerReport {
  return { lastTimestamp: lease.lastTimestamp, reportedAt: lease.reportedAt };
}
