import { join, resolve } from 'node:path';
import { IdMintError } from '../../core/errors.ts';
import type {
  AcquireRequest,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from '../../ports/worker-registry.ts';
import {
  RegistryLease,
  allows,
  checkName,
  checkTtl,
  leaseLost,
  planAcquire,
  registryUnavailable,
  workerIdsExhausted,
  type AcquirePlan,
  type Interleave,
  type InterleaveStep,
} from '../common.ts';
import { FileLock, describeHolder, type FileLockOptions, type LockHolder } from '../file-lock.ts';
import { readStateFile, writeStateFile } from '../state-file.ts';

/** Options for {@link StaticWorkerRegistry}. */
export interface StaticWorkerRegistryOptions {
  /**
   * The worker ID, from configuration. The operator guarantees no other host runs with it; on one
   * host the state file's lock refuses a second process with the same state file.
   */
  readonly workerId: number;
  /** Directory for the state file. Default `./data`. */
  readonly stateDir?: string;
  /** The state file itself; default `<stateDir>/idmint-worker-<workerId>.json`. */
  readonly stateFile?: string;
  /**
   * The host-wide directory of static worker-ID locks, shared by every process of this host that
   * uses static worker IDs: the lock of worker N of cluster C is `<lockDir>/<C>/worker-N.lock`,
   * so two processes of one host never run one worker ID, whatever their state directories.
   * Default {@link DEFAULT_LOCK_DIR}.
   */
  readonly lockDir?: string;
  /** The cluster name: worker IDs are unique per host within it. Default `idmint`. */
  readonly name?: string;
  /**
   * How far ahead of its clock a report reserves (the "lease" nobody else contends for). A node
   * killed without a release restarts after waiting out at most this. Default 3000 ms.
   */
  readonly ttlMs?: number;
  /** Tests only: pauses at the steps docs/workers.md lists (see {@link Interleave}). */
  readonly interleave?: Interleave;
}

/** Default TTL of a static "lease": how long a node killed without a release waits on restart. */
export const DEFAULT_STATIC_TTL_MS = 3000;

/**
 * Default host-wide lock directory. A fixed path, not os.tmpdir(): that follows $TMPDIR, which
 * two processes of one host may see differently, and then they would not see each other's locks.
 * Set another (IDMINT_WORKER_LOCK_DIR) where /tmp is private to a service (systemd PrivateTmp),
 * per container, or read-only.
 */
export const DEFAULT_LOCK_DIR = '/tmp/idmint';

interface StaticState {
  readonly workerId: number;
  readonly lastTimestamp: number;
  readonly reportedAt: number;
}

/**
 * A worker ID from configuration (`static:7`), for single nodes and hand-assigned fleets. There is
 * nothing to coordinate, but the clock still is checked: every report is written to a local state
 * file (atomically, flushed), so a restart with the clock behind the last recorded time is
 * refused like with any other registry, instead of silently reissuing IDs.
 *
 * A lease is two exclusive OS locks ({@link FileLock}), taken before anything is read and held
 * until the lease is released or the registry closed; the kernel drops them when the process ends,
 * however it ends:
 *
 * - the **host lock** of the worker ID, `<lockDir>/<name>/worker-<id>.lock`: one host, one worker
 *   ID per cluster, whatever the state directory (two `idmint serve` in two directories, an
 *   `idmint next` beside a server). Beside it the host record, `worker-<id>.json`, holds the last
 *   report of whichever process of this host held the ID last, so one started from another
 *   directory still starts after its IDs (its reservation, the `borrow` lead, a clock step).
 * - the **state file's** lock: one process per state file (two containers on one volume).
 *
 * A second holder of either is refused with WORKER_IDS_EXHAUSTED naming the file and the process
 * that holds it, instead of issuing the same IDs as the first. Across hosts the worker ID stays
 * the operator's choice.
 */
export class StaticWorkerRegistry implements WorkerRegistry {
  readonly backend = 'static';
  readonly workerId: number;
  readonly stateFile: string;
  /** The host lock's path without extension: `<lockDir>/<name>/worker-<id>`. */
  readonly hostLock: string;
  readonly #name: string;
  readonly #ttlMs: number;
  readonly #interleave: Interleave | undefined;
  /** Writes of the state files, one after another in the order they were asked for. */
  #writes: Promise<unknown> = Promise.resolve();
  /** The locks while a lease of this registry holds them. */
  #locks: Locks | undefined;

  constructor(options: StaticWorkerRegistryOptions) {
    if (
      !Number.isInteger(options.workerId) ||
      options.workerId < 0 ||
      options.workerId >= 2 ** 31
    ) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `static worker ID must be a non-negative integer, got ${String(options.workerId)}`,
      );
    }
    this.workerId = options.workerId;
    this.stateFile =
      options.stateFile ??
      join(options.stateDir ?? 'data', `idmint-worker-${options.workerId}.json`);
    this.#name = checkName(options.name ?? 'idmint');
    const lockDir = options.lockDir ?? DEFAULT_LOCK_DIR;
    if (typeof lockDir !== 'string' || lockDir === '') {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `lockDir must be a directory path, got ${JSON.stringify(lockDir)}`,
      );
    }
    this.hostLock = join(resolve(lockDir), this.#name, `worker-${options.workerId}`);
    this.#ttlMs = checkTtl(options.ttlMs ?? DEFAULT_STATIC_TTL_MS);
    this.#interleave = options.interleave;
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    const plan = planAcquire(request);
    if (this.workerId >= plan.maxWorkers) {
      throw new IdMintError(
        'CONFIG_INVALID',
        `static worker ID ${this.workerId} does not fit the layout: worker IDs go from 0 to ` +
          `${plan.maxWorkers - 1}`,
      );
    }
    // Excluded whatever its record says (switch-worker leaving it): say so, not that it is in use.
    if (!allows(plan, this.workerId, -1)) throw workerIdsExhausted(this.backend, plan);
    if (this.#interleave !== undefined)
      await this.#step({ point: 'before-claim', backend: this.backend, workerId: this.workerId });
    // The claim: the locks. The files are read only once they are held, so the record is as the
    // claim left it, and no one else writes either file until this lease ends.
    const locks = await this.#take(plan);
    let state: StaticState;
    try {
      // The later of the two records: this directory's, and the host's (another directory's
      // process may have held the ID since, and reserved time ahead of its clock).
      const [own, host] = await Promise.all([
        this.#read(this.stateFile),
        this.#read(`${this.hostLock}.json`),
      ]);
      state = {
        workerId: this.workerId,
        lastTimestamp: Math.max(own.lastTimestamp, host.lastTimestamp),
        reportedAt: Math.max(own.reportedAt, host.reportedAt),
      };
      if (!allows(plan, this.workerId, state.lastTimestamp))
        throw workerIdsExhausted(this.backend, plan);
    } catch (error) {
      this.#unlock(locks);
      throw error;
    }
    let recorded: WorkerReport = {
      lastTimestamp: state.lastTimestamp,
      reportedAt: state.reportedAt,
    };
    return new RegistryLease({
      backend: this.backend,
      workerId: this.workerId,
      lastTimestamp: state.lastTimestamp,
      reportedAt: state.reportedAt,
      ttlMs: this.#ttlMs,
      write: async (kind, report) => {
        if (kind === 'renew' && this.#interleave !== undefined)
          await this.#step({
            point: 'before-renew-write',
            backend: this.backend,
            workerId: this.workerId,
            report,
          });
        // A renewal never lowers the files (one that comes after a later one changes nothing); a
        // release records its exact values. One write at a time, so each starts from the last.
        await this.#serially(async () => {
          // A renewal still on its way when the lease ended (released, or the registry closed)
          // must not write: the files may be another process's by now.
          if (!locks.state.held) throw leaseLost(this.backend, this.workerId, 'it was released');
          const next =
            kind === 'release'
              ? report
              : {
                  lastTimestamp: Math.max(recorded.lastTimestamp, report.lastTimestamp),
                  reportedAt: Math.max(recorded.reportedAt, report.reportedAt),
                };
          // Both at once: each write's flush is its one turn of the event loop (state-file.ts).
          await Promise.all([
            this.#write(this.stateFile, next),
            this.#write(`${this.hostLock}.json`, next),
          ]);
          locks.host.touch();
          recorded = next;
        });
        if (kind === 'release') this.#unlock(locks);
        return this.#ttlMs;
      },
    });
  }

  /** A static node knows no peers. */
  async peers(): Promise<PeerTime[]> {
    return [];
  }

  /** Lets go of the locks if a lease still holds them (as a crash would: no last report). */
  async close(): Promise<void> {
    if (this.#locks !== undefined) this.#unlock(this.#locks);
  }

  /** Takes the host lock, then the state file's, or refuses naming the process that holds one. */
  async #take(plan: AcquirePlan): Promise<Locks> {
    const self = (uses: string) => FileLock.self(plan.identity.port, uses);
    const host = await this.#lock(this.hostLock, self(this.stateFile), { shared: true });
    if (!(host instanceof FileLock)) throw this.#hostInUse(plan, host.heldBy);
    let state: Awaited<ReturnType<typeof FileLock.take>>;
    try {
      state = await this.#lock(this.stateFile, self(this.stateFile));
    } catch (error) {
      host.release();
      throw error;
    }
    if (!(state instanceof FileLock)) {
      host.release();
      throw this.#inUse(plan, state.heldBy);
    }
    this.#locks = { host, state };
    return this.#locks;
  }

  async #lock(path: string, holder: Omit<LockHolder, 'since'>, options?: FileLockOptions) {
    try {
      return await FileLock.take(path, holder, options);
    } catch (error) {
      const reason = (error as Error).message;
      const settings = 'IDMINT_WORKER_LOCK_DIR, IDMINT_WORKER_STATE_DIR';
      const writable = `its directory must be writable by this process (${settings})`;
      const why = new Error(`cannot take the lock (${reason}); ${writable}`, { cause: error });
      throw registryUnavailable(this.backend, `${path}.lock`, why);
    }
  }

  #unlock(locks: Locks): void {
    locks.state.release();
    locks.host.release();
    if (this.#locks === locks) this.#locks = undefined;
  }

  /** WORKER_IDS_EXHAUSTED in one line: the state file, and who holds it where that is known. */
  #inUse(plan: AcquirePlan, holder: LockHolder | undefined): IdMintError {
    return new IdMintError(
      'WORKER_IDS_EXHAUSTED',
      `static worker registry: worker ${this.workerId} is in use by ${describeHolder(holder)}, ` +
        `which holds the lock of its state file ${this.stateFile}; ` +
        'two processes with one worker ID would issue the same IDs: ' +
        'stop that one, or give this one a worker ID and state directory of its own ' +
        '(static:<id>, stateDir)',
      { details: { ...this.#holderDetails(plan, holder), stateFile: this.stateFile } },
    );
  }

  /** WORKER_IDS_EXHAUSTED in one line: another process of this host runs the worker ID. */
  #hostInUse(plan: AcquirePlan, holder: LockHolder | undefined): IdMintError {
    const where = holder?.uses === undefined ? '' : ` with state file ${holder.uses}`;
    return new IdMintError(
      'WORKER_IDS_EXHAUSTED',
      `static worker registry: worker ${this.workerId} of cluster ${this.#name} is in use ` +
        `on this host ` +
        `by ${describeHolder(holder)}${where} (host lock ${this.hostLock}.lock); ` +
        'two processes with one worker ID would issue the same IDs: ' +
        'stop that one, or give this one another worker ID (static:<id>)',
      { details: { ...this.#holderDetails(plan, holder), hostLock: `${this.hostLock}.lock` } },
    );
  }

  #holderDetails(plan: AcquirePlan, holder: LockHolder | undefined) {
    const held = { holderPid: holder?.pid ?? null, holderHost: holder?.host ?? null };
    return {
      backend: this.backend,
      limit: plan.maxWorkers,
      live: 1,
      workerId: this.workerId,
      ...held,
    };
  }

  /** Runs `task` after every write asked for before it has finished. */
  #serially(task: () => Promise<void>): Promise<void> {
    const run = this.#writes.then(task);
    this.#writes = run.catch(() => {});
    return run;
  }

  /** Runs the test hook; its failure is the step's, as a request that never arrived. */
  async #step(step: InterleaveStep): Promise<void> {
    try {
      await this.#interleave?.(step);
    } catch (error) {
      throw registryUnavailable(this.backend, this.stateFile, error);
    }
  }

  /** A record (the state file, or the host record); none yet reads as -1, never 0. */
  async #read(file: string): Promise<StaticState> {
    let raw: unknown;
    try {
      raw = await readStateFile(file);
    } catch (error) {
      throw this.#unreadable(file, error);
    }
    if (raw === undefined) return { workerId: this.workerId, lastTimestamp: -1, reportedAt: -1 };
    const state = raw as Partial<StaticState>;
    if (
      state.workerId !== this.workerId ||
      !Number.isSafeInteger(state.lastTimestamp) ||
      !Number.isSafeInteger(state.reportedAt)
    ) {
      // Never start over from nothing: that is exactly the clock check Leaf's cache file skipped.
      const expected = `{"workerId":${this.workerId},"lastTimestamp":<ms>,"reportedAt":<ms>}`;
      throw this.#unreadable(file, new Error(`expected ${expected}`));
    }
    return state as StaticState;
  }

  async #write(file: string, report: WorkerReport): Promise<void> {
    try {
      await writeStateFile(file, { workerId: this.workerId, ...report });
    } catch (error) {
      throw registryUnavailable(this.backend, file, error);
    }
  }

  #unreadable(file: string, cause: unknown): IdMintError {
    const reason = cause instanceof Error ? cause.message : String(cause);
    return new IdMintError(
      'REGISTRY_UNAVAILABLE',
      `static worker registry: state file ${file} is unreadable (${reason}); ` +
        `it holds the last timestamp of worker ${this.workerId}, so idmint will not start ` +
        `without it: ` +
        'restore it, or remove it only if you know the clock is past every ID this worker issued',
      { cause },
    );
  }
}

/** The locks of one static lease. */
interface Locks {
  readonly host: FileLock;
  readonly state: FileLock;
}
