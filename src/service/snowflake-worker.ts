import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import { resolveRollbackPolicy, type RollbackPolicyOptions } from '../core/clock-policy.ts';
import { IdMintError, isIdMintError } from '../core/errors.ts';
import { resolveLayout, type Layout, type LayoutSpec } from '../core/layout.ts';
import { SnowflakeGenerator } from '../core/snowflake.ts';
import type { Clock } from '../ports/clock.ts';
import type { NodeIdentity, WorkerLease, WorkerRegistry, WorkerReport } from '../ports/worker-registry.ts';
import { withTimeout } from '../core/timeout.ts';
import { iso } from '../registries/common.ts';
import { localNodeIdentity } from './node-identity.ts';

/**
 * A rollback policy for a worker: one of the generator's, or `switch-worker`, which waits out
 * small rollbacks as `wait` does (same bounds) and, on a larger one, moves to another worker ID
 * whose last timestamp is older than the clock, instead of refusing.
 */
export type WorkerRollbackOptions = RollbackPolicyOptions | (Omit<RollbackPolicyOptions, 'policy'> & { readonly policy: 'switch-worker' });

/** How the start-up check against live peers' clocks acts on a skew above `maxPeerSkewMs`. */
export type PeerClockCheck = 'refuse' | 'warn' | 'off';

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
  /** Check the clock against live peers at start-up: refuse (default), warn, or off. */
  readonly peerClockCheck?: PeerClockCheck;
  /** Largest allowed distance from the mean of the live peers' clocks. Default 5000 ms. */
  readonly maxPeerSkewMs?: number;
  /** Called on lease events, for logs. Must not throw. */
  readonly onEvent?: (event: SnowflakeWorkerEvent) => void;
}

/** Something a log should say about the lease. */
export interface SnowflakeWorkerEvent {
  readonly type:
    | 'acquired'
    | 'waiting-for-clock'
    | 'peer-clock-skew'
    | 'peer-check-skipped'
    | 'renew-failed'
    | 'lease-lost'
    | 'recovered'
    | 'recovery-failed'
    | 'switched-worker'
    | 'switch-failed'
    | 'released';
  readonly workerId: number;
  readonly message: string;
  readonly error?: IdMintError;
}

/** What /readyz and metrics read; a fresh object on each call. */
export interface SnowflakeWorkerState {
  readonly backend: string;
  /** The worker ID in use (the last one, while recovering). */
  readonly workerId: number;
  /**
   * `active`: lease confirmed, IDs are issued. `fenced`: renewals failing and the lease no longer
   * confirmed, so nothing is issued until one succeeds. `recovering`: the lease was lost; a new
   * one is being acquired. `closed`.
   */
  readonly status: 'active' | 'fenced' | 'recovering' | 'closed';
  /** True when IDs can be issued now (status `active`): the readiness signal. */
  readonly ready: boolean;
  /** Clock time at which the generator stops unless the lease is renewed first. */
  readonly validUntil: number;
  /** Clock time of the last confirmed renewal; -1 before the first. */
  readonly lastRenewedAt: number;
  /** Renewals failed in a row (0 after a success). */
  readonly renewFailures: number;
  readonly renewFailuresTotal: number;
  readonly leaseLosses: number;
  readonly workerSwitches: number;
  readonly lastError: string | null;
  /** Times a generator of this worker found the clock behind a time it had used (all leases). */
  readonly clockRollbacks: number;
}

/** A lease and the generator issuing under it. */
interface Holding {
  readonly lease: WorkerLease;
  readonly generator: SnowflakeGenerator;
  /** The highest lastTimestamp recorded for this lease (by us or, before us, by the registry). */
  recorded: number;
  /** Set when the holding stops issuing for good (lost, switched away from, closed). */
  retired: boolean;
}

/** Extra conditions when acquiring, for `switch-worker`. */
interface Wanted {
  readonly exclude?: readonly number[];
  readonly lastTimestampBelow?: number;
}

const DEFAULT_RENEW_INTERVAL_MS = 3000; // Leaf's report interval
const DEFAULT_SAFETY_MARGIN_MS = 1000;
const DEFAULT_MAX_PEER_SKEW_MS = 5000; // Leaf's threshold against the mean of the other nodes
/** The longest wait at start-up for the clock to pass a previous holder's reservation. */
const MAX_START_WAIT_MS = 600_000;

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
 * `next()`, `nextString()` and `nextBatch()` are the generator's own synchronous methods: no
 * await and no allocation is added on the hot path.
 */
export class SnowflakeWorker {
  readonly layout: Layout;
  readonly #registry: WorkerRegistry;
  readonly #identity: NodeIdentity;
  readonly #clock: Clock;
  readonly #options: SnowflakeWorkerOptions;
  readonly #generatorRollback: RollbackPolicyOptions;
  readonly #switchWorker: boolean;
  /** How far a `borrow` generator may issue ahead of its clock; 0 for the other policies. */
  readonly #leadMs: number;
  readonly #marginMs: number;
  readonly #peerCheck: PeerClockCheck;
  readonly #maxPeerSkewMs: number;

  /** Issues the IDs; fenced (never null) while there is no lease, so `next()` needs no check. */
  #generator!: SnowflakeGenerator;
  #holding: Holding | undefined;
  /** The last timestamp this process reached per worker ID, should it get one back. */
  readonly #highWater = new Map<number, number>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #tick: Promise<void> | undefined;
  #switching: Promise<void> | undefined;
  #lastSwitchAttempt = Number.NEGATIVE_INFINITY;
  #closed = false;
  /** Clock rollbacks seen by the generators of earlier leases. */
  #rollbacksBefore = 0;
  #stats = { lastRenewedAt: -1, renewFailures: 0, renewFailuresTotal: 0, leaseLosses: 0, workerSwitches: 0, lastError: null as string | null };

  private constructor(options: SnowflakeWorkerOptions) {
    if (options === null || typeof options !== 'object' || options.registry === undefined) {
      throw new IdMintError('INVALID_ARGUMENT', 'SnowflakeWorker.start needs options with a registry (see openWorkerRegistry)');
    }
    this.#options = options;
    this.#registry = options.registry;
    this.#identity = options.identity ?? localNodeIdentity();
    this.#clock = options.clock ?? new MonotonicClock();
    this.layout = resolveLayout(options.layout);
    const { policy, ...bounds } = options.rollback ?? {};
    this.#switchWorker = policy === 'switch-worker';
    this.#generatorRollback = { ...bounds, policy: policy === 'switch-worker' ? 'wait' : policy };
    const resolved = resolveRollbackPolicy(this.#generatorRollback);
    this.#leadMs = resolved.name === 'borrow' ? resolved.maxLeadMs : 0;
    this.#marginMs = integer('safetyMarginMs', options.safetyMarginMs ?? DEFAULT_SAFETY_MARGIN_MS, 0, 60_000);
    this.#maxPeerSkewMs = integer('maxPeerSkewMs', options.maxPeerSkewMs ?? DEFAULT_MAX_PEER_SKEW_MS, 0, 86_400_000);
    this.#peerCheck = options.peerClockCheck ?? 'refuse';
    if (!['refuse', 'warn', 'off'].includes(this.#peerCheck)) {
      throw new IdMintError('INVALID_ARGUMENT', `peerClockCheck must be refuse, warn or off, got ${String(this.#peerCheck)}`);
    }
    if (options.renewIntervalMs !== undefined) integer('renewIntervalMs', options.renewIntervalMs, 10, 600_000);
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
    let holding: Holding;
    for (let attempt = 1; ; attempt++) {
      try {
        holding = await worker.#establish({});
        break;
      } catch (error) {
        // A lease lost before anything was issued under it (a slow start on a loaded machine
        // outlasted its TTL) costs nothing: take another. Anything else is the caller's.
        if (!isIdMintError(error, 'LEASE_LOST') || attempt === 3) throw error;
      }
    }
    worker.#adopt(holding);
    worker.#emit('acquired', `acquired worker ${holding.lease.workerId} from the ${worker.#registry.backend} registry`);
    worker.#schedule(worker.#renewIntervalMs(holding.lease));
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

  /** `count` strictly increasing IDs. */
  nextBatch(count: number): bigint[] {
    try {
      return this.#generator.nextBatch(count);
    } catch (error) {
      throw this.#failed(error);
    }
  }

  state(): SnowflakeWorkerState {
    const validUntil = this.#holding === undefined ? Number.NEGATIVE_INFINITY : this.#generator.validUntil();
    const status = this.#closed ? 'closed' : this.#holding === undefined ? 'recovering' : this.#clock.now() < validUntil ? 'active' : 'fenced';
    return {
      backend: this.#registry.backend,
      workerId: this.#generator.workerId,
      status,
      ready: status === 'active',
      validUntil,
      ...this.#stats,
      clockRollbacks: this.#rollbacksBefore + this.#generator.rollbackCount(),
    };
  }

  /**
   * Stops issuing, then releases the lease with the exact last timestamp, so the next node can
   * take the worker ID at once. Throws if the release fails (the lease then lapses by its TTL).
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    const holding = this.#holding;
    if (holding !== undefined) retire(holding);
    this.#generator.setValidUntil(Number.NEGATIVE_INFINITY);
    await this.#tick?.catch(() => {});
    await this.#switching?.catch(() => {});
    this.#holding = undefined;
    if (holding === undefined) return;
    await holding.lease.release(this.#finalReport(holding));
    this.#emit('released', `released worker ${holding.lease.workerId}`);
  }

  // ---- establishing a lease ---------------------------------------------------------------

  /** Acquire, check the clock, create the generator (fenced), record a horizon, then unfence. */
  async #establish(wanted: Wanted): Promise<Holding> {
    const { exclude, lastTimestampBelow } = wanted;
    const lease = await this.#registry.acquire({ identity: this.#identity, maxWorkers: this.layout.maxWorkerId + 1, exclude, lastTimestampBelow });
    try {
      const now = this.#clock.now();
      // switch-worker asks for IDs last used before the clock (lastTimestampBelow): such an ID
      // is safe at once, whatever a previous holder's clock read when it reported.
      if (lease.reportedAt >= 0 && now < lease.reportedAt && wanted.lastTimestampBelow === undefined) {
        const behind = this.#clockBehind(lease, now);
        if (!this.#switchWorker) throw behind;
        return await this.#switchAtStart(lease, behind);
      }
      await this.#waitForClock(lease, this.#renewIntervalMs(lease));
      const lastTimestamp = Math.max(lease.lastTimestamp, this.#highWater.get(lease.workerId) ?? -1);
      const generator = new SnowflakeGenerator({
        clock: this.#clock,
        layout: this.layout,
        workerId: lease.workerId,
        datacenterId: this.#options.datacenterId,
        rollback: this.#generatorRollback,
        sequenceSpread: this.#options.sequenceSpread,
        random: this.#options.random,
        lastTimestamp: lastTimestamp >= 0 ? lastTimestamp : undefined,
      });
      // Nothing is issued until the registry has recorded a horizon above it.
      generator.setValidUntil(Number.NEGATIVE_INFINITY);
      const holding: Holding = { lease, generator, recorded: lease.lastTimestamp, retired: false };
      await this.#renew(holding);
      return holding;
    } catch (error) {
      // Leave the record as we found it: nothing was issued under this lease.
      await lease.release(unchanged(lease)).catch(() => {});
      throw error;
    }
  }

  /** `switch-worker` at start-up: the clock is behind this ID's record, so take another ID. */
  async #switchAtStart(lease: WorkerLease, behind: IdMintError): Promise<Holding> {
    let other: Holding;
    try {
      other = await this.#establish({ exclude: [lease.workerId], lastTimestampBelow: this.#clock.now() });
    } catch (error) {
      throw new IdMintError('CLOCK_MOVED_BACKWARDS', `${behind.message}; switch-worker found no other worker ID to use (${(error as Error).message})`, {
        cause: error,
        details: behind.details,
      });
    }
    await lease.release(unchanged(lease)).catch(() => {});
    this.#stats.workerSwitches++;
    this.#emit('switched-worker', `${behind.message}; switched to worker ${other.lease.workerId}, last used before the clock`);
    return other;
  }

  /**
   * The previous holder reserved up to `lease.lastTimestamp` (a horizon above anything it could
   * issue). The clock is not behind its reports, so this is no clock fault, only the end of its
   * reservation, as after a kill: wait (without blocking the event loop) until the clock passes,
   * keeping the lease alive meanwhile with the record left as it is.
   */
  async #waitForClock(lease: WorkerLease, intervalMs: number): Promise<void> {
    let now = this.#clock.now();
    if (now > lease.lastTimestamp) return;
    const waitMs = lease.lastTimestamp - now;
    if (waitMs > MAX_START_WAIT_MS) throw this.#clockBehind(lease, now);
    this.#emit('waiting-for-clock', `worker ${lease.workerId}: waiting ${waitMs} ms for the clock to pass ${iso(lease.lastTimestamp)}, the horizon its previous holder reserved`);
    let renewedAt = now;
    while (now <= lease.lastTimestamp) {
      if (this.#closed) throw new IdMintError('LEASE_LOST', 'the worker was closed while starting');
      if (now - renewedAt >= intervalMs) {
        renewedAt = now;
        await lease.renew(unchanged(lease));
      }
      await sleep(Math.min(lease.lastTimestamp - now + 1, 250));
      now = this.#clock.now();
    }
  }

  /**
   * The start-up check against the live peers' clocks. It runs once, before this node holds a
   * lease: a running node was admitted already, and lease recoveries do not repeat it.
   */
  async #checkPeers(): Promise<void> {
    if (this.#peerCheck === 'off') return;
    let peers;
    try {
      peers = await this.#registry.peers();
    } catch (error) {
      // Only a coordinator can tell the peers' clocks. When it cannot (a start from the
      // weak-dependency cache), the check against the worker ID's own record still runs.
      if (!isIdMintError(error, 'REGISTRY_UNAVAILABLE')) throw error;
      this.#emit('peer-check-skipped', `could not compare the clock with the live peers' (${error.message}); starting on the check against the worker ID's record alone`, error);
      return;
    }
    if (peers.length === 0) return;
    const now = this.#clock.now();
    // Each peer's clock now: its last report plus how long ago the coordinator received it.
    const mean = peers.reduce((sum, peer) => sum + peer.reportedAt + peer.ageMs, 0) / peers.length;
    const offset = Math.round(now - mean);
    if (Math.abs(offset) <= this.#maxPeerSkewMs) return;
    const error = new IdMintError(
      'CLOCK_SKEW',
      `the local clock reads ${iso(now)}, ${Math.abs(offset)} ms ${offset < 0 ? 'behind' : 'ahead of'} the mean of ${peers.length} live peers' clocks (${iso(Math.round(mean))}); the limit is ${this.#maxPeerSkewMs} ms (maxPeerSkewMs): fix the clock (NTP) on this node or on the peers`,
      { details: { clockMs: now, peersMeanMs: Math.round(mean), offsetMs: offset, peers: peers.length, limitMs: this.#maxPeerSkewMs } },
    );
    if (this.#peerCheck === 'refuse') throw error;
    this.#emit('peer-clock-skew', error.message, error);
  }

  #clockBehind(lease: WorkerLease, now: number): IdMintError {
    const offset = lease.reportedAt - now;
    return new IdMintError(
      'CLOCK_MOVED_BACKWARDS',
      `worker ${lease.workerId}: the local clock reads ${iso(now)}, ${offset} ms behind ${iso(lease.reportedAt)}, the time its previous holder's clock showed at its last report to the ${this.#registry.backend} registry (its IDs reach ${iso(lease.lastTimestamp)}); refusing to start rather than risk repeating IDs: fix the clock, or start once it has passed that time`,
      { details: { workerId: lease.workerId, clockMs: now, recordedMs: lease.reportedAt, lastTimestamp: lease.lastTimestamp, offsetMs: offset } },
    );
  }

  // ---- renewing -----------------------------------------------------------------------------

  /**
   * Renews the lease, reporting a horizon: everything the generator can issue before the new
   * fence. Only once the registry confirms is the fence moved up to it.
   */
  async #renew(holding: Holding): Promise<void> {
    const t0 = this.#clock.now();
    const { lease, generator } = holding;
    const fence = t0 + lease.ttlMs - this.#marginMs;
    const horizon = Math.max(fence + this.#leadMs, generator.lastTimestamp(), holding.recorded);
    const renewal = lease.renew({ lastTimestamp: horizon, reportedAt: t0 });
    const granted = await withTimeout(renewal, Math.max(1000, this.#renewIntervalMs(lease)), () =>
      new IdMintError('REGISTRY_UNAVAILABLE', `${this.#registry.backend} registry did not confirm the renewal of worker ${lease.workerId} in time`),
    );
    holding.recorded = horizon;
    // A renewal that finishes after the holding was retired (lost, switched, closed) must not
    // lift the fence that retired it.
    if (holding.retired) return;
    this.#stats.lastRenewedAt = t0;
    // A TTL granted shorter than asked shortens the fence; a longer one never lifts it past the
    // horizon just recorded.
    generator.setValidUntil(Math.min(t0 + granted - this.#marginMs, horizon - this.#leadMs));
  }

  #renewIntervalMs(lease: WorkerLease): number {
    const usable = lease.ttlMs - this.#marginMs;
    const interval = this.#options.renewIntervalMs ?? Math.min(DEFAULT_RENEW_INTERVAL_MS, Math.floor(usable / 3));
    if (interval < 1 || usable < 2 * interval) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `the lease TTL (${lease.ttlMs} ms) minus safetyMarginMs (${this.#marginMs}) must hold at least two renewals of ${interval} ms (renewIntervalMs): raise the TTL or lower the interval or margin`,
      );
    }
    return interval;
  }

  #schedule(delayMs: number): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#tick = this.#onTick().finally(() => {
        this.#tick = undefined;
      });
    }, delayMs);
    // The lease is the host's business to end (close()); it must not keep a process alive.
    this.#timer.unref?.();
  }

  async #onTick(): Promise<void> {
    const holding = this.#holding;
    if (this.#closed) return;
    if (holding === undefined) return this.#recover();
    const interval = this.#renewIntervalMs(holding.lease);
    try {
      await this.#renew(holding);
      this.#stats.renewFailures = 0;
      this.#schedule(interval);
    } catch (error) {
      const failure = asIdMintError(error);
      this.#stats.lastError = failure.message;
      if (failure.code === 'LEASE_LOST') {
        this.#lose(holding, failure);
        return;
      }
      this.#stats.renewFailures++;
      this.#stats.renewFailuresTotal++;
      this.#emit('renew-failed', `renewing worker ${holding.lease.workerId} failed (${this.#stats.renewFailures} in a row); IDs stop at ${iso(holding.generator.validUntil())} unless a renewal succeeds first`, failure);
      this.#schedule(Math.max(100, Math.floor(interval / 3)));
    }
  }

  // ---- losing and recovering ----------------------------------------------------------------

  #adopt(holding: Holding): void {
    // The generator is undefined only before the first lease.
    if ((this.#generator as SnowflakeGenerator | undefined) !== undefined) this.#rollbacksBefore += this.#generator.rollbackCount();
    this.#holding = holding;
    this.#generator = holding.generator;
    const { lost } = holding.lease;
    if (lost.aborted) queueMicrotask(() => this.#lose(holding, asIdMintError(lost.reason)));
    else lost.addEventListener('abort', () => this.#lose(holding, asIdMintError(lost.reason)), { once: true });
  }

  /** The lease is gone: stop issuing at once, then acquire a new one in the background. */
  #lose(holding: Holding, error: IdMintError): void {
    if (this.#holding !== holding || this.#closed) return;
    retire(holding);
    this.#remember(holding);
    this.#holding = undefined;
    this.#stats.leaseLosses++;
    this.#stats.lastError = error.message;
    this.#emit('lease-lost', `lost the lease on worker ${holding.lease.workerId}: issuing stopped; acquiring a new worker ID`, error);
    this.#schedule(0);
  }

  async #recover(): Promise<void> {
    try {
      const holding = await this.#establish({});
      if (this.#closed) {
        await holding.lease.release(this.#finalReport(holding)).catch(() => {});
        return;
      }
      this.#adopt(holding);
      this.#emit('recovered', `acquired worker ${holding.lease.workerId} again; issuing resumed`);
      this.#schedule(this.#renewIntervalMs(holding.lease));
    } catch (error) {
      const failure = asIdMintError(error);
      this.#stats.lastError = failure.message;
      this.#emit('recovery-failed', `acquiring a new worker ID failed: ${failure.message}`, failure);
      this.#schedule(this.#options.renewIntervalMs ?? DEFAULT_RENEW_INTERVAL_MS);
    }
  }

  // ---- switch-worker ------------------------------------------------------------------------

  /** Turns a generator error into the caller's; a large rollback under `switch-worker` starts a switch. */
  #failed(error: unknown): unknown {
    if (!isIdMintError(error)) return error;
    if (error.code === 'CLOCK_MOVED_BACKWARDS' && this.#switchWorker) this.#requestSwitch();
    if (error.code === 'LEASE_LOST' && this.#holding === undefined) {
      const why = this.#closed ? 'the worker is closed' : 'its lease was lost and a new one is being acquired';
      return new IdMintError('LEASE_LOST', `worker ${this.#generator.workerId} issues no IDs: ${why}`, { cause: error, details: { workerId: this.#generator.workerId } });
    }
    return error;
  }

  #requestSwitch(): void {
    const now = this.#clock.now();
    if (this.#switching !== undefined || this.#closed || this.#holding === undefined) return;
    // At most one attempt per renewal interval: every refused call would otherwise ask again.
    if (now - this.#lastSwitchAttempt < (this.#options.renewIntervalMs ?? DEFAULT_RENEW_INTERVAL_MS) && now >= this.#lastSwitchAttempt) return;
    this.#lastSwitchAttempt = now;
    this.#switching = this.#switch().finally(() => {
      this.#switching = undefined;
    });
  }

  /**
   * The clock went back further than the generator waits out: take another worker ID, one last
   * used before the clock's current reading, so IDs continue at once and stay unique; then fence
   * and release the old ID with its exact last timestamp.
   */
  async #switch(): Promise<void> {
    const old = this.#holding;
    if (old === undefined) return;
    try {
      const next = await this.#establish({ exclude: [old.lease.workerId], lastTimestampBelow: this.#clock.now() });
      if (this.#closed || this.#holding !== old) {
        await next.lease.release(this.#finalReport(next)).catch(() => {});
        return;
      }
      retire(old);
      this.#remember(old);
      this.#adopt(next);
      this.#stats.workerSwitches++;
      this.#emit('switched-worker', `the clock went back past what the rollback policy waits out; switched from worker ${old.lease.workerId} to worker ${next.lease.workerId}`);
      await old.lease.release(this.#finalReport(old)).catch((error: unknown) => {
        this.#stats.lastError = asIdMintError(error).message;
      });
    } catch (error) {
      const failure = asIdMintError(error);
      this.#stats.lastError = failure.message;
      this.#emit('switch-failed', `switch-worker found no worker ID to move to: ${failure.message}`, failure);
    }
  }

  // ---- helpers ------------------------------------------------------------------------------

  /** What release records: the exact last timestamp, never below what the registry had. */
  #finalReport(holding: Holding): WorkerReport {
    this.#remember(holding);
    return { lastTimestamp: Math.max(holding.generator.lastTimestamp(), holding.lease.lastTimestamp), reportedAt: this.#clock.now() };
  }

  #remember(holding: Holding): void {
    const id = holding.lease.workerId;
    this.#highWater.set(id, Math.max(this.#highWater.get(id) ?? -1, holding.generator.lastTimestamp()));
  }

  #emit(type: SnowflakeWorkerEvent['type'], message: string, error?: IdMintError): void {
    try {
      this.#options.onEvent?.({ type, workerId: this.#holding?.lease.workerId ?? this.#generator?.workerId ?? -1, message, error });
    } catch {
      // A logging hook must not break the lease logic.
    }
  }
}

function asIdMintError(error: unknown): IdMintError {
  if (error instanceof IdMintError) return error;
  return new IdMintError('REGISTRY_UNAVAILABLE', error instanceof Error ? error.message : String(error), { cause: error });
}

function integer(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new IdMintError('INVALID_ARGUMENT', `${name} must be an integer from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Stops a holding's generator for good. */
function retire(holding: Holding): void {
  holding.retired = true;
  holding.generator.setValidUntil(Number.NEGATIVE_INFINITY);
}

/** A report that leaves a lease's record as the registry had it. */
function unchanged(lease: WorkerLease): WorkerReport {
  return { lastTimestamp: lease.lastTimestamp, reportedAt: lease.reportedAt };
}
