import { IdMintError, isIdMintError } from '../../core/errors.ts';
import type {
  AcquireRequest,
  NodeIdentity,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from '../../ports/worker-registry.ts';
import {
  DEFAULT_TTL_MS,
  RegistryLease,
  allows,
  checkTtl,
  isSettling,
  leaseLost,
  planAcquire,
  registryUnavailable,
} from '../common.ts';
import type { AcquirePlan } from '../common.ts';
import { FileLock, describeHolder, type LockHolder } from '../file-lock.ts';
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
  /**
   * Which registry's worker IDs the file holds (a cluster name, with the table for SQL), recorded
   * in the file: a file written for another cluster is never used to start offline, where its
   * worker ID may be another node's. Default: not checked.
   */
  readonly cluster?: string;
}

/** What the cache file holds. */
interface CacheState {
  readonly backend: string;
  /** {@link CachedWorkerRegistryOptions.cluster}; absent in files of older versions. */
  readonly cluster?: string;
  readonly identity: NodeIdentity;
  readonly workerId: number;
  /**
   * The latest report, written locally before it is sent (so it is never behind the coordinator's).
   */
  readonly lastTimestamp: number;
  readonly reportedAt: number;
  /**
   * The last report the coordinator confirmed: if it still holds exactly this, nobody used the ID
   * since.
   */
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
 *
 * The file stands for a worker ID, so it is locked like a static state file ({@link FileLock}):
 * from the first acquire until {@link close}, no other process (nor another registry in this
 * one) can use it. Two processes sharing one file would otherwise both start offline on the one
 * worker ID it names: `idmint serve --port 0` twice in one directory did, as the file's only
 * guard was the node's host and port, and the port was the configured one, 0 for both. The file
 * is this node's identity now: it is used offline only by the process that holds its lock, on
 * the host that wrote it, for the cluster it was written for.
 */
export class CachedWorkerRegistry implements WorkerRegistry {
  readonly backend: string;
  readonly #inner: WorkerRegistry;
  readonly #file: string;
  readonly #offlineTtlMs: number;
  readonly #cluster: string | undefined;
  /** Writes of the cache file, one after another in the order they were asked for. */
  #writes: Promise<unknown> = Promise.resolve();
  /** The file's lock, from the first acquire until close. */
  #lock: FileLock | undefined;

  constructor(inner: WorkerRegistry, options: CachedWorkerRegistryOptions) {
    this.#inner = inner;
    this.backend = inner.backend;
    this.#file = options.file;
    this.#offlineTtlMs = checkTtl(options.offlineTtlMs ?? DEFAULT_TTL_MS);
    this.#cluster = options.cluster;
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    const plan = planAcquire(request);
    // Before the coordinator is asked or the file read: the file is this process's, or nothing is.
    await this.#holdFile(plan);
    let lease: WorkerLease;
    try {
      lease = await this.#inner.acquire(request);
    } catch (error) {
      // A settling registry is reachable: its history changed, and the cached ID may be one
      // whose lost lease's holder still issues (docs/workers.md).
      if (!isIdMintError(error, 'REGISTRY_UNAVAILABLE') || isSettling(error)) throw error;
      const cached = await this.#read();
      // Written on this host, for this backend and cluster. Not compared: the port, which is the
      // configured one (0 for every process that picks its port at listen), so it tells no
      // process from another; the lock does.
      const sameNode =
        cached?.backend === this.backend &&
        cached.identity.host === plan.identity.host &&
        (cached.cluster === undefined ||
          this.#cluster === undefined ||
          cached.cluster === this.#cluster);
      if (cached === undefined || !sameNode || !allows(plan, cached.workerId, cached.lastTimestamp))
        throw error;
      return this.#offline(cached, request);
    }
    const confirmed = { lastTimestamp: lease.lastTimestamp, reportedAt: lease.reportedAt };
    try {
      await this.#write(this.#state(plan.identity, lease.workerId, confirmed, confirmed));
    } catch (error) {
      await lease.release(confirmed).catch(() => {});
      throw error;
    }
    return this.#online(lease, plan.identity);
  }

  peers(): Promise<PeerTime[]> {
    return this.#inner.peers();
  }

  /** Closes the coordinator's registry, then lets go of the file (a lease still held lapses). */
  async close(): Promise<void> {
    try {
      await this.#inner.close();
    } finally {
      this.#lock?.release();
      this.#lock = undefined;
    }
  }

  /** Takes the file's lock unless this registry holds it; refuses naming the process that does. */
  async #holdFile(plan: AcquirePlan): Promise<void> {
    if (this.#lock !== undefined) return;
    let taken: Awaited<ReturnType<typeof FileLock.take>>;
    try {
      taken = await FileLock.take(this.#file, FileLock.self(plan.identity.port, this.#file));
    } catch (error) {
      const reason = (error as Error).message;
      const why = new Error(`cannot take the lock of the worker cache file (${reason})`, {
        cause: error,
      });
      throw registryUnavailable(this.backend, `${this.#file}.lock`, why);
    }
    if (!(taken instanceof FileLock)) throw this.#inUse(plan, taken.heldBy);
    this.#lock = taken;
  }

  /** WORKER_IDS_EXHAUSTED in one line: the cache file, and the process that holds it. */
  #inUse(plan: AcquirePlan, holder: LockHolder | undefined): IdMintError {
    return new IdMintError(
      'WORKER_IDS_EXHAUSTED',
      `${this.backend} worker registry: worker cache file ${this.#file} is in use by ` +
        `${describeHolder(holder)}; ` +
        'two processes sharing it would both start offline on the worker ID it names: ' +
        'give each process a cache file of its own (IDMINT_WORKER_CACHE_FILE)',
      {
        details: {
          backend: this.backend,
          limit: plan.maxWorkers,
          live: null,
          cacheFile: this.#file,
          holderPid: holder?.pid ?? null,
          holderHost: holder?.host ?? null,
        },
      },
    );
  }

  #state(
    identity: NodeIdentity,
    workerId: number,
    latest: WorkerReport,
    confirmed: WorkerReport,
  ): CacheState {
    const cluster = this.#cluster === undefined ? {} : { cluster: this.#cluster };
    return { backend: this.backend, ...cluster, identity, workerId, ...latest, confirmed };
  }

  /** A coordinator lease whose reports go to the file first. */
  #online(lease: WorkerLease, identity: NodeIdentity): WorkerLease {
    const file = this.#reports(identity, lease.workerId, {
      lastTimestamp: lease.lastTimestamp,
      reportedAt: lease.reportedAt,
    });
    const online: RegistryLease = new RegistryLease({
      backend: this.backend,
      workerId: lease.workerId,
      lastTimestamp: lease.lastTimestamp,
      reportedAt: lease.reportedAt,
      ttlMs: lease.ttlMs,
      write: async (kind, report) => {
        await file.sending(kind, report);
        let ttlMs = 0;
        if (kind === 'renew') ttlMs = await lease.renew(report);
        else await lease.release(report);
        await file.confirmed(kind, report);
        return ttlMs;
      },
    });
    lease.lost.addEventListener('abort', () => online.lose(lease.lost.reason as IdMintError), {
      once: true,
    });
    return online;
  }

  /** A lease from the file, renewed locally until the coordinator answers again. */
  #offline(cached: CacheState, request: AcquireRequest): WorkerLease {
    const { identity, workerId } = cached;
    const file = this.#reports(identity, workerId, cached.confirmed, {
      lastTimestamp: cached.lastTimestamp,
      reportedAt: cached.reportedAt,
    });
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
            reclaimed = await this.#inner.acquire({
              identity,
              maxWorkers: request.maxWorkers,
              workerId,
            });
          } catch (error) {
            // still offline: the file alone
            if (isIdMintError(error, 'REGISTRY_UNAVAILABLE')) return this.#offlineTtlMs;
            if (isIdMintError(error, 'WORKER_IDS_EXHAUSTED'))
              throw leaseLost(
                this.backend,
                workerId,
                'the coordinator gave it to another node meanwhile',
              );
            throw error;
          }
          const confirmed = file.lastConfirmed();
          if (
            reclaimed.lastTimestamp !== confirmed.lastTimestamp ||
            reclaimed.reportedAt !== confirmed.reportedAt
          ) {
            const held = reclaimed;
            await held
              .release({
                lastTimestamp: Math.max(held.lastTimestamp, report.lastTimestamp),
                reportedAt: report.reportedAt,
              })
              .catch(() => {});
            throw leaseLost(
              this.backend,
              workerId,
              'another node recorded use of it while the coordinator was unreachable',
            );
          }
          const held = reclaimed;
          held.lost.addEventListener('abort', () => offline.lose(held.lost.reason as IdMintError), {
            once: true,
          });
        }
        let ttlMs = 0;
        if (kind === 'renew') ttlMs = await reclaimed.renew(report);
        else await reclaimed.release(report);
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
  #reports(
    identity: NodeIdentity,
    workerId: number,
    confirmed: WorkerReport,
    latest: WorkerReport = confirmed,
  ) {
    const merge = (
      kind: 'renew' | 'release',
      old: WorkerReport,
      report: WorkerReport,
    ): WorkerReport =>
      kind === 'release'
        ? report
        : {
            lastTimestamp: Math.max(old.lastTimestamp, report.lastTimestamp),
            reportedAt: Math.max(old.reportedAt, report.reportedAt),
          };
    const save = (change: () => void) =>
      this.#serially(() => {
        change();
        return this.#write(this.#state(identity, workerId, latest, confirmed));
      });
    return {
      /** Before `report` is sent: the file is never behind what the coordinator may record. */
      sending: (kind: 'renew' | 'release', report: WorkerReport) =>
        save(() => (latest = merge(kind, latest, report))),
      /** Once the coordinator confirmed `report`. */
      confirmed: (kind: 'renew' | 'release', report: WorkerReport) =>
        save(() => (confirmed = merge(kind, confirmed, report))),
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
      throw new IdMintError(
        'REGISTRY_UNAVAILABLE',
        `worker cache file ${this.#file} is unreadable: ${(error as Error).message}`,
        { cause: error },
      );
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
