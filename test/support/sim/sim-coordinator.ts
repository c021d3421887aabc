import type { ErrorCode } from '../../../src/core/errors.ts';
import type { AcquireRequest, PeerTime, WorkerReport } from '../../../src/ports/worker-registry.ts';

/**
 * How an expired lease that no one has claimed since answers its holder's late calls: `sql`
 * renews it (the row still carries the holder's token), `redis` refuses (the key expired). Both
 * keep the port's contract; the model (models/lease.pml) explores both too.
 *
 * `zookeeper` has no token (src/registries/zookeeper/): a claim is an ephemeral liveness node
 * of the holder's session, and lives exactly as long as the session, which any request or ping
 * from its client keeps alive for a TTL. Renew and release check only that a liveness node
 * exists, not whose it is (release deletes it, whoever's); what keeps them to their own claim
 * is that the session's requests land in the order sent, none twice, and that the client sends
 * nothing of a lease after its release (the adapter's `ending`), which the simulated client and
 * network keep for this flavour.
 */
export type CoordinatorStyle = 'sql' | 'redis' | 'zookeeper';

/** One worker ID's row at the coordinator. */
export interface SimRecord {
  lastTimestamp: number;
  reportedAt: number;
  /** Registry time at which reportedAt reached the coordinator (a peer's ageMs counts from it). */
  heardAt: number;
  /** The live claim's token; 0 when none. */
  token: number;
  /** Registry time at which the claim lapses. */
  expiresAt: number;
  /** Who held it last (`host:port`), so a restarted node gets its ID back. */
  holder: string | undefined;
  /** `zookeeper`: the session whose liveness node the claim is (0: none). */
  session: number;
}

/** `zookeeper`: a client session, alive until a TTL passes without a request or ping from it. */
interface Session {
  expiresAt: number;
  expired: boolean;
}

/** A lease as the coordinator grants it. */
export interface Grant {
  readonly workerId: number;
  readonly token: number;
  readonly lastTimestamp: number;
  readonly reportedAt: number;
  readonly ttlMs: number;
}

/**
 * What a renew or release names: the worker ID, the claim's token, the report, and (ZooKeeper)
 * the session it is sent on.
 */
type Write = [workerId: number, token: number, report: WorkerReport, session?: number];

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
  readonly #sessions = new Map<number, Session>();
  #sessionIds = 0;

  constructor(workers: number, ttlMs: number, style: CoordinatorStyle, observe: RecordObserver) {
    this.ttlMs = ttlMs;
    this.grant = () => ttlMs;
    this.style = style;
    this.#observe = observe;
    this.records = Array.from({ length: workers }, () => ({
      lastTimestamp: -1,
      reportedAt: -1,
      heardAt: 0,
      token: 0,
      expiresAt: 0,
      holder: undefined,
      session: 0,
    }));
  }

  /** `zookeeper`: a new session, alive for a TTL from `now`; its ID. */
  openSession(now: number): number {
    const id = ++this.#sessionIds;
    this.#sessions.set(id, { expiresAt: now + this.ttlMs, expired: false });
    return id;
  }

  /**
   * `zookeeper`: a request or ping of `session` arrived at `now`. An expired session stays
   * expired (its liveness nodes are gone); a live one, and its claims, live a TTL from now.
   * False when the session has expired.
   */
  touch(now: number, session: number): boolean {
    const s = this.#sessions.get(session);
    if (s === undefined || s.expired) return false;
    if (now >= s.expiresAt) {
      this.expire(session);
      return false;
    }
    s.expiresAt = now + this.ttlMs;
    for (const record of this.records) {
      if (record.session === session && record.token !== 0) record.expiresAt = s.expiresAt;
    }
    return true;
  }

  /** `zookeeper`: when `session` expires unless heard from first. */
  sessionExpiresAt(session: number): number {
    return this.#sessions.get(session)?.expiresAt ?? 0;
  }

  /** `zookeeper`: the session has expired; its liveness nodes are deleted. */
  expire(session: number): void {
    const s = this.#sessions.get(session);
    if (s === undefined) return;
    s.expired = true;
    for (const record of this.records) {
      if (record.session === session) {
        record.token = 0;
        record.session = 0;
      }
    }
  }

  /** True while `token`'s claim on `workerId` is live at registry time `now`. */
  holds(now: number, workerId: number, token: number): boolean {
    const record = this.records[workerId];
    return record !== undefined && record.token === token && now < record.expiresAt;
  }

  acquire(now: number, request: AcquireRequest, session = 0): Answer<Grant> {
    const zk = this.style === 'zookeeper';
    if (zk && !this.touch(now, session)) return sessionExpired();
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
    record.expiresAt = zk ? this.sessionExpiresAt(session) : now + this.ttlMs;
    record.holder = who;
    record.session = session;
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

  renew(now: number, ...[workerId, token, report, session = 0]: Write): Answer<number> {
    const record = this.#mine(now, workerId, token, session);
    if (record === undefined) return lost(workerId);
    const before = record.lastTimestamp;
    record.lastTimestamp = Math.max(before, report.lastTimestamp);
    if (report.reportedAt > record.reportedAt) {
      record.reportedAt = report.reportedAt;
      record.heardAt = now;
    }
    // ZooKeeper grants the session timeout, and the session (touched) lives that long.
    const granted = this.style === 'zookeeper' ? this.ttlMs : Math.min(this.ttlMs, this.grant());
    // A renewal never ends the lease earlier than an earlier one left it (the port's rule): a
    // renewal whose answer its holder never heard may land last.
    if (this.style !== 'zookeeper') {
      record.expiresAt = this.renewMayShorten
        ? now + granted
        : Math.max(record.expiresAt, now + granted);
    }
    this.#observe(workerId, 'renew', before, record.lastTimestamp, report.lastTimestamp);
    return { ok: true, value: granted };
  }

  release(now: number, ...[workerId, token, report, session = 0]: Write): Answer<void> {
    const record = this.#mine(now, workerId, token, session);
    if (record === undefined) return lost(workerId);
    const before = record.lastTimestamp;
    record.lastTimestamp = report.lastTimestamp;
    record.reportedAt = report.reportedAt;
    record.heardAt = now;
    record.token = 0;
    record.session = 0;
    this.#observe(workerId, 'release', before, record.lastTimestamp, report.lastTimestamp);
    return { ok: true, value: undefined };
  }

  peers(now: number): PeerTime[] {
    const peers: PeerTime[] = [];
    this.records.forEach((record, workerId) => {
      if (record.token !== 0 && now < record.expiresAt)
        peers.push({ workerId, reportedAt: record.reportedAt, ageMs: now - record.heardAt });
    });
    return peers;
  }

  /**
   * The record if `token` may still write it at `now`; undefined: LEASE_LOST. Under `zookeeper`
   * the token is not looked at: the session must be alive and the ID have a liveness node.
   */
  #mine(now: number, workerId: number, token: number, session: number): SimRecord | undefined {
    const record = this.records[workerId];
    if (this.style === 'zookeeper') {
      if (!this.touch(now, session) || record === undefined) return undefined;
      return record.token !== 0 && now < record.expiresAt ? record : undefined;
    }
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

function sessionExpired(): Answer<never> {
  return fail('REGISTRY_UNAVAILABLE', 'the ZooKeeper session expired (sim)');
}

function lost(workerId: number): Answer<never> {
  return fail('LEASE_LOST', `worker ${workerId}: the lease is not held by this token (sim)`);
}
