import type { ErrorCode } from '../../../src/core/errors.ts';
import type { AcquireRequest, PeerTime, WorkerReport } from '../../../src/ports/worker-registry.ts';

/**
 * How an expired lease that no one has claimed since answers its holder's late calls: `sql`
 * renews it (the row still carries the holder's token), `redis` refuses (the key expired). Both
 * keep the port's contract; the model (models/lease.pml) explores both too.
 */
export type CoordinatorStyle = 'sql' | 'redis';

/** One worker ID's row at the coordinator. */
export interface SimRecord {
  lastTimestamp: number;
  reportedAt: number;
  /** The live claim's token; 0 when none. */
  token: number;
  /** Registry time at which the claim lapses. */
  expiresAt: number;
  /** Who held it last (`host:port`), so a restarted node gets its ID back. */
  holder: string | undefined;
}

/** A lease as the coordinator grants it. */
export interface Grant {
  readonly workerId: number;
  readonly token: number;
  readonly lastTimestamp: number;
  readonly reportedAt: number;
  readonly ttlMs: number;
}

/** A coordinator's answer: a value, or an error code and message for the client to throw. */
export type Answer<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly code: ErrorCode; readonly message: string };

/** Told of every change of a record, so the checker sees each write as it happens. */
export type RecordObserver = (
  workerId: number,
  kind: 'claim' | 'renew' | 'release',
  before: number,
  after: number,
  reported: number,
) => void;

/**
 * The coordinator of the simulated registry: each request handled in one atomic step at one
 * instant of the registry's clock, keeping the WorkerRegistry port's contract exactly (leases
 * expire by this clock; acquire returns the record after its claim; renew stores the larger
 * values and never ends the lease earlier; release stores the report exactly; every write
 * guarded by the claim's token).
 */
export class SimCoordinator {
  readonly records: SimRecord[];
  readonly ttlMs: number;
  readonly style: CoordinatorStyle;
  /**
   * The TTL a renewal is granted (at most ttlMs): the port lets a coordinator grant less than the
   * lease's TTL, and the holder must fence by what was granted.
   */
  grant: () => number;
  /**
   * Test only, a broken coordinator: a renewal sets the lease's end to its own grant even when
   * that is earlier than an earlier renewal left it, against the port's contract.
   */
  renewMayShorten = false;
  readonly #observe: RecordObserver;
  #tokens = 0;

  constructor(workers: number, ttlMs: number, style: CoordinatorStyle, observe: RecordObserver) {
    this.ttlMs = ttlMs;
    this.grant = () => ttlMs;
    this.style = style;
    this.#observe = observe;
    this.records = Array.from({ length: workers }, () => ({
      lastTimestamp: -1,
      reportedAt: -1,
      token: 0,
      expiresAt: 0,
      holder: undefined,
    }));
  }

  /** True while `token`'s claim on `workerId` is live at registry time `now`. */
  holds(now: number, workerId: number, token: number): boolean {
    const record = this.records[workerId];
    return record !== undefined && record.token === token && now < record.expiresAt;
  }

  acquire(now: number, request: AcquireRequest): Answer<Grant> {
    const who = `${request.identity.host}:${request.identity.port}`;
    let pick = -1;
    const limit = Math.min(request.maxWorkers, this.records.length);
    for (let id = 0; id < limit; id++) {
      const record = this.records[id] as SimRecord;
      if (record.token !== 0 && now < record.expiresAt) continue;
      if (request.workerId !== undefined && request.workerId !== id) continue;
      if (request.exclude?.includes(id)) continue;
      const below = request.lastTimestampBelow;
      if (below !== undefined && record.lastTimestamp >= below) continue;
      // The ID this identity held last first, as Leaf does; else the lowest free one.
      if (pick < 0 || record.holder === who) pick = id;
      if (record.holder === who) break;
    }
    if (pick < 0) {
      return fail('WORKER_IDS_EXHAUSTED', `no free worker ID below ${limit} qualifies (sim)`);
    }
    const record = this.records[pick] as SimRecord;
    record.token = ++this.#tokens;
    record.expiresAt = now + this.ttlMs;
    record.holder = who;
    this.#observe(pick, 'claim', record.lastTimestamp, record.lastTimestamp, -1);
    return {
      ok: true,
      value: {
        workerId: pick,
        token: record.token,
        lastTimestamp: record.lastTimestamp,
        reportedAt: record.reportedAt,
        ttlMs: this.ttlMs,
      },
    };
  }

  renew(now: number, workerId: number, token: number, report: WorkerReport): Answer<number> {
    const record = this.#mine(now, workerId, token);
    if (record === undefined) return lost(workerId);
    const before = record.lastTimestamp;
    record.lastTimestamp = Math.max(before, report.lastTimestamp);
    record.reportedAt = Math.max(record.reportedAt, report.reportedAt);
    const granted = Math.min(this.ttlMs, this.grant());
    // A renewal never ends the lease earlier than an earlier one left it (the port's rule): a
    // renewal whose answer its holder never heard may land last.
    record.expiresAt = this.renewMayShorten
      ? now + granted
      : Math.max(record.expiresAt, now + granted);
    this.#observe(workerId, 'renew', before, record.lastTimestamp, report.lastTimestamp);
    return { ok: true, value: granted };
  }

  release(now: number, workerId: number, token: number, report: WorkerReport): Answer<void> {
    const record = this.#mine(now, workerId, token);
    if (record === undefined) return lost(workerId);
    const before = record.lastTimestamp;
    record.lastTimestamp = report.lastTimestamp;
    record.reportedAt = report.reportedAt;
    record.token = 0;
    this.#observe(workerId, 'release', before, record.lastTimestamp, report.lastTimestamp);
    return { ok: true, value: undefined };
  }

  peers(now: number): PeerTime[] {
    const peers: PeerTime[] = [];
    this.records.forEach((record, workerId) => {
      if (record.token !== 0 && now < record.expiresAt)
        peers.push({ workerId, reportedAt: record.reportedAt, ageMs: 0 });
    });
    return peers;
  }

  /** The record if `token` may still write it at `now`; undefined: LEASE_LOST. */
  #mine(now: number, workerId: number, token: number): SimRecord | undefined {
    const record = this.records[workerId];
    if (record === undefined || record.token !== token) return undefined;
    if (now >= record.expiresAt && this.style === 'redis') {
      record.token = 0; // the key expired: nothing of this claim is left
      return undefined;
    }
    return record;
  }
}

function fail(code: ErrorCode, message: string): Answer<never> {
  return { ok: false, code, message };
}

function lost(workerId: number): Answer<never> {
  return fail('LEASE_LOST', `worker ${workerId}: the lease is not held by this token (sim)`);
}
