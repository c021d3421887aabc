import { IdMintError } from '../core/errors.ts';
import type { SnowflakeGenerator } from '../core/snowflake.ts';
import type { TimerHandle } from '../ports/timers.ts';
import { withTimeout } from '../shared/timeout.ts';
import { iso } from '../core/time.ts';
import {
  establishHolding,
  finalReport,
  renewHolding,
  renewIntervalFor,
  retire,
  retryIntervalFor,
  type EstablishContext,
  type Holding,
  type LeaseTerms,
} from './lease-holding.ts';

/** How many settles of the registry's history a start waits out before it fails. */
const MAX_SETTLE_WAITS = 3;

/** Beyond the wait the registry named: its clock and ours tick apart by a few ms. */
const SETTLE_SLACK_MS = 100;

/**
 * The wait left (ms) when `error` is a registry's refusal while its database's history settles
 * (the WorkerRegistry port's acquire: details `settling` and `settlesInMs`); else undefined.
 */
function settlingWaitMs(error: unknown): number | undefined {
  if (!(error instanceof IdMintError) || error.code !== 'REGISTRY_UNAVAILABLE') return undefined;
  const wait = error.details?.['settlesInMs'];
  return error.details?.['settling'] === true && typeof wait === 'number' ? wait : undefined;
}

/** Something a log should say about the lease. */
export interface LeaseEvent {
  readonly type:
    | 'acquired'
    | 'waiting-for-clock'
    | 'waiting-for-registry'
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

/**
 * The transitions between leases. At most one is in flight at any time:
 *
 * - `acquire`: the first lease, at start-up;
 * - `renew`: report a horizon and, once confirmed, move the fence (`hold` between two renewals);
 * - `switch`: `switch-worker` takes another worker ID, then releases the old one;
 * - `lose`: the lease was reported lost (its generator was fenced at once, when the report came):
 *   release it, which frees it where the coordinator still has it and is a no-op where it does not;
 * - `recover`: acquire a new lease after a loss;
 * - `release`: close() gives the lease back with the exact last timestamp.
 */
export type LeaseTransition = 'acquire' | 'renew' | 'switch' | 'lose' | 'recover' | 'release';

/** Where the holder stands: holding a lease, without one (lost, recovering), or closed. */
export type LeasePhase = 'holding' | 'recovering' | 'closed';

/** Counters and the last failure, for state() and metrics. */
export interface LeaseStats {
  /** Clock time of the last confirmed renewal; -1 before the first. */
  readonly lastRenewedAt: number;
  /** Renewals failed in a row (0 after a success). */
  readonly renewFailures: number;
  readonly renewFailuresTotal: number;
  readonly leaseLosses: number;
  readonly workerSwitches: number;
  readonly lastError: string | null;
  /**
   * The horizon last recorded at the registry for the lease held (nothing this node issues is
   * later: the next holder starts after it); -1 without a lease.
   */
  readonly horizon: number;
}

/** How the holder talks to the worker it serves. */
export interface LeaseHolderHooks {
  /** A new lease's generator issues from now on (called before it can issue anything). */
  readonly adopted: (generator: SnowflakeGenerator) => void;
  /** Called on lease events, for logs. Must not throw. */
  readonly onEvent?: (event: LeaseEvent) => void;
}

/**
 * Holds one worker-ID lease at a time, over the life of a SnowflakeWorker: the lease state machine.
 *
 * Inputs arrive at any moment: the renewal timer, a loss signal from the registry, a switch
 * request from a generator that found the clock behind it, close(). Each input does its urgent,
 * synchronous part at once (a loss or close() fences the generator before returning), and every
 * step that talks to the registry is one transition (see {@link LeaseTransition}) run by
 * `#kick`, which starts one only when none is in flight. A transition that ends calls `#kick`
 * again, so an input that arrived meanwhile is handled then, exactly once: a loss signalled
 * during a renewal gives one recovery after the renewal, never two; a timer that fires during a
 * recovery waits for it; close() waits for the transition in flight and then releases whatever
 * lease it left. The lease currently held is in `#holding` alone, so every lease acquired ends
 * up held and renewed, or released.
 */
export class LeaseHolder {
  readonly #terms: LeaseTerms;
  readonly #hooks: LeaseHolderHooks;
  readonly #context: EstablishContext;

  #holding: Holding | undefined;
  /** The transition in flight and its completion; undefined when idle. */
  #transition: LeaseTransition | undefined;
  #inFlight: Promise<void> | undefined;
  #timer: TimerHandle | undefined;
  /** The timer fired: a renewal (or, without a lease, a recovery) is due. */
  #due = false;
  #switchWanted = false;
  #lastSwitchAttempt = Number.NEGATIVE_INFINITY;
  #closing: Promise<void> | undefined;
  /** The worker ID of the last lease adopted, for events once it is gone. */
  #lastWorkerId = -1;
  /** The last timestamp this process reached per worker ID, should it get one back. */
  readonly #highWater = new Map<number, number>();
  #stats = {
    lastRenewedAt: -1,
    renewFailures: 0,
    renewFailuresTotal: 0,
    leaseLosses: 0,
    workerSwitches: 0,
    lastError: null as string | null,
  };

  private constructor(terms: LeaseTerms, hooks: LeaseHolderHooks) {
    this.#terms = terms;
    this.#hooks = hooks;
    this.#context = {
      highWater: (workerId) => this.#highWater.get(workerId) ?? -1,
      closing: () => this.#closing !== undefined,
      switched: (message) => {
        this.#stats.workerSwitches++;
        this.#emit('switched-worker', message);
      },
      waiting: (workerId, message) => this.#emit('waiting-for-clock', message, undefined, workerId),
    };
  }

  /**
   * Takes the first lease (a lease lost before anything was issued under it is retried, twice),
   * hands its generator to `hooks.adopted` and starts renewing. Throws what establishing threw.
   */
  static async start(terms: LeaseTerms, hooks: LeaseHolderHooks): Promise<LeaseHolder> {
    const holder = new LeaseHolder(terms, hooks);
    holder.#transition = 'acquire';
    let holding: Holding;
    try {
      let settleWaits = 0;
      for (let attempt = 1; ; attempt++) {
        try {
          holding = await establishHolding(terms, holder.#context, {});
          break;
        } catch (error) {
          // A registry whose database just moved to a new history leases nothing for a known
          // while (one TTL plus the borrow lead): a node starting then waits it out instead of
          // failing its start. A few waits at most: a registry that keeps settling is failing.
          const settlesInMs = settlingWaitMs(error);
          if (settlesInMs !== undefined && settleWaits < MAX_SETTLE_WAITS) {
            settleWaits++;
            holder.#emit(
              'waiting-for-registry',
              `${(error as IdMintError).message}: waiting before asking again`,
              error as IdMintError,
            );
            await new Promise<void>((resolve) => {
              terms.timers.setTimeout(resolve, settlesInMs + SETTLE_SLACK_MS);
            });
            attempt--;
            continue;
          }
          // A lease lost before anything was issued under it (a slow start on a loaded machine
          // outlasted its TTL) costs nothing: take another. Anything else is the caller's.
          if (!(error instanceof IdMintError && error.code === 'LEASE_LOST') || attempt === 3)
            throw error;
        }
      }
      holder.#adopt(holding);
    } finally {
      holder.#transition = undefined;
    }
    holder.#emit(
      'acquired',
      `acquired worker ${holding.lease.workerId} from the ${terms.registry.backend} registry`,
    );
    holder.#arm(renewIntervalFor(terms, holding.lease));
    holder.#kick(); // a lease lost while it was being taken is handled now
    return holder;
  }

  /** Holding a lease, without one (lost, a new one being acquired), or closed. */
  get phase(): LeasePhase {
    if (this.#closing !== undefined) return 'closed';
    return this.#holding === undefined || this.#holding.lost !== undefined
      ? 'recovering'
      : 'holding';
  }

  stats(): LeaseStats {
    const holding = this.#holding;
    return {
      ...this.#stats,
      horizon: holding === undefined || holding.lost !== undefined ? -1 : holding.recorded,
    };
  }

  /**
   * `switch-worker`: the generator found the clock further back than it waits out; move to
   * another worker ID. At most one attempt per retry interval: every refused call asks again.
   */
  requestSwitch(): void {
    const holding = this.#holding;
    // A request during a switch comes from the generator being switched away from.
    if (
      this.#closing !== undefined ||
      holding === undefined ||
      holding.lost !== undefined ||
      this.#switchWanted ||
      this.#transition === 'switch'
    )
      return;
    const now = this.#terms.clock.now();
    if (
      now - this.#lastSwitchAttempt < retryIntervalFor(this.#terms) &&
      now >= this.#lastSwitchAttempt
    )
      return;
    this.#lastSwitchAttempt = now;
    this.#switchWanted = true;
    this.#kick();
  }

  /**
   * For a request that found the generator fenced: when the lease is still this node's to confirm
   * (held, not reported lost, renewals not failing), the completion of the transition that may
   * confirm it; undefined when there is nothing to wait for. A fenced generator with no
   * transition in flight renews now rather than when its timer fires: after a stall the event
   * loop may run the request before the late timer, and a renewal confirmed after the stall but
   * sent before it leaves the fence in the past until the next one.
   *
   * One failed renewal is retried so: a renewal in flight when the process stopped has its
   * timeout run out during the stop, whatever the coordinator answered. Two in a row mean the
   * coordinator is in trouble, and requests are refused at once, as before waits existed.
   */
  confirmation(): Promise<void> | undefined {
    const holding = this.#holding;
    if (
      this.#closing !== undefined ||
      holding === undefined ||
      holding.lost !== undefined ||
      this.#stats.renewFailures > 1
    )
      return undefined;
    if (this.#transition === undefined) {
      this.#due = true;
      this.#kick();
    }
    return this.#inFlight;
  }

  /**
   * Fences at once, waits for the transition in flight, then releases the lease held with the
   * exact last timestamp. Throws if that release fails (the lease then lapses by its TTL). A
   * second call waits for the first.
   */
  close(): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    this.#terms.timers.clearTimeout(this.#timer);
    const holding = this.#holding;
    if (holding !== undefined) this.#retire(holding);
    this.#closing = this.#release();
    return this.#closing;
  }

  // ---- the one place transitions start --------------------------------------------------------

  /** Starts the transition the state calls for, unless one is in flight. */
  #kick(): void {
    if (this.#transition !== undefined || this.#closing !== undefined) return;
    const holding = this.#holding;
    if (holding === undefined) {
      if (this.#due) this.#run('recover', () => this.#recover());
    } else if (holding.lost !== undefined) {
      this.#run('lose', () => this.#lose(holding));
    } else if (this.#switchWanted) {
      this.#run('switch', () => this.#switch(holding));
    } else if (this.#due) {
      this.#run('renew', () => this.#renew(holding));
    }
  }

  #run(transition: LeaseTransition, body: () => Promise<void>): void {
    this.#transition = transition;
    this.#inFlight = body()
      .catch((error: unknown) => {
        // Each transition handles the failures it expects; this is the net under it.
        this.#stats.lastError = asIdMintError(error).message;
      })
      .finally(() => {
        this.#transition = undefined;
        this.#inFlight = undefined;
        this.#kick();
      });
  }

  /** The next renewal (or, without a lease, recovery) is due in `delayMs`. */
  #arm(delayMs: number): void {
    const timers = this.#terms.timers;
    timers.clearTimeout(this.#timer);
    this.#due = false;
    if (this.#closing !== undefined) return;
    this.#timer = timers.setTimeout(() => {
      this.#timer = undefined;
      this.#due = true;
      this.#kick();
    }, delayMs);
    // The lease is the host's business to end (close()); it must not keep a process alive.
    this.#timer.unref?.();
  }

  // ---- the transitions --------------------------------------------------------------------------

  async #renew(holding: Holding): Promise<void> {
    this.#due = false;
    const interval = renewIntervalFor(this.#terms, holding.lease);
    try {
      const sentAt = await renewHolding(this.#terms, holding);
      if (sentAt === undefined) return; // retired meanwhile (lost): what follows is `lose`
      this.#stats.lastRenewedAt = sentAt;
      this.#stats.renewFailures = 0;
      this.#arm(interval);
    } catch (error) {
      const failure = asIdMintError(error);
      this.#stats.lastError = failure.message;
      if (failure.code === 'LEASE_LOST') return this.#markLost(holding, failure);
      if (holding.lost !== undefined) return; // the loss signal came first: `lose` follows
      this.#stats.renewFailures++;
      this.#stats.renewFailuresTotal++;
      this.#emit(
        'renew-failed',
        `renewing worker ${holding.lease.workerId} failed (${this.#stats.renewFailures} in ` +
          `a row); IDs stop at ${iso(holding.generator.validUntil())} unless a renewal ` +
          `succeeds first`,
        failure,
      );
      this.#arm(Math.max(100, Math.floor(interval / 3)));
    }
  }

  async #lose(holding: Holding): Promise<void> {
    this.#terms.timers.clearTimeout(this.#timer);
    // Where the coordinator dropped the lease this fails at once (LEASE_LOST); where a signal
    // came while it still holds it, this frees the ID with the exact last timestamp rather than
    // leaving it to lapse. Either way nothing more is issued under it: it was retired.
    await this.#bounded(
      holding,
      holding.lease.release(finalReport(holding, this.#terms.clock)),
    ).catch(() => {});
    this.#holding = undefined;
    this.#due = true; // recover at once
  }

  async #recover(): Promise<void> {
    this.#due = false;
    try {
      const holding = await establishHolding(this.#terms, this.#context, {});
      this.#adopt(holding);
      if (this.#closing !== undefined) return; // close() releases it
      this.#emit('recovered', `acquired worker ${holding.lease.workerId} again; issuing resumed`);
      this.#arm(renewIntervalFor(this.#terms, holding.lease));
    } catch (error) {
      const failure = asIdMintError(error);
      this.#stats.lastError = failure.message;
      if (this.#closing !== undefined) return;
      this.#emit(
        'recovery-failed',
        `acquiring a new worker ID failed: ${failure.message}`,
        failure,
      );
      this.#arm(retryIntervalFor(this.#terms));
    }
  }

  /**
   * The clock went back further than the generator waits out: take another worker ID, one last
   * used before the clock's current reading, so IDs continue at once and stay unique; then fence
   * and release the old ID with its exact last timestamp. No renewal of the old lease is in
   * flight meanwhile (one transition at a time), so its release is the last word on its record.
   */
  async #switch(old: Holding): Promise<void> {
    this.#switchWanted = false;
    let next: Holding;
    try {
      next = await establishHolding(this.#terms, this.#context, {
        exclude: [old.lease.workerId],
        lastTimestampBelow: this.#terms.clock.now(),
      });
    } catch (error) {
      const failure = asIdMintError(error);
      this.#stats.lastError = failure.message;
      this.#emit(
        'switch-failed',
        `switch-worker found no worker ID to move to: ${failure.message}`,
        failure,
      );
      return; // the old lease's renewals go on as scheduled
    }
    this.#retire(old);
    this.#adopt(next);
    this.#stats.workerSwitches++;
    this.#emit(
      'switched-worker',
      `the clock went back past what the rollback policy waits out; switched from worker ` +
        `${old.lease.workerId} to worker ${next.lease.workerId}`,
    );
    this.#arm(renewIntervalFor(this.#terms, next.lease));
    await this.#bounded(old, old.lease.release(finalReport(old, this.#terms.clock))).catch(
      (error: unknown) => {
        this.#stats.lastError = asIdMintError(error).message;
      },
    );
  }

  /** close(): after the transition in flight, release the lease it left held, if any. */
  async #release(): Promise<void> {
    await this.#inFlight;
    this.#transition = 'release';
    try {
      const holding = this.#holding;
      this.#holding = undefined;
      if (holding === undefined) return;
      this.#retire(holding); // a lease a recovery or switch adopted while close() waited
      const release = holding.lease.release(finalReport(holding, this.#terms.clock));
      if (holding.lost !== undefined) {
        await release.catch(() => {});
        return;
      }
      await release;
      this.#emit('released', `released worker ${holding.lease.workerId}`);
    } finally {
      this.#transition = undefined;
    }
  }

  // ---- helpers ----------------------------------------------------------------------------------

  #adopt(holding: Holding): void {
    this.#holding = holding;
    this.#lastWorkerId = holding.lease.workerId;
    // Closing while this lease was being taken: it issues nothing, and close() releases it.
    if (this.#closing !== undefined) this.#retire(holding);
    this.#hooks.adopted(holding.generator);
    const { lost } = holding.lease;
    const onLost = () => this.#markLost(holding, asIdMintError(lost.reason));
    if (lost.aborted) onLost();
    else lost.addEventListener('abort', onLost, { once: true });
  }

  /**
   * The registry reports the lease gone (a signal, or a renewal answered LEASE_LOST): stop
   * issuing now, synchronously; releasing it and recovering are the `lose` and `recover`
   * transitions, which start once the transition in flight, if any, has ended.
   */
  #markLost(holding: Holding, error: IdMintError): void {
    if (holding !== this.#holding || holding.lost !== undefined) return;
    this.#retire(holding);
    holding.lost = error;
    this.#stats.leaseLosses++;
    this.#stats.lastError = error.message;
    if (this.#closing === undefined) {
      this.#emit(
        'lease-lost',
        `lost the lease on worker ${holding.lease.workerId}: issuing stopped; acquiring a ` +
          `new worker ID`,
        error,
      );
    }
    this.#kick();
  }

  /** Stops a holding's generator for good, remembering how far it went. */
  #retire(holding: Holding): void {
    retire(holding);
    const id = holding.lease.workerId;
    this.#highWater.set(
      id,
      Math.max(this.#highWater.get(id) ?? -1, holding.generator.lastTimestamp()),
    );
  }

  /** A release that does not hold the next transition up for longer than a renewal may take. */
  #bounded(holding: Holding, release: Promise<void>): Promise<void> {
    const ms = Math.max(1000, renewIntervalFor(this.#terms, holding.lease));
    return withTimeout(
      release,
      ms,
      () =>
        new IdMintError(
          'REGISTRY_UNAVAILABLE',
          `${this.#terms.registry.backend} registry did not confirm the release of worker ` +
            `${holding.lease.workerId} in time`,
        ),
      this.#terms.timers,
    );
  }

  #emit(
    type: LeaseEvent['type'],
    message: string,
    error?: IdMintError,
    workerId = this.#lastWorkerId,
  ): void {
    try {
      this.#hooks.onEvent?.({ type, workerId, message, error });
    } catch {
      // A logging hook must not break the lease logic.
    }
  }
}

/** A failure as an IdMintError: registry trouble unless it already says what it is. */
export function asIdMintError(error: unknown): IdMintError {
  if (error instanceof IdMintError) return error;
  return new IdMintError(
    'REGISTRY_UNAVAILABLE',
    error instanceof Error ? error.message : String(error),
    { cause: error },
  );
}
