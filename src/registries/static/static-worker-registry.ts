import { join } from 'node:path';
import { IdMintError } from '../../core/errors.ts';
import type { AcquireRequest, PeerTime, WorkerLease, WorkerRegistry, WorkerReport } from '../../ports/worker-registry.ts';
import { RegistryLease, allows, checkTtl, planAcquire, registryUnavailable, workerIdsExhausted } from '../common.ts';
import { readStateFile, writeStateFile } from '../state-file.ts';

/** Options for {@link StaticWorkerRegistry}. */
export interface StaticWorkerRegistryOptions {
  /** The worker ID, from configuration. The operator guarantees no other node runs with it. */
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
}

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
 */
export class StaticWorkerRegistry implements WorkerRegistry {
  readonly backend = 'static';
  readonly workerId: number;
  readonly stateFile: string;
  readonly #ttlMs: number;

  constructor(options: StaticWorkerRegistryOptions) {
    if (!Number.isInteger(options.workerId) || options.workerId < 0 || options.workerId >= 2 ** 31) {
      throw new IdMintError('INVALID_ARGUMENT', `static worker ID must be a non-negative integer, got ${String(options.workerId)}`);
    }
    this.workerId = options.workerId;
    this.stateFile = options.stateFile ?? join(options.stateDir ?? 'data', `idmint-worker-${options.workerId}.json`);
    this.#ttlMs = checkTtl(options.ttlMs ?? 3000);
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    const plan = planAcquire(request);
    if (this.workerId >= plan.maxWorkers) {
      throw new IdMintError('CONFIG_INVALID', `static worker ID ${this.workerId} does not fit the layout: worker IDs go from 0 to ${plan.maxWorkers - 1}`);
    }
    const state = await this.#read();
    if (!allows(plan, this.workerId, state.lastTimestamp)) throw workerIdsExhausted(this.backend, plan);
    return new RegistryLease({
      backend: this.backend,
      workerId: this.workerId,
      lastTimestamp: state.lastTimestamp,
      reportedAt: state.reportedAt,
      ttlMs: this.#ttlMs,
      write: async (_kind, report) => {
        await this.#write(report);
        return this.#ttlMs;
      },
    });
  }

  /** A static node knows no peers. */
  async peers(): Promise<PeerTime[]> {
    return [];
  }

  async close(): Promise<void> {}

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
