/**
 * Where snowflake workers get their worker IDs: a lease on one ID, renewed while the node runs,
 * released on shutdown, and recycled only after its holder is gone. Implemented once per backend
 * under src/registries/<backend>/; every implementation passes the same conformance suite
 * (test/support/worker-registry-suite.ts). docs/workers.md explains the design.
 *
 * The registry keeps two numbers per worker ID, and they outlive every holder:
 *
 * - `lastTimestamp`: no ID with this worker ID has, or will ever have, a later timestamp than
 *   this unless a later holder records a higher value. A holder reports a horizon ahead of its
 *   clock while it runs (it is fenced at that horizon) and its exact last timestamp on release.
 * - `reportedAt`: the holder's clock when it made that report. A node whose clock reads earlier
 *   than this is refused at start-up; live holders' values feed the clock check against peers.
 *
 * Times are ms since the Unix epoch, read from the holder's Clock. Registries never read a clock
 * of their own for these values: the worker (src/service/snowflake-worker.ts) supplies them, so
 * tests can drive every clock fault through a ManualClock.
 *
 * **The lease-record invariant.** Uniqueness across the holders of one worker ID rests on one
 * rule: a new holder always starts from the record as it stands after its own claim, and the
 * record never goes down while a holder runs. Every backend keeps it, whatever the order in which
 * two nodes' calls interleave:
 *
 * - `acquire` returns the record read after its claim succeeded (or checked unchanged by the
 *   claim itself), never one read before: a node that read, then claimed, must not start from an
 *   old record when another node acquired, issued and released the ID in between.
 * - `renew` stores, atomically, the larger of the stored and the reported value of each number:
 *   a renewal that lands late (after a retry with a higher horizon) never lowers the record below
 *   the fence its holder runs with.
 * - `release` stores the report exactly: the holder has stopped issuing, so its last timestamp is
 *   exact, and nothing of this holding can write after it.
 *
 * The conformance suite (test/support/worker-registry-suite.ts, `runInterleavingSuite`) pauses
 * each adapter between the steps of its protocol through the adapters' `interleave` option
 * (src/registries/common.ts) and checks these rules with real IDs.
 */

/** Who is asking. Stable across restarts of the same node where the platform allows. */
export interface NodeIdentity {
  /** Address other nodes know this node by (Leaf uses the IP). Must not contain `/`. */
  readonly host: string;
  /** The port the node serves on; 0 when it serves none. */
  readonly port: number;
}

/** What {@link WorkerRegistry.acquire} is asked for. */
export interface AcquireRequest {
  readonly identity: NodeIdentity;
  /** IDs 0 to maxWorkers - 1 may be handed out: 2^workerBits of the generator's layout. */
  readonly maxWorkers: number;
  /** Only this worker ID (the ID a weak-dependency cache holds, or a configured static ID). */
  readonly workerId?: number;
  /** Never these worker IDs (the `switch-worker` policy leaves the one it holds). */
  readonly exclude?: readonly number[];
  /**
   * Only worker IDs whose recorded `lastTimestamp` is below this (the `switch-worker` policy asks
   * for an ID it can start on at once with a clock that went back).
   */
  readonly lastTimestampBelow?: number;
}

/** What a holder reports on each renewal and on release. */
export interface WorkerReport {
  /** Every ID the holder issued, or may issue before its next report, is at or below this. */
  readonly lastTimestamp: number;
  /** The holder's clock when it made this report. */
  readonly reportedAt: number;
}

/** A held lease on one worker ID. */
export interface WorkerLease {
  readonly workerId: number;
  /**
   * Recorded for this worker ID by earlier holders, as it stands after this lease's claim (no
   * holder can change it until this lease ends); -1 when there was none.
   */
  readonly lastTimestamp: number;
  /** The clock of the holder that recorded `lastTimestamp`, when it did; -1 when none. */
  readonly reportedAt: number;
  /**
   * How long the coordinator keeps the lease from the moment it handled the acquire (ZooKeeper:
   * the negotiated session timeout). The holder must stop issuing before a clock reading taken
   * before the request plus this.
   */
  readonly ttlMs: number;
  /**
   * Aborted, with an IdMintError LEASE_LOST as its reason, when the backend tells the holder
   * that the lease is gone (ZooKeeper session expired, etcd key deleted). Backends that cannot
   * signal (Redis, SQL, static) never abort it; their `renew` reports the loss.
   */
  readonly lost: AbortSignal;
  /**
   * Extends the lease by its TTL and records `report`, never lowering the record: each stored
   * value becomes the larger of the stored one and the reported one, in one atomic step, so a
   * renewal that lands after a later one changes nothing. Resolves with the TTL granted, counted
   * from when the coordinator handled the request. A renewal never moves the lease's end earlier
   * than an earlier one left it (every backend grants one TTL per lease, from when it handles each
   * renewal): a renewal whose answer the holder never heard (given up on, or a driver's retry)
   * may land last, and the holder fences by the grants it heard of. Throws LEASE_LOST if another
   * node may hold the ID (never retry it), REGISTRY_UNAVAILABLE if the coordinator cannot be
   * reached (retry; the renewal may still land, which the rules above make harmless).
   */
  renew(report: WorkerReport): Promise<number>;
  /**
   * Records `report` exactly (it may be below a horizon renewed earlier) and frees the worker ID
   * at once for the next node. The caller must have stopped issuing IDs first:
   * `report.lastTimestamp` is then exact. Throws LEASE_LOST or REGISTRY_UNAVAILABLE as `renew`.
   */
  release(report: WorkerReport): Promise<void>;
}

/** A live peer's report, for the start-up clock check against the cluster. */
export interface PeerTime {
  readonly workerId: number;
  /** The peer's clock at its last report. */
  readonly reportedAt: number;
  /** How long ago that report reached the coordinator, by the coordinator's clock (>= 0). */
  readonly ageMs: number;
}

export interface WorkerRegistry {
  /** Backend name for logs and metrics: `static`, `zookeeper`, `etcd`, `redis`, `postgres`, ... */
  readonly backend: string;

  /**
   * Leases a free worker ID below `maxWorkers`: preferably the one this identity held before, else
   * one whose holder is gone (after its lease expired), else one never used. Two live leases never
   * share an ID, whatever the number of nodes acquiring at once, and the lease carries the record
   * as it stands after the claim (see the invariant above). Throws WORKER_IDS_EXHAUSTED
   * (naming the limit) when no ID qualifies, REGISTRY_UNAVAILABLE when the coordinator cannot be
   * reached, or (SQL, Redis) while it settles after its database moved to a new history: no lease
   * for one TTL plus the borrow lead, and the next starts from the settle's end at least
   * (docs/workers.md, "When the database's history changes"); that error's details carry
   * `settling: true` and `settlesInMs`, the wait left, so a starting node can wait it out.
   */
  acquire(request: AcquireRequest): Promise<WorkerLease>;

  /** Every live holder's last report (the caller skips its own). Throws REGISTRY_UNAVAILABLE. */
  peers(): Promise<PeerTime[]>;

  /** Closes connections the registry opened itself. Leases still held lapse by their TTL. */
  close(): Promise<void>;
}
