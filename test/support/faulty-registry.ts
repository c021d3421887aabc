import { IdMintError } from '../../src/core/errors.ts';
import type {
  AcquireRequest,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from '../../src/ports/worker-registry.ts';

/** A call of the port a {@link Gate} can hold. */
export type GatedCall = 'acquire' | 'renew' | 'release';

/**
 * Holds calls of one kind at the port until opened, so a test can act while a call is in flight:
 * fire a loss signal while a renewal is on its way, close a worker while a recovery waits for its
 * lease. Every call that arrives while the gate is shut waits; once it is opened (or failed) the
 * gate is gone and later calls pass untouched.
 */
export class Gate {
  readonly call: GatedCall;
  /** Only calls on this worker ID's leases are held (renew, release); undefined: every call. */
  readonly workerId: number | undefined;
  readonly #remove: () => void;
  /** Calls that have reached the gate so far. */
  arrived = 0;
  /** Resolves when the first call has reached the gate (it is then in flight, held). */
  readonly reached: Promise<void>;
  #arrivedOne!: () => void;
  #opened!: () => void;
  readonly #open: Promise<void>;
  #failure: IdMintError | undefined;

  constructor(call: GatedCall, workerId: number | undefined, remove: () => void) {
    this.call = call;
    this.workerId = workerId;
    this.#remove = remove;
    this.reached = new Promise((resolve) => (this.#arrivedOne = resolve));
    this.#open = new Promise((resolve) => (this.#opened = resolve));
  }

  /** Lets every held call, and every later one, through to the coordinator. */
  open(): void {
    this.#remove();
    this.#opened();
  }

  /** Fails each held call with `error` instead of letting it reach the coordinator. */
  fail(error: IdMintError): void {
    this.#remove();
    this.#failure = error;
    this.#opened();
  }

  /** Waits here until the gate opens; throws the injected failure, if any. */
  async pass(): Promise<void> {
    this.arrived++;
    this.#arrivedOne();
    await this.#open;
    if (this.#failure !== undefined) throw this.#failure;
  }
}

/** A lease as the fault injector hands it out, with what became of it. */
export interface FaultyLease extends WorkerLease {
  /** Aborts `lost` as a coordinator would that dropped the lease (the lease underneath stays). */
  loseNow(): void;
  /** Renewals the coordinator confirmed. */
  readonly renewals: number;
  /** True once a release was confirmed by the coordinator. */
  readonly released: boolean;
}

/** One report as the coordinator received it. */
export interface LandedReport {
  readonly workerId: number;
  readonly kind: 'renew' | 'release';
  readonly report: WorkerReport;
  /** Index of the lease in {@link FaultyRegistry.leases}. */
  readonly lease: number;
}

/**
 * A real registry with faults injected at the port: renewals that fail as if the coordinator
 * were unreachable, peers reporting chosen clocks, a lease loss signalled on demand, and gates
 * that hold a call in flight. The coordinator underneath stays real; only what the worker is told,
 * and when, changes.
 */
export class FaultyRegistry implements WorkerRegistry {
  readonly inner: WorkerRegistry;
  /** While true, renew() fails with REGISTRY_UNAVAILABLE without reaching the coordinator. */
  unreachable = false;
  /**
   * The next this many renewals fail with LEASE_LOST (a lease that expired before its first
   * renewal).
   */
  expireNext = 0;
  /** When set, peers() answers this instead of asking the coordinator. */
  peerTimes: PeerTime[] | undefined;
  /** Every report the worker sent, in order. */
  readonly reports: { workerId: number; kind: 'renew' | 'release'; report: WorkerReport }[] = [];
  /** Every report the coordinator confirmed, in the order it confirmed them. */
  readonly landed: LandedReport[] = [];
  /** Every lease acquired through this registry, in order. */
  readonly leases: FaultyLease[] = [];
  /**
   * Calls on one lease that started while another call on the same lease was still in flight (a
   * release sent while a renewal is on its way): a holder that serializes its transitions makes
   * none.
   */
  readonly overlaps: { lease: number; call: 'renew' | 'release'; during: 'renew' | 'release' }[] =
    [];
  readonly #gates = new Map<GatedCall, Gate>();

  constructor(inner: WorkerRegistry) {
    this.inner = inner;
  }

  get backend(): string {
    return this.inner.backend;
  }

  /**
   * Shuts a gate on the next calls of one kind (on one worker ID's leases, if given): they wait,
   * in flight, until it is opened. Each call is held before it reaches the coordinator.
   */
  hold(call: GatedCall, only: { readonly workerId?: number } = {}): Gate {
    const gate: Gate = new Gate(call, only.workerId, () => {
      if (this.#gates.get(call) === gate) this.#gates.delete(call);
    });
    this.#gates.set(call, gate);
    return gate;
  }

  /** Opens every gate: a test's clean-up, so nothing stays held after a failed assertion. */
  openAll(): void {
    for (const gate of [...this.#gates.values()]) gate.open();
  }

  async #pass(call: GatedCall, workerId?: number): Promise<void> {
    const gate = this.#gates.get(call);
    if (gate !== undefined && (gate.workerId === undefined || gate.workerId === workerId))
      await gate.pass();
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    await this.#pass('acquire');
    const lease = await this.inner.acquire(request);
    const controller = new AbortController();
    lease.lost.addEventListener('abort', () => controller.abort(lease.lost.reason), { once: true });
    const index = this.leases.length;
    let renewals = 0;
    let released = false;
    let inFlight: 'renew' | 'release' | undefined;
    const track = async <T>(call: 'renew' | 'release', run: () => Promise<T>): Promise<T> => {
      if (inFlight !== undefined) this.overlaps.push({ lease: index, call, during: inFlight });
      const outer = inFlight;
      inFlight = call;
      try {
        return await run();
      } finally {
        inFlight = outer;
      }
    };
    const faulty: FaultyLease = {
      workerId: lease.workerId,
      lastTimestamp: lease.lastTimestamp,
      reportedAt: lease.reportedAt,
      ttlMs: lease.ttlMs,
      lost: controller.signal,
      get renewals() {
        return renewals;
      },
      get released() {
        return released;
      },
      renew: (report: WorkerReport) =>
        track('renew', async () => {
          await this.#pass('renew', lease.workerId);
          if (this.unreachable)
            throw new IdMintError('REGISTRY_UNAVAILABLE', 'injected: coordinator unreachable');
          if (this.expireNext > 0) {
            this.expireNext--;
            throw new IdMintError('LEASE_LOST', 'injected: lease expired');
          }
          this.reports.push({ workerId: lease.workerId, kind: 'renew', report });
          const granted = await lease.renew(report);
          renewals++;
          this.landed.push({ workerId: lease.workerId, kind: 'renew', report, lease: index });
          return granted;
        }),
      release: (report: WorkerReport) =>
        track('release', async () => {
          await this.#pass('release', lease.workerId);
          this.reports.push({ workerId: lease.workerId, kind: 'release', report });
          await lease.release(report);
          released = true;
          this.landed.push({ workerId: lease.workerId, kind: 'release', report, lease: index });
        }),
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
