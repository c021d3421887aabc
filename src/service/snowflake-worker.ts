import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import { resolveRollbackPolicy, type RollbackPolicyOptions } from '../core/clock-policy.ts';
import { IdMintError, isIdMintError } from '../core/errors.ts';
import {
  DEFAULT_FENCED_WAIT_MS,
  DEFAULT_MAX_PEER_SKEW_MS,
  DEFAULT_SAFETY_MARGIN_MS,
  PEER_CLOCK_CHECKS,
  WORKER_OPTION_BOUNDS,
  type PeerClockCheck,
} from '../core/lease-policy.ts';
import { resolveLayout, type Layout, type LayoutSpec } from '../core/layout.ts';
import { BATCH_WINDOW_MS, SnowflakeGenerator, maxBatchFor } from '../core/snowflake.ts';
import type { Clock } from '../ports/clock.ts';
import type { NodeIdentity, WorkerRegistry } from '../ports/worker-registry.ts';
import { sleep, systemTimers } from '../shared/time.ts';
import { FenceWait } from './fence-wait.ts';
import { LeaseHolder, type LeaseEvent, type LeaseStats } from './lease-holder.ts';
import { checkPeerClocks, type PeerClockReport } from './peer-clock-check.ts';
import type { LeaseTerms } from './lease-holding.ts';
import { localNodeIdentity } from './node-identity.ts';

/**
 * A rollback policy for a worker: one of the generator's, or `switch-worker`, which waits out
 * small rollbacks as `wait` does (same bounds) and, on a larger one, moves to another worker ID
 * whose last timestamp is older than the clock, instead of refusing.
 */
export type WorkerRollbackOptions =
  | RollbackPolicyOptions
  | (Omit<RollbackPolicyOptions, 'policy'> & { readonly policy: 'switch-worker' });

export type { PeerClockCheck };

/** Options for {@link SnowflakeWorker.start}. */
export interface SnowflakeWorkerOptions {
  /** Where the worker ID is leased. The caller opens and closes it (close the worker first). */
  readonly registry: WorkerRegistry;
  /** This node as the registry knows it. Default: first non-internal IPv4 address, port 0. */
  readonly identity?: NodeIdentity;
  /** Default `new MonotonicClock()`. Every time in the lease logic is read from this clock. */
  readonly clock?: Clock;
  /** Bit layout (default `idmint`); its worker bits set how many worker IDs exist. */
  readonly layout?: Layout | LayoutSpec | string;
  readonly datacenterId?: number;
  /** Default `{ policy: 'wait' }`. */
  readonly rollback?: WorkerRollbackOptions;
  /** As SnowflakeGenerator's: default the layout's (100 for `leaf`, else 0). */
  readonly sequenceSpread?: number;
  readonly random?: () => number;
  /**
   * How often the lease is renewed and the generator's last timestamp reported. Default 3000 ms
   * (Leaf reports every 3 s), shortened to a third of what the TTL leaves after the margin. The
   * TTL minus the margin must hold at least two intervals.
   */
  readonly renewIntervalMs?: number;
  /** The generator stops this long before the lease could expire. Default 1000 ms. */
  readonly safetyMarginMs?: number;
  /**
   * How long {@link SnowflakeWorker.nextStringOrWait} and {@link SnowflakeWorker.nextBatchAsync}
   * wait, when they find the generator fenced, for the renewal due or in flight to confirm the
   * lease before they give up with LEASE_LOST. Default 3000 ms; 0 refuses at once.
   */
  readonly waitTimeoutMs?: number;
  /** Check the clock against live peers at start-up: refuse (default), warn, or off. */
  readonly peerClockCheck?: PeerClockCheck;
  /** Largest allowed distance from the mean of the live peers' clocks. Default 5000 ms. */
  readonly maxPeerSkewMs?: number;
  /** Called on lease events, for logs. Must not throw. */
  readonly onEvent?: (event: SnowflakeWorkerEvent) => void;
}

/** Something a log should say about the lease. */
export type SnowflakeWorkerEvent = LeaseEvent;

/**
 * What /readyz and metrics read; a fresh object on each call (with the lease holder's counters).
 */
export interface SnowflakeWorkerState extends LeaseStats {
  readonly backend: string;
  /** The worker ID in use (the last one, while recovering). */
  readonly workerId: number;
  /**
   * `active`: lease confirmed, IDs are issued. `fenced`: renewals failing and the lease no longer
   * confirmed, so nothing is issued until one succeeds. `recovering`: the lease was lost; a new
   * one is being acquired. `closed`.
   */
  readonly status: 'active' | 'fenced' | 'recovering' | 'closed';
  /** The worker's clock when this state was read (validUntil and the other times are on it). */
  readonly now: number;
  /** True when IDs can be issued now (status `active`): the readiness signal. */
  readonly ready: boolean;
  /** Clock time at which the generator stops unless the lease is renewed first. */
  readonly validUntil: number;
  /** Times a generator of this worker found the clock behind a time it had used (all leases). */
  readonly clockRollbacks: number;
  /**
   * Requests that found the generator fenced and waited for a renewal to confirm the lease
   * (answered with IDs or, when it was not confirmed in time, LEASE_LOST).
   */
  readonly fencedWaits: number;
  /**
   * How a clock found behind is handled: the generator's policy (`wait`, `refuse`, `borrow`,
   * `history`) or `switch-worker`.
   */
  readonly rollbackPolicy: string;
  /** The start-up comparison with the live peers' clocks; null when it did not run (check off). */
  readonly peerClock: PeerClockReport | null;
}

export type { PeerClockReport };

/**
 * A snowflake generator whose worker ID is leased from a {@link WorkerRegistry}: the piece the
 * server runs. See docs/workers.md for the design; in short:
 *
 * - Start-up: check the clock against the live peers' (refuse if more than `maxPeerSkewMs` from
 *   their mean), acquire an ID, check the clock against its record (refuse if behind the time its
 *   previous holder last reported; wait if only behind the horizon it reserved), record a horizon,
 *   then issue.
 * - Every renewal reports a horizon: the fence (lease expiry as seen locally, minus the safety
 *   margin) plus the most a `borrow` generator can lead its clock. The generator is fenced at the
 *   fence, so nothing it issues is ever above what the registry recorded, even if the process is
 *   killed a moment later: the next holder starts after it. Issuing resumes only after a renewal
 *   is confirmed.
 * - A lost lease fences the generator at once and a new lease is acquired in the background.
 * - `close()` fences, then releases with the exact last timestamp, freeing the ID at once.
 *
 * The lease itself, and every transition between leases, is the {@link LeaseHolder}'s
 * (lease-holder.ts): one transition in flight at a time. This class is the face of it.
 *
 * `next()`, `nextString()` and `nextBatch()` are the generator's own synchronous methods: no
 * await and no allocation is added on the hot path; they refuse (LEASE_LOST) whenever the
 * generator is fenced. `nextStringOrWait()` and `nextBatchAsync()`, the server's, wait up to
 * `waitTimeoutMs` when the fence is only a renewal behind (a stall of the process), and mint a
 * batch without blocking the event loop.
 */
export class SnowflakeWorker {
  readonly layout: Layout;
  /**
   * The largest `count` {@link nextBatchAsync} takes: what this worker's layout issues in
   * BATCH_WINDOW_MS (100 ms), so a batch of any allowed size is minted in about that long.
   */
  readonly maxBatch: number;
  readonly #registry: WorkerRegistry;
  readonly #clock: Clock;
  readonly #switchWorker: boolean;
  readonly #peerCheck: PeerClockCheck;
  readonly #maxPeerSkewMs: number;
  readonly #onEvent: ((event: SnowflakeWorkerEvent) => void) | undefined;
  readonly #terms: LeaseTerms;
  readonly #waitTimeoutMs: number;
  #fencedWaits = 0;
  /** Set once start() has its first lease; never undefined after. */
  #holder!: LeaseHolder;

  /** Issues the IDs; fenced (never null) while there is no lease, so `next()` needs no check. */
  #generator!: SnowflakeGenerator;
  /** Clock rollbacks seen by the generators of earlier leases. */
  #rollbacksBefore = 0;
  readonly #rollbackPolicy: string;
  #peerClock: PeerClockReport | null = null;
  /**
   * Settles when the last batch asked of {@link nextBatchAsync} is done (never rejects): each
   * batch waits for the one before it, so batches are minted one at a time in arrival order.
   */
  #lastBatch: Promise<unknown> = Promise.resolve();

  private constructor(options: SnowflakeWorkerOptions) {
    if (options === null || typeof options !== 'object' || options.registry === undefined) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        'SnowflakeWorker.start needs options with a registry (see openWorkerRegistry)',
      );
    }
    this.#registry = options.registry;
    this.#clock = options.clock ?? new MonotonicClock();
    this.layout = resolveLayout(options.layout);
    const { generatorRollback, switchWorker, leadMs } = workerRollback(options.rollback);
    this.#switchWorker = switchWorker;
    this.#rollbackPolicy = options.rollback?.policy ?? 'wait';
    const limits = WORKER_OPTION_BOUNDS;
    const marginMs = integer(
      'safetyMarginMs',
      options.safetyMarginMs ?? DEFAULT_SAFETY_MARGIN_MS,
      limits.safetyMarginMs.min,
      limits.safetyMarginMs.max,
    );
    this.#maxPeerSkewMs = integer(
      'maxPeerSkewMs',
      options.maxPeerSkewMs ?? DEFAULT_MAX_PEER_SKEW_MS,
      limits.maxPeerSkewMs.min,
      limits.maxPeerSkewMs.max,
    );
    this.#peerCheck = options.peerClockCheck ?? 'refuse';
    if (!PEER_CLOCK_CHECKS.includes(this.#peerCheck)) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `peerClockCheck must be refuse, warn or off, got ${String(this.#peerCheck)}`,
      );
    }
    this.#waitTimeoutMs = integer(
      'waitTimeoutMs',
      options.waitTimeoutMs ?? DEFAULT_FENCED_WAIT_MS,
      limits.waitTimeoutMs.min,
      limits.waitTimeoutMs.max,
    );
    if (options.renewIntervalMs !== undefined)
      integer(
        'renewIntervalMs',
        options.renewIntervalMs,
        limits.renewIntervalMs.min,
        limits.renewIntervalMs.max,
      );
    this.#onEvent = options.onEvent;
    const layout = this.layout;
    const clock = this.#clock;
    // The generator checks the spread against the layout; the bound only needs it as given.
    this.maxBatch = maxBatchFor(layout, options.sequenceSpread ?? layout.sequenceSpread);
    this.#terms = {
      registry: this.#registry,
      identity: options.identity ?? localNodeIdentity(),
      clock,
      timers: systemTimers,
      maxWorkers: layout.maxWorkerId + 1,
      marginMs,
      leadMs,
      renewIntervalMs: options.renewIntervalMs,
      switchWorker: this.#switchWorker,
      createGenerator: (workerId, lastTimestamp) =>
        new SnowflakeGenerator({
          clock,
          layout,
          workerId,
          datacenterId: options.datacenterId,
          rollback: generatorRollback,
          sequenceSpread: options.sequenceSpread,
          random: options.random,
          lastTimestamp,
        }),
    };
  }

  /**
   * Acquires a worker ID, runs the start-up clock checks, records a horizon and returns a worker
   * ready to issue IDs. Throws WORKER_IDS_EXHAUSTED, REGISTRY_UNAVAILABLE, CLOCK_MOVED_BACKWARDS
   * (clock behind this worker's record), CLOCK_SKEW (too far from the peers), INVALID_ARGUMENT.
   */
  static async start(options: SnowflakeWorkerOptions): Promise<SnowflakeWorker> {
    const worker = new SnowflakeWorker(options);
    // Before acquiring: this node is no peer of itself yet, and the lease's TTL is not running.
    await worker.#checkPeers();
    worker.#holder = await LeaseHolder.start(worker.#terms, {
      adopted: (generator) => worker.#adopt(generator),
      onEvent: (event) => worker.#emit(event),
    });
    return worker;
  }

  /** The worker ID IDs are issued with now. */
  get workerId(): number {
    return this.#generator.workerId;
  }

  /** The next ID. Throws LEASE_LOST while fenced, CLOCK_MOVED_BACKWARDS, TIME_OVERFLOW. */
  next(): bigint {
    try {
      return this.#generator.next();
    } catch (error) {
      throw this.#failed(error);
    }
  }

  /** The next ID as a decimal string, for the wire. */
  nextString(): string {
    return this.next().toString();
  }

  /**
   * {@link nextString} for a server: a string at once when the generator issues (no promise on
   * that path); when it is fenced while its lease is still this node's to confirm (a stall of
   * the process outran the renewal), a promise of the ID once a renewal confirms the lease,
   * waiting up to `waitTimeoutMs`. Rejects LEASE_LOST as {@link next} does when the lease is
   * lost, the worker closed, renewals failing, or the wait over.
   */
  nextStringOrWait(): string | Promise<string> {
    try {
      return this.#generator.next().toString();
    } catch (error) {
      // Only a fence is waited out; any other refusal is thrown as nextString() throws it.
      if (!isIdMintError(error, 'LEASE_LOST')) throw this.#failed(error);
      return this.#nextAfterFence(error);
    }
  }

  /**
   * `count` strictly increasing IDs, now. Synchronous: when a time unit's sequence runs out it
   * blocks the thread until the clock reaches the next one (js-safe: 64 IDs per ms, so 10,000
   * IDs block for about 150 ms). A server should use {@link nextBatchAsync}.
   */
  nextBatch(count: number): bigint[] {
    try {
      return this.#generator.nextBatch(count);
    } catch (error) {
      throw this.#failed(error);
    }
  }

  /**
   * `count` (1 to {@link maxBatch}) strictly increasing IDs, minted without blocking the event
   * loop: what a time unit holds is taken at once, and between time units the event loop runs
   * (timers, renewals, other requests) until the clock reaches the next. All from one lease:
   * if it is lost or switched meanwhile, this rejects (LEASE_LOST, CLOCK_MOVED_BACKWARDS) and
   * the IDs minted so far are dropped, never handed out. Concurrent batches are minted one at a
   * time in the order they were asked for: every ID of a batch is above every ID of the batches
   * asked before it (single IDs from {@link next} are not queued).
   */
  async nextBatchAsync(count: number): Promise<bigint[]> {
    if (!Number.isSafeInteger(count) || count < 1 || count > this.maxBatch) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `count must be an integer from 1 to ${this.maxBatch}, got ${String(count)}: ` +
          `${batchBoundReason(this.layout, this.maxBatch)}`,
      );
    }
    // One batch at a time, in arrival order. Without the queue, a time unit's IDs went to
    // whichever caller asked first after the clock ticked: a request arriving then (or the next
    // request of a connection just answered) took them ahead of batches already waiting for the
    // clock, and under load some batches waited seconds while others passed them. In turn, a
    // batch waits at most for the IDs asked before it: (IDs ahead) / (the layout's rate).
    const batch = this.#lastBatch.then(() => this.#mintBatch(count));
    this.#lastBatch = batch.then(
      () => undefined,
      () => undefined,
    );
    return batch;
  }

  /**
   * {@link nextBatchAsync}'s work, once the batches before it are done. A fenced generator whose
   * lease is still to be confirmed is waited for as {@link nextStringOrWait} does, then asked
   * again from where it stopped: the IDs already minted came from the same lease, below its fence.
   */
  async #mintBatch(count: number): Promise<bigint[]> {
    // The generator of the lease current when this batch's turn comes.
    const generator = this.#generator;
    const ids = new Array<bigint>(count);
    const minted = { count: 0 };
    let wait: FenceWait | undefined;
    try {
      for (;;) {
        try {
          await this.#fillBatch(generator, ids, minted);
          return ids;
        } catch (error) {
          if (generator !== this.#generator || !isIdMintError(error, 'LEASE_LOST')) throw error;
          wait ??= this.#fenceWait();
          if (!(await wait.settled())) throw error;
        }
      }
    } catch (error) {
      if (generator !== this.#generator && isIdMintError(error, 'LEASE_LOST')) {
        throw new IdMintError(
          'LEASE_LOST',
          `the lease of worker ${generator.workerId} ended while this batch was minted (now ` +
            `worker ${this.#generator.workerId}); none of its IDs was handed out: ask again`,
          {
            cause: error,
            details: { workerId: generator.workerId },
          },
        );
      }
      throw this.#failed(error);
    } finally {
      wait?.end();
    }
  }

  /**
   * Fills `ids` from `minted.count` on with `generator`'s IDs, letting the event loop run between
   * time units; `minted.count` follows what is done, so a refusal midway can be resumed.
   */
  async #fillBatch(
    generator: SnowflakeGenerator,
    ids: bigint[],
    minted: { count: number },
  ): Promise<void> {
    const clock = this.#clock;
    const count = ids.length;
    let i = generator.nextReady(ids, minted.count, count);
    minted.count = i;
    let stalls = 0;
    while (i < count) {
      const before = clock.now();
      await sleep(Math.max(1, generator.readyAt() - before));
      const from = i;
      i = generator.nextReady(ids, i, count);
      minted.count = i;
      if (i > from || clock.now() !== before) {
        stalls = 0;
        continue;
      }
      // The clock did not move while we waited. A 1 ms timer can fire within the same
      // millisecond (about 1 in 300), so wait again; three times in a row means a clock that
      // moves only when asked to sleep (ManualClock): the generator's own rule then decides.
      if (++stalls === 3) {
        ids[i] = generator.next();
        minted.count = ++i;
        stalls = 0;
      }
    }
  }

  /**
   * A request refused LEASE_LOST by a fenced generator: wait for the lease to be confirmed (see
   * FenceWait), asking the generator again after each step; the generator's refusal stands when
   * the wait ends without one.
   */
  async #nextAfterFence(refusal: IdMintError): Promise<string> {
    let error: unknown = refusal;
    const wait = this.#fenceWait();
    try {
      while (await wait.settled()) {
        try {
          // The current generator: a switch meanwhile hands over to a lease held as well.
          return this.#generator.next().toString();
        } catch (retryError) {
          error = retryError;
          if (!isIdMintError(error, 'LEASE_LOST')) break;
        }
      }
    } finally {
      wait.end();
    }
    throw this.#failed(error);
  }

  #fenceWait(): FenceWait {
    return new FenceWait(
      () => this.#holder.confirmation(),
      this.#waitTimeoutMs,
      this.#terms.timers,
      () => this.#fencedWaits++,
    );
  }

  state(): SnowflakeWorkerState {
    const phase = this.#holder.phase;
    const validUntil =
      phase === 'holding' ? this.#generator.validUntil() : Number.NEGATIVE_INFINITY;
    const now = this.#clock.now();
    const status =
      phase === 'closed'
        ? 'closed'
        : phase === 'recovering'
          ? 'recovering'
          : now < validUntil
            ? 'active'
            : 'fenced';
    return {
      backend: this.#registry.backend,
      workerId: this.#generator.workerId,
      status,
      now,
      ready: status === 'active',
      validUntil,
      ...this.#holder.stats(),
      clockRollbacks: this.#rollbacksBefore + this.#generator.rollbackCount(),
      fencedWaits: this.#fencedWaits,
      rollbackPolicy: this.#rollbackPolicy,
      peerClock: this.#peerClock,
    };
  }

  /**
   * Stops issuing, then releases the lease with the exact last timestamp, so the next node can
   * take the worker ID at once. Throws if the release fails (the lease then lapses by its TTL).
   */
  close(): Promise<void> {
    return this.#holder.close();
  }

  // ---- helpers ------------------------------------------------------------------------------

  /** A new lease's generator issues from now on. */
  #adopt(generator: SnowflakeGenerator): void {
    // The generator is undefined only before the first lease.
    if ((this.#generator as SnowflakeGenerator | undefined) !== undefined)
      this.#rollbacksBefore += this.#generator.rollbackCount();
    this.#generator = generator;
  }

  /**
   * Turns a generator error into the caller's; a large rollback under `switch-worker` starts a
   * switch.
   */
  #failed(error: unknown): unknown {
    if (!isIdMintError(error)) return error;
    if (error.code === 'CLOCK_MOVED_BACKWARDS' && this.#switchWorker) this.#holder.requestSwitch();
    const phase = this.#holder.phase;
    if (error.code === 'LEASE_LOST' && phase !== 'holding') {
      const why =
        phase === 'closed'
          ? 'the worker is closed'
          : 'its lease was lost and a new one is being acquired';
      return new IdMintError(
        'LEASE_LOST',
        `worker ${this.#generator.workerId} issues no IDs: ${why}`,
        { cause: error, details: { workerId: this.#generator.workerId } },
      );
    }
    return error;
  }

  /**
   * The start-up check against the live peers' clocks. It runs once, before this node holds a
   * lease: a running node was admitted already, and lease recoveries do not repeat it.
   */
  async #checkPeers(): Promise<void> {
    if (this.#peerCheck === 'off') return;
    const { report, event } = await checkPeerClocks({
      registry: this.#registry,
      clock: this.#clock,
      check: this.#peerCheck,
      maxPeerSkewMs: this.#maxPeerSkewMs,
    });
    this.#peerClock = report;
    if (event !== undefined) this.#emit(event);
  }

  #emit(event: SnowflakeWorkerEvent): void {
    try {
      this.#onEvent?.(event);
    } catch {
      // A logging hook must not break the lease logic.
    }
  }
}

/** A worker's rollback option as its lease terms and its generators take it. */
export interface WorkerRollback {
  /** The generators' policy: as given, or `wait` (same bounds) for `switch-worker`. */
  readonly generatorRollback: RollbackPolicyOptions;
  readonly switchWorker: boolean;
  /** How far a generator may issue ahead of its clock: `borrow`'s maxLeadMs, else 0. */
  readonly leadMs: number;
}

/**
 * Splits a worker's rollback option into the generators' policy and the lease terms' part
 * (LeaseTerms.switchWorker, .leadMs). Throws INVALID_ARGUMENT for a bad policy or bound.
 * Shared with the lease simulation, which builds its holders' terms with it.
 */
export function workerRollback(rollback: WorkerRollbackOptions | undefined): WorkerRollback {
  const { policy, ...bounds } = rollback ?? {};
  const generatorRollback: RollbackPolicyOptions = {
    ...bounds,
    policy: policy === 'switch-worker' ? 'wait' : policy,
  };
  const resolved = resolveRollbackPolicy(generatorRollback);
  return {
    generatorRollback,
    switchWorker: policy === 'switch-worker',
    // The horizon reported covers what the generator may borrow past its fence.
    leadMs: resolved.name === 'borrow' ? resolved.maxLeadMs : 0,
  };
}

/** Why a batch is bounded, for the error that refuses a larger one (library and route alike). */
export function batchBoundReason(layout: Layout, limit: number): string {
  return (
    `layout "${layout.name}" issues ${limit} IDs in ${BATCH_WINDOW_MS} ms, the most one batch ` +
    `may take; ask for more in several requests`
  );
}

function integer(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${name} must be an integer from ${min} to ${max}, got ${String(value)}`,
    );
  }
  return value;
}
