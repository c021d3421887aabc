// The cluster-order promise as a check over recorded answers: for any two answers A and B where
// B's request was sent after A's answer arrived, every ID of B is greater than every ID of A.

/** One answer as a client saw it: when its request left and its answer came, its IDs' range. */
export interface TimedAnswer {
  /** performance.now() when the request was sent. */
  readonly sent: number;
  /** performance.now() when the whole answer had arrived. */
  readonly received: number;
  readonly min: bigint;
  readonly max: bigint;
  /** Which node answered (for the message). */
  readonly node: string;
}

/** A pair breaking the promise: `later` was sent after `earlier` arrived, yet is not above it. */
export interface OrderViolation {
  readonly earlier: TimedAnswer;
  readonly later: TimedAnswer;
}

/**
 * The pairs (A, B) with B.sent > A.received and min(B) <= max(A), one per B (against the A with
 * the greatest max among those received before B was sent), in O(n log n): answers sorted by
 * arrival with a running maximum, each B finding the last arrival before its send by binary
 * search.
 */
export function orderViolations(answers: readonly TimedAnswer[]): OrderViolation[] {
  const byArrival = [...answers].sort((a, b) => a.received - b.received);
  // best[i]: the answer with the greatest max among byArrival[0..i].
  const best: TimedAnswer[] = [];
  for (const answer of byArrival) {
    const previous = best.at(-1);
    best.push(previous !== undefined && previous.max >= answer.max ? previous : answer);
  }
  const violations: OrderViolation[] = [];
  for (const later of answers) {
    // The last answer that arrived strictly before `later` was sent.
    let low = 0;
    let high = byArrival.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if ((byArrival[middle] as TimedAnswer).received < later.sent) low = middle + 1;
      else high = middle;
    }
    if (low === 0) continue;
    const earlier = best[low - 1] as TimedAnswer;
    if (later.min <= earlier.max) violations.push({ earlier, later });
  }
  return violations;
}

/** IDs that appear in more than one answer (or twice in one), at most `limit` of them. */
export function repeatedIds(ids: Iterable<bigint>, limit = 10): bigint[] {
  const seen = new Set<bigint>();
  const repeated: bigint[] = [];
  for (const id of ids) {
    if (seen.has(id)) {
      repeated.push(id);
      if (repeated.length >= limit) break;
    }
    seen.add(id);
  }
  return repeated;
}

/** One line per violation, for an assertion message. */
export function describeViolations(violations: readonly OrderViolation[], limit = 5): string {
  return violations
    .slice(0, limit)
    .map(
      ({ earlier: a, later: b }) =>
        `answer [${b.min}..${b.max}] from ${b.node} sent at ${b.sent.toFixed(1)} ms, after ` +
        `[${a.min}..${a.max}] from ${a.node} arrived at ${a.received.toFixed(1)} ms`,
    )
    .join('\n');
}
