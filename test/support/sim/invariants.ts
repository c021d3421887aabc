import type { PeerTime } from '../../../src/ports/worker-registry.ts';
import type { SimCoordinator } from './sim-coordinator.ts';
import type { World } from './world.ts';

/** Which lease an ID was issued under. */
export interface Issuer {
  readonly node: string;
  readonly workerId: number;
  /** The coordinator's token of the claim the generator's lease came from. */
  readonly token: number;
  /** How far its generator may issue ahead of its clock (`borrow`'s lead; else 0). */
  readonly leadMs: number;
}

/** What a peer clock check decided: within the limit, past it, skipped, or failed otherwise. */
export type PeerVerdict = 'ok' | 'skew' | 'skipped' | 'failed';

/** The last ID issued under one worker ID, and by whom. */
interface Last {
  readonly id: bigint;
  readonly timestamp: number;
  readonly issuer: Issuer;
}

/**
 * The invariants, checked at the step that could break them (each ID as it is issued, each
 * record as the coordinator writes it) and, for what a node could issue, after every step, so
 * the first violation stops the schedule where it happened:
 *
 * - UNIQUE: no ID is issued twice, across nodes and their restarts.
 * - EXCLUSIVE: a node can issue (its clock is below its generator's fence) only while the
 *   coordinator holds the claim its lease came from (its token, not expired by the coordinator's
 *   clock). The coordinator never grants one worker ID to two
 *   claims at once, so no two nodes issue under one worker ID at overlapping times.
 * - AFTER: under one worker ID, each ID is above every ID issued before it; a new holder's first
 *   timestamp is after the previous holder's last.
 * - ONE-AT-A-TIME: one process never has two acquires in flight (see {@link Checker.serial}).
 * - RECORD: the record's lastTimestamp is at or above every timestamp issued, or issuable before
 *   the fence (plus `borrow`'s lead), under its worker ID (an ID above it would be reissued by the
 *   next holder), and a write other than the holder's exact release never lowers it.
 * - LEAD: no ID's timestamp is further ahead of its node's clock than its generator's lead.
 * - RETIRED: a generator a process adopted before its current one (switched away from, lost)
 *   never issues again, nor could.
 * - PEERS: a peer clock check's verdict is what the peers' answer, as its node received it, and
 *   the node's clock call for (|clock - mean(reportedAt + ageMs)| against maxPeerSkewMs); with
 *   no answer, it was skipped.
 */
export class Checker {
  readonly #world: World;
  /** Invariants counted but not stopping the run (to show what else still holds). */
  readonly #tolerate: ReadonlySet<string>;
  #coordinator: SimCoordinator | undefined;
  readonly #ids = new Set<bigint>();
  readonly #last = new Map<number, Last>();
  /** The first violation; the run stops there. */
  violation: string | undefined;
  issuedCount = 0;
  /** The sum of every ID issued, mod 2^64: two runs of one seed must issue the same IDs. */
  idSum = 0n;
  /** A worker ID passing to a claim of another node (after a loss, a crash, a release). */
  takeovers = 0;
  /** ... of the same node (a restart or a recovery that got its ID back). */
  reclaims = 0;

  constructor(world: World, tolerate: Iterable<string> = []) {
    this.#world = world;
    this.#tolerate = new Set(tolerate);
  }

  watch(coordinator: SimCoordinator): void {
    this.#coordinator = coordinator;
  }

  /** Checks an ID as it is issued, its node's clock reading `clock`; false once one breaks. */
  issued(issuer: Issuer, id: bigint, timestamp: number, clock: number): boolean {
    this.issuedCount++;
    const now = this.#world.now;
    const { workerId, token, node, leadMs } = issuer;
    if (timestamp > clock + leadMs) {
      return this.#fail(
        'LEAD',
        `${node} issued t=${timestamp} under worker ${workerId} on a clock at ${clock}, more ` +
          `than its lead ${leadMs} ms ahead`,
      );
    }
    if (this.#ids.has(id)) return this.#fail('UNIQUE', `${node} issued ${id} a second time`);
    this.#ids.add(id);
    this.idSum = BigInt.asUintN(64, this.idSum + id);
    const record = this.#coordinator?.records[workerId];
    if (record === undefined) return this.#fail('EXCLUSIVE', `no worker ${workerId}`);
    if (record.token !== token || now >= record.expiresAt) {
      const whose =
        record.token === token
          ? `its claim expired at ${record.expiresAt.toFixed(1)}`
          : `the claim is token ${record.token}'s, not ${token}`;
      const message =
        `${node} issued ${id} (t=${timestamp}) under worker ${workerId} at ${now.toFixed(1)}: ` +
        `${whose}`;
      if (!this.#fail('EXCLUSIVE', message, 'by an ID issued')) return false;
    }
    if (timestamp > record.lastTimestamp) {
      return this.#fail(
        'RECORD',
        `${node} issued t=${timestamp} under worker ${workerId}, above its record ` +
          `${record.lastTimestamp}`,
      );
    }
    const last = this.#last.get(workerId);
    if (last !== undefined) {
      if (id <= last.id) {
        const message =
          `${node} issued ${id} (t=${timestamp}) under worker ${workerId}, not above ` +
          `${last.id} (t=${last.timestamp}) issued before by ${last.issuer.node}`;
        if (!this.#fail('AFTER', message)) return false;
      } else if (last.issuer.token !== token) {
        if (timestamp <= last.timestamp) {
          return this.#fail(
            'AFTER',
            `${node}'s first t=${timestamp} under worker ${workerId} is not after ` +
              `${last.issuer.node}'s last t=${last.timestamp}`,
          );
        }
        if (last.issuer.node !== node) this.takeovers++;
        else this.reclaims++;
      }
    }
    if (last === undefined || id > last.id) this.#last.set(workerId, { id, timestamp, issuer });
    return true;
  }

  /**
   * After every step, for each node whose generator could issue now: EXCLUSIVE and RECORD must
   * already hold for anything it could issue, whether or not it is asked before its fence.
   */
  able(issuer: Issuer, validUntil: number): boolean {
    const now = this.#world.now;
    const { workerId, token, node } = issuer;
    const record = this.#coordinator?.records[workerId];
    if (record === undefined) return this.#fail('EXCLUSIVE', `no worker ${workerId}`);
    if (record.token !== token || now >= record.expiresAt) {
      const whose =
        record.token === token
          ? `its claim expired at ${record.expiresAt.toFixed(1)}`
          : `the claim is token ${record.token}'s, not ${token}`;
      const message =
        `${node} can issue under worker ${workerId} at ${now.toFixed(1)} (fence ` +
        `${validUntil}): ${whose}`;
      if (!this.#fail('EXCLUSIVE', message)) return false;
    }
    // IDs have timestamps below the fence plus the lead: the record must already cover them.
    const reach = validUntil - 1 + issuer.leadMs;
    if (reach > record.lastTimestamp) {
      return this.#fail(
        'RECORD',
        `${node} can issue under worker ${workerId} up to t=${reach}, above its ` +
          `record ${record.lastTimestamp}`,
      );
    }
    return true;
  }

  /** RETIRED: a retired generator issued an ID, or could (its fence is open). */
  retired(issuer: Issuer, message: string): boolean {
    return this.#fail('RETIRED', `${message} (worker ${issuer.workerId}, token ${issuer.token})`);
  }

  /**
   * PEERS: the check's verdict against the peers' answer its node received (undefined: none),
   * the node's clock when it decided, and the limit.
   */
  peerCheck(
    node: string,
    answer: readonly PeerTime[] | undefined,
    clock: number,
    maxPeerSkewMs: number,
    verdict: PeerVerdict,
  ): boolean {
    let expected: PeerVerdict = 'skipped';
    let why = 'no answer to its peers request';
    if (answer !== undefined) {
      const mean =
        answer.reduce((sum, peer) => sum + peer.reportedAt + peer.ageMs, 0) /
        Math.max(1, answer.length);
      const offset = answer.length === 0 ? 0 : Math.round(clock - mean);
      expected = Math.abs(offset) > maxPeerSkewMs ? 'skew' : 'ok';
      why = `${answer.length} peers, offset ${offset} ms, limit ${maxPeerSkewMs} ms`;
    }
    if (verdict === expected) return true;
    return this.#fail(
      'PEERS',
      `${node}'s peer clock check said ${verdict}, not ${expected}: ${why}`,
    );
  }

  /**
   * ONE-AT-A-TIME: the holder ran two transitions at once (two acquires of one process in
   * flight). Harmless to the other invariants with a token-guarded coordinator, but a lease
   * taken twice is one left to lapse, which on ZooKeeper keeps its worker ID taken.
   */
  serial(message: string): boolean {
    return this.#fail('ONE-AT-A-TIME', message);
  }

  /** Called by the coordinator at each write of a record. */
  wrote(
    workerId: number,
    kind: 'claim' | 'renew' | 'release',
    before: number,
    after: number,
    reported: number,
  ): boolean {
    // A renewal that landed after a later one: the rule "renew never lowers the record" at work.
    if (kind === 'renew' && reported < before) this.#world.count('renewal landed below the record');
    if (kind !== 'release' && after < before) {
      return this.#fail('RECORD', `a ${kind} lowered worker ${workerId}'s record`);
    }
    const last = this.#last.get(workerId);
    if (last !== undefined && after < last.timestamp) {
      return this.#fail(
        'RECORD',
        `a ${kind} set worker ${workerId}'s record to ${after}, below t=${last.timestamp} ` +
          `issued by ${last.issuer.node}`,
      );
    }
    return true;
  }

  /** Records a violation: false (stop) unless the invariant is tolerated, then counted. */
  #fail(invariant: string, message: string, how = ''): boolean {
    if (this.#tolerate.has(invariant)) {
      this.#world.count(`${invariant} broken${how === '' ? '' : ` ${how}`} (tolerated)`);
      return true;
    }
    if (this.violation !== undefined) return false;
    this.violation = `${invariant}: ${message}`;
    this.#world.failed = true;
    this.#world.log.add(this.#world.now, 'CHECK', `VIOLATED ${this.violation}`);
    return false;
  }
}
