import type {
  AcquireRequest,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
} from '../ports/worker-registry.ts';

/**
 * A coordinated registry asked for one worker ID only: `idmint next --worker N` with an etcd,
 * ZooKeeper, Redis or SQL registry. Every acquire asks for exactly `workerId` (with whatever else
 * the caller asks), so the coordinator refuses it (WORKER_IDS_EXHAUSTED) while any live node
 * holds N, on this host or another, and records this use of N for the next holder.
 */
export class PinnedWorkerRegistry implements WorkerRegistry {
  readonly backend: string;
  readonly workerId: number;
  readonly #inner: WorkerRegistry;

  constructor(inner: WorkerRegistry, workerId: number) {
    this.#inner = inner;
    this.backend = inner.backend;
    this.workerId = workerId;
  }

  /**
   * The pinned worker ID, under the request's other conditions (switch-worker's `exclude` and
   * `lastTimestampBelow` then leave nothing to take, and the switch is refused), or the registry's
   * refusal naming the ID asked for.
   */
  acquire(request: AcquireRequest): Promise<WorkerLease> {
    return this.#inner.acquire({ ...request, workerId: this.workerId });
  }

  peers(): Promise<PeerTime[]> {
    return this.#inner.peers();
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}
