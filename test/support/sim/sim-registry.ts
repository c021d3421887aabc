import { IdMintError } from '../../../src/core/errors.ts';
import type { Timers } from '../../../src/ports/timers.ts';
import type {
  AcquireRequest,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from '../../../src/ports/worker-registry.ts';
import type { Checker } from './invariants.ts';
import type { Answer, SimCoordinator } from './sim-coordinator.ts';
import type { Channel, Endpoint, SimNetwork } from './sim-network.ts';
import type { World } from './world.ts';

/** What the registry client of one process needs from the simulation. */
export interface ClientContext {
  readonly world: World;
  readonly network: SimNetwork;
  readonly coordinator: SimCoordinator;
  readonly checker: Checker;
  readonly node: Endpoint;
  /** The process's timers: the driver's own timeout for a call runs on them. */
  readonly timers: Timers;
  /** A call unanswered this long fails REGISTRY_UNAVAILABLE (it may still land). */
  readonly callTimeoutMs: number;
  /** The coordinator tells a holder when its lease expires (etcd, ZooKeeper), late or never. */
  readonly signals: boolean;
  /** `zookeeper`: the session's requests land in order, none twice (false: broken, test only). */
  readonly ordered: boolean;
}

/**
 * The WorkerRegistry one node process talks to: every call is a request over the simulated
 * network to the one coordinator, answered (or not) as the schedule decides, and failed with
 * REGISTRY_UNAVAILABLE by the driver's own timeout when no answer comes in time.
 */
export class SimRegistryClient implements WorkerRegistry {
  readonly backend = 'sim';
  readonly #c: ClientContext;
  readonly #incarnation: number;
  /** The lease token each worker ID was last granted to this process with. */
  readonly tokens = new Map<number, number>();
  readonly #lost = new Map<number, AbortController>();
  /** How many peers calls were answered in time, and the last answer: for the PEERS check. */
  peerAnswers = 0;
  lastPeers: readonly PeerTime[] = [];
  /**
   * `zookeeper`: this process's session (a new one once it learns the last expired), the
   * connection order its requests keep, and the lost signals of the leases taken in it.
   */
  #session = 0;
  /** Registry time the last request was sent: the client pings only when idle. */
  #sentAt = Number.NEGATIVE_INFINITY;
  readonly #channel: Channel = { up: 0, down: 0 };
  readonly #sessionLeases = new Map<number, AbortController[]>();
  /** Acquires sent and not yet settled: the holder runs one transition at a time, so one. */
  #acquiring = 0;

  constructor(context: ClientContext) {
    this.#c = context;
    this.#incarnation = context.node.incarnation;
    if (this.#zk) {
      this.#openSession();
      this.#ping(Math.floor(context.coordinator.ttlMs / 3));
    }
  }

  get #zk(): boolean {
    return this.#c.coordinator.style === 'zookeeper';
  }

  acquire(request: AcquireRequest): Promise<WorkerLease> {
    const { coordinator, world, checker, node } = this.#c;
    if (this.#acquiring > 0) checker.serial(`${node.name} sent an acquire while one was pending`);
    this.#acquiring++;
    const settled = () => {
      this.#acquiring--;
    };
    const session = this.#session;
    return this.#call('acquire', () => {
      const answer = coordinator.acquire(world.now, request, session);
      if (answer.ok) this.#watch(answer.value.workerId, answer.value.token);
      return answer;
    })
      .finally(settled)
      .then((grant) => {
        this.tokens.set(grant.workerId, grant.token);
        const lost = new AbortController();
        this.#lost.set(grant.token, lost);
        if (this.#zk) {
          const leases = this.#sessionLeases.get(session);
          // Taken in a session already known to have expired: lost from the start.
          if (leases === undefined) lost.abort(new IdMintError('LEASE_LOST', 'session gone (sim)'));
          else leases.push(lost);
        }
        const { workerId, token } = grant;
        /** `zookeeper`: the release was sent; no write of this lease is sent after it. */
        let ending = false;
        const lease: WorkerLease = {
          workerId,
          lastTimestamp: grant.lastTimestamp,
          reportedAt: grant.reportedAt,
          ttlMs: grant.ttlMs,
          lost: lost.signal,
          renew: (report: WorkerReport) => {
            if (ending) {
              const error = new IdMintError('LEASE_LOST', `worker ${workerId}: released (sim)`);
              return Promise.reject(error);
            }
            return this.#call(`renew w${workerId} ${report.lastTimestamp}`, () => {
              const answer = coordinator.renew(world.now, workerId, token, report, session);
              if (answer.ok) this.#watch(workerId, token);
              return answer;
            });
          },
          release: (report: WorkerReport) => {
            ending = this.#zk;
            return this.#call(`release w${workerId} ${report.lastTimestamp}`, () =>
              coordinator.release(world.now, workerId, token, report, session),
            );
          },
        };
        return lease;
      });
  }

  peers(): Promise<PeerTime[]> {
    const { coordinator, world } = this.#c;
    return this.#call('peers', () => ({ ok: true, value: coordinator.peers(world.now) })).then(
      (peers) => {
        this.peerAnswers++;
        this.lastPeers = peers;
        return peers;
      },
    );
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** `zookeeper`: connects a new session (at once: the handshake is not modelled). */
  #openSession(): void {
    const { coordinator, world } = this.#c;
    this.#session = coordinator.openSession(world.now);
    this.#sessionLeases.set(this.#session, []);
    this.#watchSession(this.#session);
  }

  /**
   * `zookeeper`: the client pings once a third of the session timeout passes with nothing sent,
   * as ZooKeeper's does (its other requests keep the session alive too).
   */
  #ping(delayMs: number): void {
    const { coordinator, timers, world } = this.#c;
    const every = Math.floor(coordinator.ttlMs / 3);
    timers.setTimeout(() => {
      const idle = world.now - this.#sentAt;
      if (idle < every) return this.#ping(every - idle);
      const session = this.#session;
      this.#call('ping', () => {
        const alive = coordinator.touch(world.now, session);
        if (alive) this.#watchSession(session);
        return { ok: true, value: alive };
      }).then(
        (alive) => {
          if (!alive) this.#expired(session);
        },
        () => {},
      );
      this.#ping(every);
    }, delayMs);
  }

  /**
   * `zookeeper`: when the session expires unheard from, its liveness nodes go and the client is
   * told (late, or not at all: then it learns from its next ping's answer).
   */
  #watchSession(session: number): void {
    const { coordinator, network, node, world } = this.#c;
    const at = coordinator.sessionExpiresAt(session);
    world.queue.push(at, () => {
      // Heard from since: look again when it would expire now.
      if (coordinator.sessionExpiresAt(session) !== at) {
        this.#watchSession(session);
        return false;
      }
      coordinator.expire(session);
      world.count('zookeeper session expired');
      network.notify(node, this.#incarnation, `session ${session} expired`, () =>
        this.#expired(session),
      );
      return false;
    });
  }

  /** `zookeeper`: every lease of an expired session is lost; later calls use a new session. */
  #expired(session: number): void {
    const leases = this.#sessionLeases.get(session);
    if (leases === undefined) return;
    this.#sessionLeases.delete(session);
    for (const lost of leases) {
      lost.abort(new IdMintError('LEASE_LOST', `session ${session} expired (sim)`));
    }
    if (this.#session === session) this.#openSession();
  }

  #call<T>(what: string, handle: () => Answer<T>): Promise<T> {
    const { network, node, timers, callTimeoutMs, world } = this.#c;
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const timer = timers.setTimeout(() => {
        if (settled) return;
        settled = true;
        world.log.add(world.now, node.name, `${what}: timed out`);
        reject(new IdMintError('REGISTRY_UNAVAILABLE', `${what}: no answer in time (sim)`));
      }, callTimeoutMs);
      world.log.add(world.now, node.name, `sends ${what}`);
      const channel = this.#zk && this.#c.ordered ? this.#channel : undefined;
      this.#sentAt = world.now;
      network.request(
        node,
        what,
        handle,
        (answer) => {
          if (settled) {
            world.count('answer after its timeout');
            return;
          }
          settled = true;
          timers.clearTimeout(timer);
          if (answer.ok) resolve(answer.value);
          else reject(new IdMintError(answer.code, answer.message));
        },
        channel,
      );
    });
  }

  /** With signals: when this claim lapses unrenewed, the coordinator tells its holder. */
  #watch(workerId: number, token: number): void {
    const { coordinator, network, node, world, signals } = this.#c;
    if (!signals) return;
    const incarnation = this.#incarnation;
    const record = coordinator.records[workerId];
    if (record === undefined) return;
    world.queue.push(record.expiresAt, () => {
      if (record.token !== token || world.now < record.expiresAt) return false;
      world.count('lost signal sent');
      network.notify(node, incarnation, `lost w${workerId}`, () =>
        this.#lost
          .get(token)
          ?.abort(new IdMintError('LEASE_LOST', `worker ${workerId}: lease expired (sim)`)),
      );
      return false;
    });
  }
}
