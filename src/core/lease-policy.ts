import { IdMintError } from './errors.ts';

/**
 * The numbers and the one rule of a worker-ID lease, pure so that the worker that keeps the lease
 * (service/) and the configuration that checks its keys before anything opens (config/) read the
 * same ones. docs/workers.md explains the lease.
 */

/** How often the lease is renewed by default: Leaf reports every 3 s. */
export const DEFAULT_RENEW_INTERVAL_MS = 3000;
/** The generator stops this long before the lease could expire. */
export const DEFAULT_SAFETY_MARGIN_MS = 1000;
/** Leaf's threshold against the mean of the other nodes' clocks. */
export const DEFAULT_MAX_PEER_SKEW_MS = 5000;
/**
 * How long a request that finds the generator fenced, while the renewal that would lift the fence
 * is due or in flight, waits for it (a stall of the process outran the renewal). 3 s: the longest
 * a renewal of the default 10 s lease may take before it counts as failed.
 */
export const DEFAULT_FENCED_WAIT_MS = 3000;
/** The longest wait at start-up for the clock to pass a previous holder's reservation. */
export const MAX_START_WAIT_MS = 600_000;

/** Bounds of the worker's options; the server configuration states the same ones. */
export const WORKER_OPTION_BOUNDS = {
  safetyMarginMs: { min: 0, max: 60_000 },
  maxPeerSkewMs: { min: 0, max: 86_400_000 },
  renewIntervalMs: { min: 10, max: 600_000 },
  waitTimeoutMs: { min: 0, max: 600_000 },
} as const;

/** How the start-up check against live peers' clocks acts on a skew above `maxPeerSkewMs`. */
export const PEER_CLOCK_CHECKS = ['refuse', 'warn', 'off'] as const;
export type PeerClockCheck = (typeof PEER_CLOCK_CHECKS)[number];

/**
 * How often a lease of `ttlMs` is renewed: `renewIntervalMs` if given, else 3000 ms shortened to a
 * third of what the TTL leaves after the safety margin. Throws INVALID_ARGUMENT unless the TTL
 * minus the margin holds at least two intervals.
 */
export function leaseRenewIntervalMs(
  ttlMs: number,
  options: { readonly renewIntervalMs?: number | undefined; readonly safetyMarginMs: number },
): number {
  const marginMs = options.safetyMarginMs;
  const usable = ttlMs - marginMs;
  const interval =
    options.renewIntervalMs ?? Math.min(DEFAULT_RENEW_INTERVAL_MS, Math.floor(usable / 3));
  if (interval < 1 || usable < 2 * interval) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `the lease TTL (${ttlMs} ms) minus safetyMarginMs (${marginMs}) must hold ` +
        `at least two renewals of ${interval} ms (renewIntervalMs)`,
    );
  }
  return interval;
}
