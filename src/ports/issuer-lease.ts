/**
 * Who issues a cluster-ordered tag (docs/segments.md, Cluster order): one node at a time, chosen
 * by a lease kept in the tag's own store (a table beside the tag's row on SQL, a key beside its
 * hash on Redis, the first database of a set). A segment store that supports `ordering: cluster`
 * implements this port; one that does not refuses such a tag at creation.
 *
 * The lease is timed by the store's own clock (SQL `now()`, Redis `TIME`), never by a node's: a
 * claim succeeds only when no lease is live by that clock. The holder measures the TTL with its own
 * monotonic clock from before it sent the request, and stops issuing (fences itself) a margin
 * before that, so that with clocks drifting within the bound the old holder's last answer comes
 * before the new holder's claim lands. Every claim raises the tag's `epoch` by one; renew and
 * release succeed only for the epoch they were given, so a late renewal of an old holding never
 * extends a newer one.
 */

/** A live lease as the store reports it. */
export interface IssuerLease {
  readonly tag: string;
  /** The holder's node ID (unique per process run: host, port and a random part). */
  readonly node: string;
  /** Where other nodes reach the holder (`http://host:port`), as it claimed; may be empty. */
  readonly address: string;
  /** Raised by one on every successful claim; never reused for the tag. */
  readonly epoch: bigint;
  /** How long the lease runs from when the store handled the request, in ms. */
  readonly ttlMs: number;
}

/** What {@link IssuerLeases.claimIssuer} found when the lease was held by someone else. */
export interface IssuerBusy {
  readonly held: false;
  /** The live holder, for forwarding. */
  readonly node: string;
  readonly address: string;
  readonly epoch: bigint;
  /** How long the holder's lease still runs by the store's clock, in ms (>= 0). */
  readonly remainingMs: number;
}

export interface IssuerLeases {
  /**
   * Takes the tag's issuer lease if no live lease exists by the store's clock (expired or never
   * held, or held by this very `node`, which then gets a new epoch), in one atomic step. Resolves
   * `{ held: true, lease }` on success, or the live holder. Throws TAG_NOT_FOUND,
   * STORE_UNAVAILABLE (outcome unknown: the caller must act as if another node might hold it).
   */
  claimIssuer(
    tag: string,
    node: string,
    address: string,
    ttlMs: number,
  ): Promise<{ readonly held: true; readonly lease: IssuerLease } | IssuerBusy>;

  /**
   * Extends the lease by `ttlMs` from when the store handles the request, only if the tag's
   * lease is still `epoch` held by `node` and not expired, and never to end earlier than it did
   * (a renewal the holder never heard back from may land after one that granted more). Throws
   * LEASE_LOST otherwise (never retry it), STORE_UNAVAILABLE (retry; a late landing is
   * harmless).
   */
  renewIssuer(tag: string, node: string, epoch: bigint, ttlMs: number): Promise<void>;

  /**
   * Ends the lease at once, only if it is still `epoch` held by `node` (else a no-op). The caller
   * has stopped issuing first. Throws STORE_UNAVAILABLE.
   */
  releaseIssuer(tag: string, node: string, epoch: bigint): Promise<void>;

  /** The live holder by the store's clock, or undefined. Throws STORE_UNAVAILABLE. */
  currentIssuer(tag: string): Promise<IssuerBusy | undefined>;
}
