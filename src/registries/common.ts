import { IdMintError, isIdMintError } from '../core/errors.ts';
import { type BackendCauses, failureLine } from '../shared/failure-cause.ts';
import { iso } from '../core/time.ts';
import type {
  AcquireRequest,
  NodeIdentity,
  WorkerLease,
  WorkerReport,
} from '../ports/worker-registry.ts';

/**
 * What every worker registry adapter shares: request validation, the order in which free worker
 * IDs are tried, the lease-loss signal and the errors. Backend specifics stay in the adapters.
 */

/** An acquire request after validation, with the filters ready to apply. */
export interface AcquirePlan {
  readonly identity: NodeIdentity;
  readonly maxWorkers: number;
  /** Set when only one worker ID may be taken. */
  readonly only: number | undefined;
  readonly exclude: ReadonlySet<number>;
  /** Only IDs whose recorded lastTimestamp is below this; +Infinity when unrestricted. */
  readonly below: number;
}

/** Largest worker-ID space a registry accepts: the layout allows at most 31 worker bits. */
const MAX_WORKERS = 2 ** 31;

/**
 * Validates an acquire request; INVALID_ARGUMENT names the field, the value and what is allowed.
 */
export function planAcquire(request: AcquireRequest): AcquirePlan {
  const { identity, maxWorkers } = request;
  if (!Number.isSafeInteger(maxWorkers) || maxWorkers < 1 || maxWorkers > MAX_WORKERS) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `maxWorkers must be an integer from 1 to ${MAX_WORKERS}, got ${String(maxWorkers)}`,
    );
  }
  if (
    identity === null ||
    typeof identity !== 'object' ||
    typeof identity.host !== 'string' ||
    !/^[^/\s]{1,255}$/.test(identity.host)
  ) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `identity.host must be 1 to 255 characters without "/" or spaces, got ` +
        `${JSON.stringify(identity?.host)}`,
    );
  }
  if (!Number.isInteger(identity.port) || identity.port < 0 || identity.port > 65535) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `identity.port must be an integer from 0 to 65535, got ${String(identity.port)}`,
    );
  }
  const workerId = (id: unknown, what: string): number => {
    if (!Number.isInteger(id) || (id as number) < 0 || (id as number) >= maxWorkers) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `${what} must be a worker ID from 0 to ${maxWorkers - 1}, got ${String(id)}`,
      );
    }
    return id as number;
  };
  const below = request.lastTimestampBelow ?? Number.POSITIVE_INFINITY;
  if (typeof below !== 'number' || Number.isNaN(below)) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `lastTimestampBelow must be a number of ms, got ${String(below)}`,
    );
  }
  return {
    identity: { host: identity.host, port: identity.port },
    maxWorkers,
    only: request.workerId === undefined ? undefined : workerId(request.workerId, 'workerId'),
    exclude: new Set((request.exclude ?? []).map((id) => workerId(id, 'exclude'))),
    below,
  };
}

/**
 * True when the plan allows taking `workerId`, whose recorded lastTimestamp is given (-1: none).
 */
export function allows(plan: AcquirePlan, workerId: number, lastTimestamp: number): boolean {
  return (
    workerId < plan.maxWorkers &&
    (plan.only === undefined || plan.only === workerId) &&
    !plan.exclude.has(workerId) &&
    lastTimestamp < plan.below
  );
}

/** What an adapter knows about one worker ID it has seen in the coordinator. */
export interface KnownWorker {
  readonly workerId: number;
  readonly host: string;
  readonly port: number;
  readonly lastTimestamp: number;
  /** A live holder has it (its lease has not expired). */
  readonly live: boolean;
}

/**
 * Worker IDs to try, best first: the IDs this identity held before (so a restarted node keeps its
 * ID, as in Leaf), then IDs whose holder is gone (recycling keeps the space dense, so the limit
 * counts live nodes rather than restarts), then IDs never used, lowest first. Lazy, so a layout
 * with millions of worker IDs costs only the IDs actually tried.
 *
 * Asking for another ID means the last one was lost to another node (or could not be used).
 * Nodes that start together list the same free IDs: if every loser took the next one in order,
 * n nodes would make n(n+1)/2 claims between them, one round trip each (20 etcd nodes made 197
 * claims for 20 IDs). So after this identity's own IDs, the first pick is the best one, and each
 * pick after a loss is drawn at random from the next untried candidates, a window that doubles
 * with every loss (see {@link backingOff}): an uncontended node still takes the lowest free ID,
 * and racers spread out at once. `random` is Math.random's kind; tests pass their own.
 */
export function* candidateWorkerIds(
  plan: AcquirePlan,
  known: Iterable<KnownWorker>,
  random: () => number = Math.random,
): Generator<number> {
  const byId = new Map<number, KnownWorker>();
  for (const worker of known) byId.set(worker.workerId, worker);
  const free = [...byId.values()]
    .filter((w) => !w.live && allows(plan, w.workerId, w.lastTimestamp))
    .sort((a, b) => a.workerId - b.workerId);
  const mine = (w: KnownWorker) => w.host === plan.identity.host && w.port === plan.identity.port;
  for (const worker of free) if (mine(worker)) yield worker.workerId;
  function* others(): Generator<number> {
    for (const worker of free) if (!mine(worker)) yield worker.workerId;
    if (plan.only !== undefined) {
      if (!byId.has(plan.only) && allows(plan, plan.only, -1)) yield plan.only;
      return;
    }
    for (let id = 0; id < plan.maxWorkers; id++)
      if (!byId.has(id) && allows(plan, id, -1)) yield id;
  }
  yield* backingOff(others(), random);
}

/**
 * The window of untried candidates the pick after the first loss is drawn from; it doubles after
 * each.
 */
const FIRST_SPREAD = 32;
/** The largest window: the candidates held in memory at once, whatever the layout's size. */
const MAX_SPREAD = 1024;

/**
 * Every ID of `ids`, each once: the first as it comes, and after each further request (a loss) one
 * drawn at random from the next untried candidates, 32 of them after the first loss, 64 after
 * the second, up to 1,024. 20 nodes racing make about 45 claims, at most 5 each (a simulation;
 * in order: 210, up to 20 each).
 */
function* backingOff(ids: Generator<number>, random: () => number): Generator<number> {
  const untried: number[] = [];
  for (let losses = 0; ; losses++) {
    const window = losses === 0 ? 1 : Math.min(MAX_SPREAD, FIRST_SPREAD * 2 ** (losses - 1));
    while (untried.length < window) {
      const next = ids.next();
      if (next.done === true) break;
      untried.push(next.value);
    }
    if (untried.length === 0) return;
    const [id] = untried.splice(Math.floor(random() * untried.length), 1);
    yield id as number;
  }
}

/** WORKER_IDS_EXHAUSTED, naming the limit and why nothing qualified. */
export function workerIdsExhausted(backend: string, plan: AcquirePlan, live?: number): IdMintError {
  const held = live === undefined ? '' : ` (${live} held by live nodes)`;
  const filters = [
    plan.only === undefined ? '' : `only worker ID ${plan.only} was asked for`,
    plan.exclude.size === 0 ? '' : `worker IDs ${[...plan.exclude].join(', ')} were excluded`,
    plan.below === Number.POSITIVE_INFINITY
      ? ''
      : `only IDs last used before ${iso(plan.below)} qualified`,
  ].filter(Boolean);
  return new IdMintError(
    'WORKER_IDS_EXHAUSTED',
    `${backend} worker registry: no free worker ID among the ${plan.maxWorkers} the ` +
      `layout's worker bits allow (limit ${plan.maxWorkers})${held}` +
      (filters.length > 0 ? `; ${filters.join('; ')}` : ''),
    { details: { limit: plan.maxWorkers, live: live ?? null, backend } },
  );
}

/**
 * REGISTRY_UNAVAILABLE wrapping a driver error, in one line: `etcd worker registry at
 * 10.0.4.4:2379, renewing the lease of worker 3: connection refused` (`doing`: see
 * {@link registryDoing}). A network registry passes its `causes`, which word the
 * error as the system gave it (and see through a driver's own words for giving up); without,
 * the error's message is the cause (a file registry's own sentence).
 */
export function registryUnavailable(
  backend: string,
  where: string,
  cause: unknown,
  causes?: BackendCauses,
  doing?: string,
): IdMintError {
  if (cause instanceof IdMintError) return cause;
  const reason =
    causes !== undefined
      ? causes.of(cause)
      : cause instanceof Error
        ? cause.message
        : String(cause);
  return new IdMintError(
    'REGISTRY_UNAVAILABLE',
    // An adapter built without an address names its backend as `where`: said once.
    failureLine(backend, 'worker registry', where === backend ? undefined : where, doing, reason),
    { cause, details: { backend } },
  );
}

/** What a registry was doing when it failed, in words, for {@link registryUnavailable}. */
export const registryDoing = {
  connecting: 'connecting',
  acquire: 'acquiring a worker ID',
  peers: "reading the peers' clocks",
  table: 'creating the table',
  renew: (workerId: number) => `renewing the lease of worker ${workerId}`,
  release: (workerId: number) => `releasing worker ${workerId}`,
} as const;

/** LEASE_LOST for a lease another node may now hold. */
export function leaseLost(backend: string, workerId: number, why: string): IdMintError {
  return new IdMintError(
    'LEASE_LOST',
    `${backend} worker registry: the lease on worker ${workerId} is lost (${why}); another ` +
      `node may hold it now`,
    {
      details: { backend, workerId },
    },
  );
}

/** Validates a report before it is recorded: both values integers (ms) or -1. */
export function checkReport(report: WorkerReport): WorkerReport {
  for (const key of ['lastTimestamp', 'reportedAt'] as const) {
    const value = report?.[key];
    if (!Number.isSafeInteger(value) || value < -1) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `report.${key} must be an integer of ms (or -1), got ${String(value)}`,
      );
    }
  }
  return { lastTimestamp: report.lastTimestamp, reportedAt: report.reportedAt };
}

/** The lease TTLs every registry accepts (the server configuration checks the same bounds). */
export const LEASE_TTL_BOUNDS = { min: 1000, max: 600_000 } as const;

/** Validates a TTL option: long enough for a renewal in between, short enough to recycle IDs. */
export function checkTtl(ttlMs: number): number {
  if (!Number.isInteger(ttlMs) || ttlMs < LEASE_TTL_BOUNDS.min || ttlMs > LEASE_TTL_BOUNDS.max) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `ttlMs must be an integer from ${LEASE_TTL_BOUNDS.min} to ${LEASE_TTL_BOUNDS.max}, ` +
        `got ${String(ttlMs)}`,
    );
  }
  return ttlMs;
}

/** A registry's cluster name: a path segment and key part everywhere, so kept plain. */
export const REGISTRY_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
export const REGISTRY_NAME_RULE = '1 to 128 of A-Z a-z 0-9 _ . -';

/** Validates a cluster name against {@link REGISTRY_NAME_PATTERN}. */
export function checkName(name: string): string {
  if (typeof name !== 'string' || !REGISTRY_NAME_PATTERN.test(name)) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `registry name must be ${REGISTRY_NAME_RULE}, got ${JSON.stringify(name)}`,
    );
  }
  return name;
}

/** A fresh, unguessable holder token: it identifies one holding of a lease (a fencing token). */
export function holderToken(): string {
  return crypto.randomUUID();
}

/**
 * A step of a registry's protocol at which a test can pause it (see {@link Interleave}):
 *
 * - `before-claim`: acquire has read what it decides on (records, free IDs) and is about to claim
 *   `workerId`. Called once per claim attempt.
 * - `before-renew-write`: `renew` was called and its write is about to reach the coordinator (a
 *   renewal that is slow to land). Called before each write attempt.
 *
 * docs/workers.md lists which steps each backend has; a backend whose read and claim are one
 * atomic step (Redis) calls `before-claim` before that step.
 */
export type InterleavePoint = 'before-claim' | 'before-renew-write';

/** Where a registry stands when it calls its {@link Interleave} hook. */
export interface InterleaveStep {
  readonly point: InterleavePoint;
  readonly backend: string;
  /** The worker ID about to be claimed or renewed; -1 when the claim picks it itself (Redis). */
  readonly workerId: number;
  /** `before-renew-write`: the report on its way. */
  readonly report?: WorkerReport;
}

/**
 * For tests only: an adapter option called at each {@link InterleavePoint}; the registry waits
 * for what it returns before it goes on, so a test can run another node's whole cycle in the
 * gap between two steps of this one. A hook that throws fails the step, as a request that never
 * arrived: REGISTRY_UNAVAILABLE, or the IdMintError it threw. Absent (always, outside tests), it
 * costs one comparison.
 */
export type Interleave = (step: InterleaveStep) => void | Promise<void>;

/** Default TTL of a lease: over three renewals (every 3 s, as Leaf reports) fit in it. */
export const DEFAULT_TTL_MS = 10_000;

/** Default bound on one coordinator round trip before it counts as unreachable. */
export const DEFAULT_OPERATION_TIMEOUT_MS = 5000;

/** What a lease is created with; `write` is the backend's guarded write for this holder. */
export interface LeaseInit {
  readonly backend: string;
  readonly workerId: number;
  readonly lastTimestamp: number;
  readonly reportedAt: number;
  readonly ttlMs: number;
  /**
   * Records `report` if the lease is still this holder's: `renew` extends it and resolves with
   * the TTL granted; `release` frees the worker ID. Throws LEASE_LOST or REGISTRY_UNAVAILABLE.
   */
  readonly write: (kind: 'renew' | 'release', report: WorkerReport) => Promise<number>;
}

/**
 * The lease every adapter hands out: the loss signal, report validation, and the rule that a
 * lease released or lost is never written again. Backends differ only in `write`.
 */
export class RegistryLease implements WorkerLease {
  readonly workerId: number;
  readonly lastTimestamp: number;
  readonly reportedAt: number;
  readonly ttlMs: number;
  readonly #backend: string;
  readonly #write: LeaseInit['write'];
  readonly #controller = new AbortController();
  #released = false;
  #releasing = false;

  constructor(init: LeaseInit) {
    this.#backend = init.backend;
    this.workerId = init.workerId;
    this.lastTimestamp = init.lastTimestamp;
    this.reportedAt = init.reportedAt;
    this.ttlMs = init.ttlMs;
    this.#write = init.write;
  }

  get lost(): AbortSignal {
    return this.#controller.signal;
  }

  /** True once released; a released lease is not lost, and never signals. */
  get released(): boolean {
    return this.#released;
  }

  async renew(report: WorkerReport): Promise<number> {
    this.#assertHeld();
    try {
      return await this.#write('renew', checkReport(report));
    } catch (error) {
      if (error instanceof IdMintError && error.code === 'LEASE_LOST') this.lose(error);
      throw error;
    }
  }

  async release(report: WorkerReport): Promise<void> {
    this.#assertHeld();
    const checked = checkReport(report);
    // A backend may announce the deletion its own release causes before the release returns.
    this.#releasing = true;
    try {
      await this.#write('release', checked);
      this.#released = true;
    } finally {
      this.#releasing = false;
    }
  }

  /** Marks the lease lost and tells the holder through `lost`, once; ignored once released. */
  lose(error: IdMintError): void {
    if (!this.#released && !this.#releasing && !this.#controller.signal.aborted)
      this.#controller.abort(error);
  }

  #assertHeld(): void {
    if (this.#released) throw leaseLost(this.#backend, this.workerId, 'it was released');
    if (this.#controller.signal.aborted) throw this.#controller.signal.reason as IdMintError;
  }
}

/**
 * What a registry's database history says about granting leases (docs/workers.md, "When the
 * database's history changes"), the one rule of the SQL and Redis registries:
 *
 * - `settled`: the record is the live history and its settle is over: grant leases.
 * - `record`: no record and no lease data, a database seen for the first time: record it and
 *   grant at once (a fresh registry costs nothing).
 * - `fence`: the live history is not the recorded one, or lease data is there without a record
 *   (a failover to a lagging replica, a restore): lease rows may be lost while their holders
 *   still issue, so fence (record the live history) and grant nothing until the settle ends.
 * - `settling`: fenced, and the settle is not over.
 */
export type HistoryVerdict = 'settled' | 'record' | 'fence' | 'settling';

/** A registry's history as read from its database, the database's clock with it (ms). */
export interface RegistryHistory {
  readonly live: string;
  /** The recorded history; undefined when there is no record. */
  readonly recorded: string | undefined;
  /** Whether the registry holds any lease data (rows, keys). */
  readonly used: boolean;
  /** No lease is granted before this (the database's clock, ms); 0 when never fenced. */
  readonly settledAt: number;
  readonly nowMs: number;
}

export function judgeHistory(history: RegistryHistory): HistoryVerdict {
  if (history.recorded === undefined) return history.used ? 'fence' : 'record';
  if (history.recorded !== history.live) return 'fence';
  return history.settledAt > history.nowMs ? 'settling' : 'settled';
}

/**
 * How long a fenced registry grants no lease: one TTL, by which every holder that cannot renew
 * on the new history has stopped, plus the most a `borrow` holder's IDs lead its clock, so a
 * holder acquiring after it starts above every timestamp the old holders issued.
 */
export function settleMs(ttlMs: number, maxLeadMs: number): number {
  return ttlMs + maxLeadMs;
}

/** Acquire refused while a fenced registry settles: retryable, it names when it ends. */
export function registrySettling(
  backend: string,
  where: string,
  history: RegistryHistory,
): IdMintError {
  const waitMs = Math.max(0, history.settledAt - history.nowMs);
  return new IdMintError(
    'REGISTRY_UNAVAILABLE',
    `${backend} worker registry${where === backend ? '' : ` at ${where}`}: its database moved ` +
      `to a new history (${history.live}); no worker ID is leased for another ${waitMs} ms`,
    { details: { backend, settlesInMs: waitMs, settling: true } },
  );
}

/**
 * True for {@link registrySettling}'s error: the registry answered, and its answer is to wait. A
 * weak-dependency cache must not start from its file on it: the ID it holds may be the one a
 * lost lease's holder still issues with.
 */
export function isSettling(error: unknown): boolean {
  return isIdMintError(error, 'REGISTRY_UNAVAILABLE') && error.details?.['settling'] === true;
}

/**
 * The record a lease starts from after a fence: a lost row may have held a higher one, but no
 * holder from before the fence issued past the end of the settle.
 */
export function floorAfterSettle(lastTimestamp: number, settledAt: number): number {
  return settledAt > 0 ? Math.max(lastTimestamp, settledAt) : lastTimestamp;
}
