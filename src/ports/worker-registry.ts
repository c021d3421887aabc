/**
 * Where snowflake workers get their worker IDs: a lease on one ID, renewed while the node runs,
 * released on shutdown, and recycled only after its holder is gone. Implemented once per backend
 * under src/registries/<backend>/; every implementation passes the same conformance suite.
 *
 * Times are ms since the Unix epoch. `lastTimestamp` is the latest time unit start a holder of the
 * worker ID has reported using; a new holder must issue only later timestamps.
 */

/** Who is asking: stable across restarts of the same node where the platform allows. */
export interface NodeIdentity {
  /** Address other nodes know this node by (Leaf uses ip:port). */
  readonly host: string;
  readonly port: number;
  /** Cluster or service name; worker IDs are unique within it. */
  readonly name: string;
}

/** A held lease. */
export interface WorkerLease {
  readonly workerId: number;
  /** Last timestamp recorded for this worker ID by any earlier holder; -1 when none. */
  readonly lastTimestamp: number;
  /**
   * Local clock time until which the lease is certainly still ours (the coordinator's expiry
   * minus the time the request took). A holder must stop issuing IDs before this.
   */
  readonly validUntil: number;
}

/** A live peer's report, for the start-up clock check against the cluster. */
export interface PeerTime {
  readonly workerId: number;
  readonly timestamp: number;
}

export interface WorkerRegistry {
  /** Backend name for logs and metrics: `static`, `zookeeper`, `etcd`, `redis`, `postgres`, ... */
  readonly backend: string;

  /**
   * Leases a worker ID below `maxWorkers` for `identity` (reusing the one this identity held, where
   * the backend remembers it). Throws WORKER_IDS_EXHAUSTED when every ID is held by a live node,
   * REGISTRY_UNAVAILABLE when the coordinator cannot be reached.
   */
  acquire(identity: NodeIdentity, maxWorkers: number): Promise<WorkerLease>;

  /**
   * Extends the current lease and records `lastTimestamp`. Throws LEASE_LOST if the lease is gone
   * (expired, taken over), REGISTRY_UNAVAILABLE if the coordinator cannot be reached.
   */
  renew(lastTimestamp: number): Promise<WorkerLease>;

  /** Records `lastTimestamp` and frees the worker ID at once for the next node. */
  release(lastTimestamp: number): Promise<void>;

  /** The other live holders' last reported timestamps. */
  peers(): Promise<PeerTime[]>;

  /** Closes connections the registry opened itself. */
  close(): Promise<void>;
}
