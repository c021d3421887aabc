import { IdMintError, isIdMintError } from '../../core/errors.ts';
import type { AcquireRequest, NodeIdentity, PeerTime, WorkerLease, WorkerRegistry, WorkerReport } from '../../ports/worker-registry.ts';
import { DEFAULT_TTL_MS, RegistryLease, allows, checkTtl, leaseLost, planAcquire, registryUnavailable } from '../common.ts';
import { readStateFile, writeStateFile } from '../state-file.ts';

/** Options for {@link CachedWorkerRegistry}. */
export interface CachedWorkerRegistryOptions {
  /** The local cache file (Leaf keeps one per port: `workerID.properties`). */
  readonly file: string;
  /**
   * While the coordinator is unreachable, how far ahead each local report reserves, as the static
   * registry does. Default 10000 ms.
   */
  readonly offlineTtlMs?: number;
}

/** What the cache file holds. */
interface CacheState {
  readonly backend: string;
  readonly identity: NodeIdentity;
  readonly workerId: number;
  /** The latest report, written locally before it is sent (so it is never behind the coordinator's). */
  readonly lastTimestamp: number;
  readonly reportedAt: number;
  /** The last report the coordinator confirmed: if it still holds exactly this, nobody used the ID since. */
  readonly confirmed: WorkerReport;
}

/**
 * Leaf's weak dependency on its coordinator: the acquired worker ID and every report are also
 * kept in a local file, so a node can restart while the coordinator is down. Two rules keep it
 * from being a way around the safety checks:
 *
 * - A lease from the file carries the file's lastTimestamp and reportedAt, and goes through the
 *   same start-up clock checks as any other (Leaf skipped its check whenever the file existed).
 *   Each report is written to the file before it is sent, so the file is never behind.
 * - While offline, each renewal tries to claim the same ID from the coordinator again. Once it
 *   answers, the node keeps the ID only if the coordinator still holds exactly the last report
 *   it confirmed for this node (nobody held the ID in between); otherwise the lease is lost.
 *
 * The price, as in Leaf: while the coordinator is down, the ID this node runs with cannot be
 * protected from a node the coordinator gave it to before it went down. Use it only where
 * availability during a coordinator outage matters more than that window.
 */
export class CachedWorkerRegistry implements WorkerRegistry {
  readonly backend: string;
  readonly #inner: WorkerRegistry;
  readonly #file: string;
  readonly #offlineTtlMs: number;
  /** Writes of the cache file, one after another in the order they were asked for. */
  #writes: Promise<unknown> = Promise.resolve();

  constructor(inner: WorkerRegistry, options: CachedWorkerRegistryOptions) {
    this.#inner = inner;
    this.backend = inner.backend;
    this.#file = options.file;
    this.#offlineTtlMs = checkTtl(options.offlineTtlMs ?? DEFAULT_TTL_MS);
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    const plan = planAcquire(request);
    let lease: WorkerLease;
    try {
      lease = await this.#inner.acquire(request);
    } catch (error) {
      if (!isIdMintError(error, 'REGISTRY_UNAVAILABLE')) throw error;
      const cached = await this.#read();
      const sameNode = cached?.backend === this.backend && cached.identity.host === plan.identity.host && cached.identity.port === plan.identity.port;
      if (cached === undefined || !sameNode || !allows(plan, cached.workerId, cached.lastTimestamp)) throw error;
      return this.#offline(cached, request);
    }
    const confirmed = { lastTimestamp: lease.lastTimestamp, reportedAt: lease.reportedAt };
    try {
      await this.#write({ backend: this.backend, identity: plan.identity, workerId: lease.workerId, ...confirmed, confirmed });
    } catch (error) {
      await lease.release(confirmed).catch(() => {});
      throw error;
    }
    return this.#online(lease, plan.identity);
  }

  peers(): Promise<PeerTime[]> {
    return this.#inner.peers();
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  /** A coordinator lease whose reports go to the file first. */
  #online(lease: WorkerLease, identity: NodeIdentity): WorkerLease {
    const file = this.#reports(identity, lease.workerId, { lastTimestamp: lease.lastTimestamp, reportedAt: lease.reportedAt });
    const online: RegistryLease = new RegistryLease({
      backend: this.backend,
      workerId: lease.workerId,
      lastTimestamp: lease.lastTimestamp,
      reportedAt: lease.reportedAt,
      ttlMs: lease.ttlMs,
      write: async (kind, report) => {
        await file.sending(kind, report);
        const ttlMs = kind === 'renew' ? await lease.renew(report) : (await lease.release(report), 0);
        await file.confirmed(kind, report);
        return ttlMs;
      },
    });
    lease.lost.addEventListener('abort', () => online.lose(lease.lost.reason as IdMintError), { once: true });
    return online;
  }

  /** A lease from the file, renewed locally until the coordinator answers again. */
  #offline(cached: CacheState, request: AcquireRequest): WorkerLease {
    const { identity, workerId } = cached;
    const file = this.#reports(identity, workerId, cached.confirmed, { lastTimestamp: cached.lastTimestamp, reportedAt: cached.reportedAt });
    let reclaimed: WorkerLease | undefined;
    const offline: RegistryLease = new RegistryLease({
      backend: this.backend,
      workerId,
      lastTimestamp: cached.lastTimestamp,
      reportedAt: cached.reportedAt,
      ttlMs: this.#offlineTtlMs,
      write: async (kind, report) => {
        await file.sending(kind, report);
        if (reclaimed === undefined) {
          try {
            reclaimed = await this.#inner.acquire({ identity, maxWorkers: request.maxWorkers, workerId });
          } catch (error) {
            if (isIdMintError(error, 'REGISTRY_UNAVAILABLE')) return this.#offlineTtlMs; // still offline: the file alone
            if (isIdMintError(error, 'WORKER_IDS_EXHAUSTED')) throw leaseLost(this.backend, workerId, 'the coordinator gave it to another node meanwhile');
            throw error;
          }
          const confirmed = file.lastConfirmed();
          if (reclaimed.lastTimestamp !== confirmed.lastTimestamp || reclaimed.reportedAt !== confirmed.reportedAt) {
            const held = reclaimed;
            await held.release({ lastTimestamp: Math.max(held.lastTimestamp, report.lastTimestamp), reportedAt: report.reportedAt }).catch(() => {});
            throw leaseLost(this.backend, workerId, 'another node recorded use of it while the coordinator was unreachable');
          }
          const held = reclaimed;
          held.lost.addEventListener('abort', () => offline.lose(held.lost.reason as IdMintError), { once: true });
        }
        const ttlMs = kind === 'renew' ? await reclaimed.renew(report) : (await reclaimed.release(report), 0);
        await file.confirmed(kind, report);
        return ttlMs;
      },
    });
    return offline;
  }

  /**
   * The file's side of one lease. Both numbers follow the coordinator's rule: a renewal never
   * lowers them (one that lands after a later one changes nothing), a release records its report
   * exactly; so `confirmed` stays what the coordinator holds, and the file is never behind it.
   * Writes go one at a time, in the order they were asked for.
   */
  #reports(identity: NodeIdentity, workerId: number, confirmed: WorkerReport, latest: WorkerReport = confirmed) {
    const merge = (kind: 'renew' | 'release', old: WorkerReport, report: WorkerReport): WorkerReport =>
      kind === 'release' ? report : { lastTimestamp: Math.max(old.lastTimestamp, report.lastTimestamp), reportedAt: Math.max(old.reportedAt, report.reportedAt) };
    const save = (change: () => void) =>
      this.#serially(() => {
        change();
        return this.#write({ backend: this.backend, identity, workerId, ...latest, confirmed });
      });
    return {
      /** Before `report` is sent: the file is never behind what the coordinator may record. */
      sending: (kind: 'renew' | 'release', report: WorkerReport) => save(() => (latest = merge(kind, latest, report))),
      /** Once the coordinator confirmed `report`. */
      confirmed: (kind: 'renew' | 'release', report: WorkerReport) => save(() => (confirmed = merge(kind, confirmed, report))),
      lastConfirmed: () => confirmed,
    };
  }

  /** Runs `task` after every write asked for before it has finished. */
  #serially(task: () => Promise<void>): Promise<void> {
    const run = this.#writes.then(task);
    this.#writes = run.catch(() => {});
    return run;
  }

  async #read(): Promise<CacheState | undefined> {
    try {
      return (await readStateFile(this.#file)) as CacheState | undefined;
    } catch (error) {
      throw new IdMintError('REGISTRY_UNAVAILABLE', `worker cache file ${this.#file} is unreadable: ${(error as Error).message}`, { cause: error });
    }
  }

  async #write(state: CacheState): Promise<void> {
    try {
      await writeStateFile(this.#file, state);
    } catch (error) {
      throw registryUnavailable(this.backend, this.#file, error);
    }
  }
}
