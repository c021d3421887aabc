import { IdMintError } from '../../src/core/errors.ts';
import type { AcquireRequest, PeerTime, WorkerLease, WorkerRegistry, WorkerReport } from '../../src/ports/worker-registry.ts';

/**
 * A real registry with faults injected at the port: renewals that fail as if the coordinator
 * were unreachable, peers reporting chosen clocks, a lease loss signalled on demand. The
 * coordinator underneath stays real; only what the worker is told changes.
 */
export class FaultyRegistry implements WorkerRegistry {
  readonly inner: WorkerRegistry;
  /** While true, renew() fails with REGISTRY_UNAVAILABLE without reaching the coordinator. */
  unreachable = false;
  /** The next this many renewals fail with LEASE_LOST (a lease that expired before its first renewal). */
  expireNext = 0;
  /** When set, peers() answers this instead of asking the coordinator. */
  peerTimes: PeerTime[] | undefined;
  /** Every report the worker sent, in order. */
  readonly reports: { workerId: number; kind: 'renew' | 'release'; report: WorkerReport }[] = [];
  readonly leases: (WorkerLease & { loseNow(): void })[] = [];

  constructor(inner: WorkerRegistry) {
    this.inner = inner;
  }

  get backend(): string {
    return this.inner.backend;
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    const lease = await this.inner.acquire(request);
    const controller = new AbortController();
    lease.lost.addEventListener('abort', () => controller.abort(lease.lost.reason), { once: true });
    const faulty = {
      workerId: lease.workerId,
      lastTimestamp: lease.lastTimestamp,
      reportedAt: lease.reportedAt,
      ttlMs: lease.ttlMs,
      lost: controller.signal,
      renew: async (report: WorkerReport) => {
        if (this.unreachable) throw new IdMintError('REGISTRY_UNAVAILABLE', 'injected: coordinator unreachable');
        if (this.expireNext > 0) {
          this.expireNext--;
          throw new IdMintError('LEASE_LOST', 'injected: lease expired');
        }
        this.reports.push({ workerId: lease.workerId, kind: 'renew', report });
        return lease.renew(report);
      },
      release: async (report: WorkerReport) => {
        this.reports.push({ workerId: lease.workerId, kind: 'release', report });
        return lease.release(report);
      },
      loseNow: () => controller.abort(new IdMintError('LEASE_LOST', 'injected: lease lost')),
    };
    this.leases.push(faulty);
    return faulty;
  }

  async peers(): Promise<PeerTime[]> {
    return this.peerTimes ?? this.inner.peers();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
