import { join } from 'node:path';
import { IdMintError } from '../../core/errors.ts';
import type { AcquireRequest, PeerTime, WorkerLease, WorkerRegistry, WorkerReport } from '../../ports/worker-registry.ts';
import { RegistryLease, allows, checkTtl, leaseLost, planAcquire, registryUnavailable, workerIdsExhausted, type AcquirePlan, type Interleave, type InterleaveStep } from '../common.ts';
import { readStateFile, writeStateFile } from '../state-file.ts';
import { StateFileLock, type LockHolder } from './state-file-lock.ts';

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
   * How far ahead of its clock a report reserves (the "lease" nobody else contends for). A node
   * killed without a release restarts after waiting out at most this. Default 3000 ms.
   */
  readonly ttlMs?: number;
  /** Tests only: pauses at the steps docs/workers.md lists (see {@link Interleave}). */
  readonly interleave?: Interleave;
}

/** Default TTL of a static "lease": how long a node killed without a release waits on restart. */
export const DEFAULT_STATIC_TTL_MS = 3000;

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
 * A lease is an exclusive OS lock on the state file ({@link StateFileLock}), taken before the file
 * is read and held until the lease is released or the registry closed; the kernel drops it when
 * the process ends, however it ends. A second process on the same state file (a second
 * `idmint serve` in the same directory, two containers on one volume) is refused with
 * WORKER_IDS_EXHAUSTED naming the file and the process that holds it, instead of issuing the
 * same IDs as the first.
 */
export class StaticWorkerRegistry implements WorkerRegistry {
  readonly backend = 'static';
  readonly workerId: number;
  readonly stateFile: string;
  readonly #ttlMs: number;
  readonly #interleave: Interleave | undefined;
  /** Writes of the state file, one after another in the order they were asked for. */
  #writes: Promise<unknown> = Promise.resolve();
  /** The state file's lock while a lease of this registry holds it. */
  #lock: StateFileLock | undefined;

  constructor(options: StaticWorkerRegistryOptions) {
    if (!Number.isInteger(options.workerId) || options.workerId < 0 || options.workerId >= 2 ** 31) {
      throw new IdMintError('INVALID_ARGUMENT', `static worker ID must be a non-negative integer, got ${String(options.workerId)}`);
    }
    this.workerId = options.workerId;
    this.stateFile = options.stateFile ?? join(options.stateDir ?? 'data', `idmint-worker-${options.workerId}.json`);
    this.#ttlMs = checkTtl(options.ttlMs ?? DEFAULT_STATIC_TTL_MS);
    this.#interleave = options.interleave;
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    const plan = planAcquire(request);
    if (this.workerId >= plan.maxWorkers) {
      throw new IdMintError('CONFIG_INVALID', `static worker ID ${this.workerId} does not fit the layout: worker IDs go from 0 to ${plan.maxWorkers - 1}`);
    }
    // Excluded whatever its record says (switch-worker leaving it): say so, not that it is in use.
    if (!allows(plan, this.workerId, -1)) throw workerIdsExhausted(this.backend, plan);
    if (this.#interleave !== undefined) await this.#step({ point: 'before-claim', backend: this.backend, workerId: this.workerId });
    // The claim: the file's lock. The file is read only once it is held, so it is the record as
    // the claim left it, and no one else writes it until this lease ends.
    const lock = await this.#take(plan);
    let state: StaticState;
    try {
      state = await this.#read();
      if (!allows(plan, this.workerId, state.lastTimestamp)) throw workerIdsExhausted(this.backend, plan);
    } catch (error) {
      this.#unlock(lock);
      throw error;
    }
    let recorded: WorkerReport = { lastTimestamp: state.lastTimestamp, reportedAt: state.reportedAt };
    return new RegistryLease({
      backend: this.backend,
      workerId: this.workerId,
      lastTimestamp: state.lastTimestamp,
      reportedAt: state.reportedAt,
      ttlMs: this.#ttlMs,
      write: async (kind, report) => {
        if (kind === 'renew' && this.#interleave !== undefined) await this.#step({ point: 'before-renew-write', backend: this.backend, workerId: this.workerId, report });
        // A renewal never lowers the file (one that comes after a later one changes nothing); a
        // release records its exact values. One write at a time, so each starts from the last.
        await this.#serially(async () => {
          // A renewal still on its way when the lease ended (released, or the registry closed)
          // must not write: the file may be another process's by now.
          if (!lock.held) throw leaseLost(this.backend, this.workerId, 'it was released');
          const next = kind === 'release' ? report : { lastTimestamp: Math.max(recorded.lastTimestamp, report.lastTimestamp), reportedAt: Math.max(recorded.reportedAt, report.reportedAt) };
          await this.#write(next);
          recorded = next;
        });
        if (kind === 'release') this.#unlock(lock);
        return this.#ttlMs;
      },
    });
  }

  /** A static node knows no peers. */
  async peers(): Promise<PeerTime[]> {
    return [];
  }

  /** Lets go of the state file's lock if a lease still holds it (as a crash would: no last report). */
  async close(): Promise<void> {
    if (this.#lock !== undefined) this.#unlock(this.#lock);
  }

  /** Takes the state file's lock, or refuses naming the process that holds it. */
  async #take(plan: AcquirePlan): Promise<StateFileLock> {
    let taken: Awaited<ReturnType<typeof StateFileLock.take>>;
    try {
      taken = await StateFileLock.take(this.stateFile, StateFileLock.self(plan.identity.port));
    } catch (error) {
      throw registryUnavailable(this.backend, `${this.stateFile}.lock`, error);
    }
    if (!(taken instanceof StateFileLock)) throw this.#inUse(plan, taken.heldBy);
    this.#lock = taken;
    return taken;
  }

  #unlock(lock: StateFileLock): void {
    lock.release();
    if (this.#lock === lock) this.#lock = undefined;
  }

  /** WORKER_IDS_EXHAUSTED in one line: the state file, and who holds it where that is known. */
  #inUse(plan: AcquirePlan, holder: LockHolder | undefined): IdMintError {
    const who =
      holder === undefined
        ? 'another process'
        : `pid ${holder.pid} on ${holder.host}${holder.port > 0 ? `, port ${holder.port}` : ''}, since ${String(holder.since)}`;
    return new IdMintError(
      'WORKER_IDS_EXHAUSTED',
      `static worker registry: worker ${this.workerId} is in use by ${who}, which holds the lock of its state file ${this.stateFile}; two processes with one worker ID would issue the same IDs: stop that one, or give this one a worker ID and state directory of its own (static:<id>, stateDir)`,
      { details: { backend: this.backend, limit: plan.maxWorkers, live: 1, workerId: this.workerId, stateFile: this.stateFile, holderPid: holder?.pid ?? null, holderHost: holder?.host ?? null } },
    );
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

  async #read(): Promise<StaticState> {
    let raw: unknown;
    try {
      raw = await readStateFile(this.stateFile);
    } catch (error) {
      throw this.#unreadable(error);
    }
    if (raw === undefined) return { workerId: this.workerId, lastTimestamp: -1, reportedAt: -1 };
    const state = raw as Partial<StaticState>;
    if (state.workerId !== this.workerId || !Number.isSafeInteger(state.lastTimestamp) || !Number.isSafeInteger(state.reportedAt)) {
      // Never start over from nothing: that is exactly the clock check Leaf's cache file skipped.
      throw this.#unreadable(new Error(`expected {"workerId":${this.workerId},"lastTimestamp":<ms>,"reportedAt":<ms>}`));
    }
    return state as StaticState;
  }

  async #write(report: WorkerReport): Promise<void> {
    try {
      await writeStateFile(this.stateFile, { workerId: this.workerId, ...report });
    } catch (error) {
      throw registryUnavailable(this.backend, this.stateFile, error);
    }
  }

  #unreadable(cause: unknown): IdMintError {
    const reason = cause instanceof Error ? cause.message : String(cause);
    return new IdMintError(
      'REGISTRY_UNAVAILABLE',
      `static worker registry: state file ${this.stateFile} is unreadable (${reason}); it holds the last timestamp of worker ${this.workerId}, so idmint will not start without it: restore it, or remove it only if you know the clock is past every ID this worker issued`,
      { cause },
    );
  }
}
