import { IdMintError, isIdMintError } from '../core/errors.ts';
import type { PeerClockCheck } from '../core/lease-policy.ts';
import { iso } from '../core/time.ts';
import type { Clock } from '../ports/clock.ts';
import type { PeerTime, WorkerRegistry } from '../ports/worker-registry.ts';
import type { LeaseEvent } from './lease-holder.ts';

/** What the start-up check found comparing this node's clock with its live peers'. */
export interface PeerClockReport {
  /** `refuse`, `warn`: as configured (`off` runs no check, so no report). */
  readonly check: PeerClockCheck;
  /** Clock time of the comparison. */
  readonly checkedAt: number;
  /** Live peers compared with (0: none was running, so there was nothing to compare). */
  readonly peers: number;
  /** This clock minus the mean of the peers' clocks, in ms; null with no peers or when skipped. */
  readonly offsetMs: number | null;
  readonly maxPeerSkewMs: number;
  /** Why the comparison could not run (the registry could not list peers); null when it ran. */
  readonly skipped: string | null;
}

/** What the check needs: where the peers are listed, this node's clock, and the rule. */
export interface PeerClockTerms {
  readonly registry: WorkerRegistry;
  readonly clock: Clock;
  /** `refuse` throws CLOCK_SKEW past the limit; `warn` reports it as an event. */
  readonly check: Exclude<PeerClockCheck, 'off'>;
  readonly maxPeerSkewMs: number;
}

/** The check's report, and the event a log should show (`peer-check-skipped`, -`clock-skew`). */
export interface PeerClockOutcome {
  readonly report: PeerClockReport;
  readonly event: LeaseEvent | undefined;
}

/**
 * The start-up comparison of this clock with the mean of the live peers' clocks (each peer's
 * last report plus how long ago the coordinator received it). Throws CLOCK_SKEW past
 * `maxPeerSkewMs` under `refuse`, and what listing the peers threw unless it is
 * REGISTRY_UNAVAILABLE (then the check is skipped: the check against the record still runs).
 * Used by SnowflakeWorker.start before it holds a lease, and by the lease simulation.
 */
export async function checkPeerClocks(terms: PeerClockTerms): Promise<PeerClockOutcome> {
  const { registry, clock, check, maxPeerSkewMs } = terms;
  const report: PeerClockReport = {
    check,
    checkedAt: clock.now(),
    peers: 0,
    offsetMs: null,
    maxPeerSkewMs,
    skipped: null,
  };
  let peers: PeerTime[];
  try {
    peers = await registry.peers();
  } catch (error) {
    // Only a coordinator can tell the peers' clocks. When it cannot (a start from the
    // weak-dependency cache), the check against the worker ID's own record still runs.
    if (!isIdMintError(error, 'REGISTRY_UNAVAILABLE')) throw error;
    const message =
      `could not compare the clock with the live peers' (${error.message}); starting on ` +
      `the check against the worker ID's record alone`;
    return {
      report: { ...report, skipped: error.message },
      event: { type: 'peer-check-skipped', workerId: -1, message, error },
    };
  }
  if (peers.length === 0) return { report, event: undefined };
  const now = clock.now();
  const mean = peers.reduce((sum, peer) => sum + peer.reportedAt + peer.ageMs, 0) / peers.length;
  const offset = Math.round(now - mean);
  const measured = { ...report, checkedAt: now, peers: peers.length, offsetMs: offset };
  if (Math.abs(offset) <= maxPeerSkewMs) return { report: measured, event: undefined };
  const error = new IdMintError(
    'CLOCK_SKEW',
    `the local clock reads ${iso(now)}, ${Math.abs(offset)} ms ` +
      `${offset < 0 ? 'behind' : 'ahead of'} the mean of ${peers.length} live peers' clocks ` +
      `(${iso(Math.round(mean))}); the limit is ${maxPeerSkewMs} ms (maxPeerSkewMs)`,
    {
      details: {
        clockMs: now,
        peersMeanMs: Math.round(mean),
        offsetMs: offset,
        peers: peers.length,
        limitMs: maxPeerSkewMs,
      },
    },
  );
  if (check === 'refuse') throw error;
  return {
    report: measured,
    event: { type: 'peer-clock-skew', workerId: -1, message: error.message, error },
  };
}
