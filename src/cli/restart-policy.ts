/**
 * When the supervisor of `idmint serve --processes N` restarts a child that ended, and when it
 * gives up. A child that cannot start (a configuration file broken since the start, a store that
 * refuses, a port taken meanwhile) must neither be restarted in a hot loop that burns the cores
 * its siblings serve on, nor forever: after {@link MAX_FAILURES_IN_A_ROW} the supervisor stops
 * every child and exits, so the outer supervisor (systemd, Kubernetes) sees the failure and
 * applies its own policy, and an operator sees the cause.
 */

/** The first restart of a slot waits this long, each further failure in a row twice as long. */
export const FIRST_RESTART_MS = 100;
/** A child that served this long ended for a new reason: its end starts a new count. */
export const HEALTHY_AFTER_MS = 30_000;
/**
 * Ends in a row (each before {@link HEALTHY_AFTER_MS} of serving) after which the supervisor gives
 * up: the waits before are 100 ms to 1.6 s, 3.1 s in all, plus the failed starts' own time. Like
 * systemd's default start limit (5 starts in 10 s), it is about a child that cannot run, not
 * about an outage to ride out: that is the outer supervisor's, which restarts the whole node.
 */
export const MAX_FAILURES_IN_A_ROW = 6;

/** What to do about a slot whose child ended: restart after `delayMs`, or give up. */
export type RestartDecision =
  | { readonly failures: number; readonly delayMs: number }
  | { readonly failures: number; readonly giveUp: true };

/**
 * `failures`: the slot's ends in a row so far; `servedMs`: how long the child that ended served
 * (0 if it never listened).
 */
export function decideRestart(failures: number, servedMs: number): RestartDecision {
  const inARow = servedMs >= HEALTHY_AFTER_MS ? 1 : failures + 1;
  if (inARow >= MAX_FAILURES_IN_A_ROW) return { failures: inARow, giveUp: true };
  return { failures: inARow, delayMs: FIRST_RESTART_MS * 2 ** (inARow - 1) };
}
