import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { withTimeout } from '../../shared/timeout.ts';
import type {
  AcquireRequest,
  NodeIdentity,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from '../../ports/worker-registry.ts';
import {
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_TTL_MS,
  RegistryLease,
  allows,
  checkName,
  checkTtl,
  leaseLost,
  planAcquire,
  registryDoing,
  registryUnavailable,
  workerIdsExhausted,
  type AcquirePlan,
  type Interleave,
} from '../common.ts';
import { BackendCauses, failureCause, probeAddress } from '../../shared/failure-cause.ts';
import { loadDriver } from '../../shared/load-driver.ts';
import { hostText, type UrlHost } from '../../shared/connection-url.ts';

/** A znode's metadata, as node-zookeeper-client reports it (times are 8-byte big-endian ms). */
export interface ZooKeeperStat {
  readonly mtime: Buffer;
  readonly version: number;
  readonly cversion: number;
}

/** A multi-operation transaction of node-zookeeper-client. */
export interface ZooKeeperTransactionLike {
  create(path: string, data: Buffer, mode: number): ZooKeeperTransactionLike;
  setData(path: string, data: Buffer, version?: number): ZooKeeperTransactionLike;
  check(path: string, version?: number): ZooKeeperTransactionLike;
  remove(path: string, version?: number): ZooKeeperTransactionLike;
  commit(callback: (error: unknown, results: unknown) => void): void;
}

/** The part of a node-zookeeper-client Client the registry uses. */
export interface ZooKeeperClientLike {
  connect(): void;
  close(): void;
  on(event: 'connected' | 'disconnected' | 'expired', listener: () => void): unknown;
  getSessionTimeout(): number;
  create(
    path: string,
    data: Buffer,
    mode: number,
    callback: (error: unknown, path: string) => void,
  ): void;
  mkdirp(path: string, callback: (error: unknown, path: string) => void): void;
  getChildren(
    path: string,
    callback: (error: unknown, children: string[], stat: ZooKeeperStat) => void,
  ): void;
  getData(
    path: string,
    callback: (error: unknown, data: Buffer, stat: ZooKeeperStat) => void,
  ): void;
  setData(
    path: string,
    data: Buffer,
    version: number,
    callback: (error: unknown, stat: ZooKeeperStat) => void,
  ): void;
  exists(
    path: string,
    watcher: (event: { getType(): number }) => void,
    callback: (error: unknown, stat: ZooKeeperStat) => void,
  ): void;
  remove(path: string, version: number, callback: (error: unknown) => void): void;
  transaction(): ZooKeeperTransactionLike;
}

/** Options for {@link ZooKeeperWorkerRegistry}. */
export interface ZooKeeperWorkerRegistryOptions {
  /** Makes a new, unconnected client; called again after a session expires. */
  readonly createClient: (sessionTimeoutMs: number) => ZooKeeperClientLike;
  /** Leaf's `leaf.name`: nodes live under `/snowflake/<name>`. Default `idmint`. */
  readonly name?: string;
  /**
   * Requested session timeout, which is the lease TTL; the server may grant another. Default 10000.
   */
  readonly ttlMs?: number;
  /**
   * An entry only Leaf wrote (it has no idmint record) is recycled only once ZooKeeper's clock
   * shows it unwritten for this long: a running Leaf node reports every 3 s but creates no
   * liveness node, and must never be taken for dead. Default 10000 ms.
   */
  readonly recycleAfterMs?: number;
  /** Bound on connecting and on one round trip. Default 5000 ms. */
  readonly operationTimeoutMs?: number;
  /** Where ZooKeeper is, for error messages. Default `zookeeper`. */
  readonly where?: string;
  /**
   * The servers, to tell a refused connection from no answer when connecting fails: the client
   * retries a refused connection in silence until the connect timeout. Absent: not told apart.
   */
  readonly hosts?: readonly UrlHost[];
  /** Tests only: pauses at the steps docs/workers.md lists (see {@link Interleave}). */
  readonly interleave?: Interleave;
}

/** How long a failed connection attempt answers further calls before one tries again. */
const FAILED_CONNECT_REUSE_MS = 1000;
/** Bound on looking at a server's address after connecting to it failed. */
const PROBE_MS = 500;

// ZooKeeper protocol constants (the same in every client).
const PERSISTENT = 0;
const EPHEMERAL = 1;
const PERSISTENT_SEQUENTIAL = 2;
const NO_NODE = -101;
const BAD_VERSION = -103;
const NODE_EXISTS = -110;
const NOT_EMPTY = -111;
const SESSION_EXPIRED = -112;
const NODE_DELETED_EVENT = 2;

/**
 * Leaf reports every 3 s (SnowflakeZookeeperHolder.ScheduledUploadData): it may have issued IDs up
 * to then.
 */
const LEAF_REPORT_INTERVAL_MS = 3000;

/** A worker ID's record, idmint's own node beside Leaf's entry. */
interface ZkRecord {
  readonly lastTimestamp: number;
  readonly reportedAt: number;
}

/** A record with the znode version it was read at, for claims and writes that check it. */
interface StoredRecord {
  readonly record: ZkRecord;
  readonly version: number;
}

const NO_RECORD: ZkRecord = { lastTimestamp: -1, reportedAt: -1 };

/** A Leaf-layout entry: `/snowflake/<name>/forever/<ip>:<port>-<seq>`. */
interface ForeverEntry {
  readonly node: string;
  readonly address: string;
  readonly workerId: number;
}

/**
 * Worker IDs in ZooKeeper, compatible with Meituan Leaf's layout:
 *
 * ```
 * /snowflake/<name>/forever/<ip>:<port>-<seq>
 *     persistent, Leaf's {"ip","port","timestamp"}: worker ID = seq
 * /snowflake/<name>/workers/<id>
 *     persistent, idmint's {"lastTimestamp","reportedAt"}
 * /snowflake/<name>/live/<id>
 *     ephemeral, exists exactly while a session holds the ID
 * ```
 *
 * A node that has an entry under its ip:port reuses it (as in Leaf). Beyond Leaf, the holder
 * creates the ephemeral liveness node, atomically with whatever else the claim changes (one
 * multi-op), and ZooKeeper allows only one such node per ID: two live holders never share an ID.
 * When a holder's session ends, its liveness node vanishes and the entry is recycled: the next
 * node without an entry replaces it (delete + create under its own ip:port, same seq) rather than
 * creating a new sequential node, so the worker-ID limit counts live nodes, not restarts (Leaf
 * issues #21, #57, #84, #149). New sequential nodes are created only while the sequence is below
 * the limit. `timestamp` in Leaf's data is the recorded lastTimestamp, so a Leaf node started on
 * the same entry still refuses a clock behind it.
 */
export class ZooKeeperWorkerRegistry implements WorkerRegistry {
  readonly backend = 'zookeeper';
  readonly #createClient: (sessionTimeoutMs: number) => ZooKeeperClientLike;
  readonly #base: string;
  readonly #ttlMs: number;
  readonly #recycleAfterMs: number;
  readonly #timeoutMs: number;
  readonly #where: string;
  /** Causes of this registry's failures, the last one the system named remembered. */
  readonly #causes = new BackendCauses();
  readonly #interleave: Interleave | undefined;
  readonly #hosts: readonly UrlHost[];
  #session: Promise<Session> | undefined;
  #current: Session | undefined;
  #closed = false;

  constructor(options: ZooKeeperWorkerRegistryOptions) {
    this.#createClient = options.createClient;
    this.#base = `/snowflake/${checkName(options.name ?? 'idmint')}`;
    this.#ttlMs = checkTtl(options.ttlMs ?? DEFAULT_TTL_MS);
    this.#recycleAfterMs = options.recycleAfterMs ?? 10_000;
    this.#timeoutMs = options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
    this.#where = options.where ?? 'zookeeper';
    this.#interleave = options.interleave;
    this.#hosts = options.hosts ?? [];
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    const plan = planAcquire(request);
    const session = await this.#connected();
    try {
      for (const dir of ['forever', 'workers', 'live'])
        await session.zk.mkdirp(`${this.#base}/${dir}`);
      // Losing a race for an ID means another node took that one, not that none is left: look
      // again (each round, some node wins, so this ends).
      for (let round = 0; ; round++) {
        const outcome = await this.#claimOnce(session, plan);
        if ('workerId' in outcome) return outcome;
        if (outcome.raced === 0 || round === 20)
          throw workerIdsExhausted(this.backend, plan, outcome.live);
      }
    } catch (error) {
      throw await this.#failed(error, registryDoing.acquire);
    }
  }

  /**
   * One pass over the candidates: a lease, or how many claims other nodes won and how many IDs are
   * live.
   */
  async #claimOnce(
    session: Session,
    plan: AcquirePlan,
  ): Promise<WorkerLease | { raced: number; live: number }> {
    const zk = session.zk;
    const address = `${plan.identity.host}:${plan.identity.port}`;
    const zkNow = await this.#zkNow(zk);
    const [names, foreverStat] = await zk.getChildren(`${this.#base}/forever`);
    const live = new Set((await zk.getChildren(`${this.#base}/live`))[0].map(Number));
    const parsed = names.map(parseEntry).filter((e) => e !== undefined);
    const entries = parsed.filter((e) => e.workerId < plan.maxWorkers && !live.has(e.workerId));
    entries.sort(
      (a, b) =>
        Number(b.address === address) - Number(a.address === address) || a.workerId - b.workerId,
    );
    let raced = 0;

    // 1. Entries with no live holder: this node's own (as Leaf reuses them), then others'
    //    (recycled).
    // Every claim checks, in the same multi-op, that the record and the entry are still at the
    // versions read: a node that read, then claimed after another acquired, issued and released
    // the ID in between, loses the race and reads again instead of starting from an old record.
    for (const entry of entries) {
      const found = await zk
        .getData(this.#path('forever', entry.node))
        .catch(ifCode(NO_NODE, undefined));
      if (found === undefined) continue; // recycled by another node meanwhile
      const [data, entryStat] = found;
      const ours = await this.#record(zk, entry.workerId);
      const mine = entry.address === address;
      // An idmint holder always has a liveness node, so without one the entry is free. An entry
      // only Leaf wrote has none even while its Leaf node runs: free only once it went stale.
      if (ours === undefined && !mine && zkNow - readMs(entryStat.mtime) < this.#recycleAfterMs)
        continue;
      if (!allows(plan, entry.workerId, (ours?.record ?? leafRecord(data)).lastTimestamp)) continue;
      const stored = ours ?? (await this.#createRecord(zk, entry.workerId, leafRecord(data)));
      if (stored === undefined || !allows(plan, entry.workerId, stored.record.lastTimestamp))
        continue;
      const { record } = stored;
      const name = mine ? entry.node : entryName(address, entry.workerId);
      const claim = zk
        .transaction()
        .check(this.#path('workers', entry.workerId), stored.version)
        .create(this.#path('live', entry.workerId), holderData(plan.identity), EPHEMERAL);
      // Recycling moves the entry to this node's ip:port, keeping its seq (the worker ID). The
      // entry's version guards it only once it was written since its creation (see #record).
      if (mine) claim.check(this.#path('forever', entry.node), entryStat.version);
      else
        claim
          .remove(this.#path('forever', entry.node), entryStat.version)
          .create(
            this.#path('forever', name),
            leafData(plan.identity, record.lastTimestamp),
            PERSISTENT,
          );
      await this.#beforeClaim(entry.workerId);
      if (await this.#commitClaim(zk, claim))
        return this.#lease(session, entry.workerId, name, record, plan.identity);
      raced++;
    }

    // 2. IDs without an entry. Below the parent's child version (the next sequence number
    // ZooKeeper would give) a name can be created explicitly without ever colliding with a
    // sequential node, Leaf's or ours: that fills the gaps recycling and deletions leave.
    const named = new Set(parsed.map((e) => e.workerId));
    for (let id = 0; id < Math.min(foreverStat.cversion, plan.maxWorkers); id++) {
      if (named.has(id) || live.has(id) || (plan.only !== undefined && id !== plan.only)) continue;
      const existing = await this.#record(zk, id);
      if (!allows(plan, id, existing?.record.lastTimestamp ?? -1)) continue;
      const stored = existing ?? (await this.#createRecord(zk, id, NO_RECORD));
      if (stored === undefined || !allows(plan, id, stored.record.lastTimestamp)) continue;
      const { record } = stored;
      const name = entryName(address, id);
      const claim = zk
        .transaction()
        .check(this.#path('workers', id), stored.version)
        .create(this.#path('live', id), holderData(plan.identity), EPHEMERAL)
        .create(
          this.#path('forever', name),
          leafData(plan.identity, record.lastTimestamp),
          PERSISTENT,
        );
      await this.#beforeClaim(id);
      if (await this.#commitClaim(zk, claim))
        return this.#lease(session, id, name, record, plan.identity);
      raced++;
    }

    // 3. A new entry the Leaf way: ZooKeeper numbers it with the parent's child version.
    if (plan.only === undefined && foreverStat.cversion < plan.maxWorkers) {
      const path = await zk.create(
        `${this.#base}/forever/${address}-`,
        leafData(plan.identity, 0),
        PERSISTENT_SEQUENTIAL,
      );
      const entry = parseEntry(path.slice(path.lastIndexOf('/') + 1));
      if (entry !== undefined && entry.workerId < plan.maxWorkers) {
        // The liveness node first: until it exists, others see an entry without a record,
        // which they leave alone while it is fresh.
        await this.#beforeClaim(entry.workerId);
        const livePath = this.#path('live', entry.workerId);
        if (
          await this.#commitClaim(
            zk,
            zk.transaction().create(livePath, holderData(plan.identity), EPHEMERAL),
          )
        ) {
          // Read once the ID is held: no one else can write its record now.
          const stored =
            (await this.#record(zk, entry.workerId)) ??
            (await this.#createRecord(zk, entry.workerId, NO_RECORD));
          if (stored !== undefined && allows(plan, entry.workerId, stored.record.lastTimestamp)) {
            return this.#lease(session, entry.workerId, entry.node, stored.record, plan.identity);
          }
          await zk.remove(livePath).catch(() => {});
        }
        raced++;
      }
      // Past the limit (or not usable): leave no entry behind that no node can ever use.
      await zk.remove(path).catch(() => {});
    }
    return { raced, live: live.size };
  }

  async peers(): Promise<PeerTime[]> {
    const { zk } = await this.#connected();
    try {
      await zk.mkdirp(`${this.#base}/live`);
      const zkNow = await this.#zkNow(zk);
      const [ids] = await zk.getChildren(`${this.#base}/live`);
      const peers = await Promise.all(
        ids.map(async (id) => {
          const found = await zk
            .getData(this.#path('workers', id))
            .catch(ifCode(NO_NODE, undefined));
          if (found === undefined) return undefined;
          const [data, stat] = found;
          const record = JSON.parse(data.toString()) as ZkRecord;
          if (record.reportedAt < 0) return undefined;
          return {
            workerId: Number(id),
            reportedAt: record.reportedAt,
            ageMs: Math.max(0, zkNow - readMs(stat.mtime)),
          };
        }),
      );
      return peers.filter((peer) => peer !== undefined);
    } catch (error) {
      throw await this.#failed(error, registryDoing.peers);
    }
  }

  /** Ends the session: ZooKeeper then deletes this registry's liveness nodes at once. */
  async close(): Promise<void> {
    this.#closed = true;
    const session = await this.#session?.catch(() => undefined);
    this.#session = undefined;
    session?.close();
  }

  #lease(
    session: Session,
    workerId: number,
    entry: string,
    record: ZkRecord,
    identity: NodeIdentity,
  ): WorkerLease {
    /** Set when the release is sent: no write of this holding may be sent after it. */
    const holding = { ending: false };
    const livePath = this.#path('live', workerId);
    const lease: RegistryLease = new RegistryLease({
      backend: this.backend,
      workerId,
      lastTimestamp: record.lastTimestamp,
      reportedAt: record.reportedAt,
      ttlMs: session.ttlMs,
      write: async (kind, report) => {
        try {
          if (kind === 'renew')
            await this.#renewRecord(session, workerId, entry, report, identity, holding);
          else {
            holding.ending = true;
            await session.zk.commit(
              this.#guardedWrite(session, workerId, entry, report, identity, -1).remove(livePath),
            );
            session.leases.delete(lease);
          }
        } catch (error) {
          if (codeOf(error) === NO_NODE || codeOf(error) === SESSION_EXPIRED)
            throw leaseLost(this.backend, workerId, 'its session or liveness node is gone');
          throw await this.#failed(error, registryDoing[kind](workerId));
        }
        return session.ttlMs;
      },
    });
    session.leases.add(lease);
    // Tell the holder at once if the liveness node disappears (session expired, or deleted).
    session.zk.watchDeletion(livePath, () =>
      lease.lose(leaseLost(this.backend, workerId, 'its liveness node was deleted')),
    );
    return lease;
  }

  /**
   * One multi-op through the holder's session that records `report`: it succeeds only while the
   * session (and so its liveness node) is alive, so a success proves nobody else can hold the ID.
   * `version` guards the record (-1: any).
   */
  #guardedWrite(
    session: Session,
    workerId: number,
    entry: string,
    report: WorkerReport,
    identity: NodeIdentity,
    version: number,
  ): ZooKeeperTransactionLike {
    return session.zk
      .transaction()
      .check(this.#path('live', workerId))
      .setData(this.#path('forever', entry), leafData(identity, report.lastTimestamp))
      .setData(
        this.#path('workers', workerId),
        Buffer.from(
          JSON.stringify({ lastTimestamp: report.lastTimestamp, reportedAt: report.reportedAt }),
        ),
        version,
      );
  }

  /**
   * Writes the larger of the stored and the reported values: compare-and-swap on the record's
   * version, read again when another write of this holder (a renewal sent earlier, landing now)
   * changed it in between. A renewal that lands late never lowers the record.
   */
  async #renewRecord(
    session: Session,
    workerId: number,
    entry: string,
    report: WorkerReport,
    identity: NodeIdentity,
    holding: { ending: boolean },
  ): Promise<void> {
    // Only this holder's own renewals compete for the record, one or two at a time.
    for (let attempt = 1; attempt <= 10; attempt++) {
      const stored = await this.#record(session.zk, workerId);
      if (stored === undefined) throw leaseLost(this.backend, workerId, 'its record is gone');
      const merged = {
        lastTimestamp: Math.max(stored.record.lastTimestamp, report.lastTimestamp),
        reportedAt: Math.max(stored.record.reportedAt, report.reportedAt),
      };
      if (this.#interleave !== undefined)
        await this.#interleave({
          point: 'before-renew-write',
          backend: this.backend,
          workerId,
          report,
        });
      // The multi-op checks that a liveness node exists, not whose it is: once the release is
      // sent, another session may own the next one. Requests of one session are handled in the
      // order sent, so a write not sent before the release is never sent.
      if (holding.ending) throw leaseLost(this.backend, workerId, 'it was released');
      try {
        await session.zk.commit(
          this.#guardedWrite(session, workerId, entry, merged, identity, stored.version),
        );
        return;
      } catch (error) {
        if (codeOf(error) !== BAD_VERSION) throw error;
      }
    }
    throw new Error(`the record of worker ${workerId} kept changing under its renewal`);
  }

  /** Commits a claim, bounded by the operation timeout; false when another node won the race. */
  async #commitClaim(zk: Zk, claim: ZooKeeperTransactionLike): Promise<boolean> {
    try {
      await zk.commit(claim);
      return true;
    } catch (error) {
      if ([NODE_EXISTS, NO_NODE, BAD_VERSION, NOT_EMPTY].includes(codeOf(error))) return false;
      throw error;
    }
  }

  /**
   * The session, connecting first if there is none (or it expired); one attempt for all callers.
   */
  #connected(): Promise<Session> {
    if (this.#closed)
      return Promise.reject(
        new IdMintError('REGISTRY_UNAVAILABLE', 'zookeeper worker registry is closed'),
      );
    if (this.#session === undefined) {
      const attempt = this.#connect();
      this.#session = attempt;
      // A failed attempt answers the calls of the next moment too: a worker's start asks twice
      // in a row (peers, then acquire), and each would wait out the whole connect timeout (an
      // unreachable ZooKeeper failed a start after twice the timeout, 10.5 s for 5 s).
      attempt.catch(() => {
        setTimeout(() => {
          if (this.#session === attempt) this.#session = undefined;
        }, FAILED_CONNECT_REUSE_MS).unref();
      });
    }
    return this.#session;
  }

  async #connect(): Promise<Session> {
    const client = this.#createClient(this.#ttlMs);
    const session = new Session(client, this.#timeoutMs, () => this.#where);
    client.on('expired', () => {
      // A new session is made on the next call; every lease of this one is gone.
      if (this.#current === session) {
        this.#current = undefined;
        this.#session = undefined;
      }
      for (const lease of session.leases)
        lease.lose(leaseLost(this.backend, lease.workerId, 'its ZooKeeper session expired'));
      session.close();
    });
    // Not connected halfway through the timeout: the addresses are looked at then (the client
    // retries a refused connection in silence), so a failure says why within the timeout.
    const half = Math.floor(this.#timeoutMs / 2);
    let looked: Promise<string | undefined> | undefined;
    const look = setTimeout(() => {
      looked = this.#refusal(Math.max(1, half - 10));
    }, half);
    try {
      await withTimeout(
        new Promise<void>((resolve) => {
          client.on('connected', resolve);
          client.connect();
        }),
        this.#timeoutMs,
        () => new Error(`no connection within ${this.#timeoutMs} ms`),
      );
    } catch (error) {
      client.close();
      if (looked === undefined) throw await this.#failed(error, registryDoing.connecting);
      const refused = await looked;
      throw registryUnavailable(
        this.backend,
        this.#where,
        refused === undefined ? error : new Error(refused),
        this.#causes,
        registryDoing.connecting,
      );
    } finally {
      clearTimeout(look);
    }
    session.ttlMs = client.getSessionTimeout();
    this.#current = session;
    return session;
  }

  /** ZooKeeper's clock: the mtime of a write to the liveness directory. */
  async #zkNow(zk: Zk): Promise<number> {
    return readMs((await zk.setData(`${this.#base}/live`, Buffer.alloc(0))).mtime);
  }

  async #beforeClaim(workerId: number): Promise<void> {
    if (this.#interleave !== undefined)
      await this.#interleave({ point: 'before-claim', backend: this.backend, workerId });
  }

  /**
   * The record of `workerId` and a version a multi-op can check, or undefined when there is none.
   */
  async #record(zk: Zk, workerId: number): Promise<StoredRecord | undefined> {
    const path = this.#path('workers', workerId);
    for (;;) {
      const found = await zk.getData(path).catch(ifCode(NO_NODE, undefined));
      if (found === undefined) return undefined;
      const [data, stat] = found;
      if (stat.version !== 0)
        return { record: JSON.parse(data.toString()) as ZkRecord, version: stat.version };
      // node-zookeeper-client's multi-ops take version 0 for "any version" (`version || -1`), so
      // checking a record never written since its creation would check nothing. Write it once,
      // unchanged, with a plain setData, which does honour version 0 (and fails if another write
      // came first); then read it again.
      await zk.setData(path, data, 0).catch(ifCode(BAD_VERSION, undefined));
    }
  }

  /** Creates the record of `workerId` unless another node did first, then reads it. */
  async #createRecord(
    zk: Zk,
    workerId: number,
    record: ZkRecord,
  ): Promise<StoredRecord | undefined> {
    await zk
      .create(this.#path('workers', workerId), Buffer.from(JSON.stringify(record)), PERSISTENT)
      .catch(ifCode(NODE_EXISTS, ''));
    return this.#record(zk, workerId);
  }

  #path(dir: 'forever' | 'workers' | 'live', child: string | number): string {
    return `${this.#base}/${dir}/${child}`;
  }

  /** What the servers' addresses say within `ms`: a refusal (or another system cause), if any. */
  async #refusal(ms: number): Promise<string | undefined> {
    const probes = await Promise.all(this.#hosts.map((host) => probeAddress(host, ms)));
    return probes.find((found) => found !== undefined);
  }

  /**
   * `error` as REGISTRY_UNAVAILABLE in one line, saying what was being done (`doing`). The
   * client retries a refused connection without a word until the call's timeout, so a timeout or
   * a lost connection is told apart by the address itself: refusing (ZooKeeper is down), or
   * accepting and never answering.
   */
  async #failed(error: unknown, doing: string): Promise<Error> {
    if (isIdMintError(error)) return error;
    const cause = failureCause(error);
    let told = error;
    if (cause === undefined || cause.startsWith('timed out')) {
      const refused = await this.#refusal(Math.min(PROBE_MS, this.#timeoutMs));
      if (refused !== undefined) told = new Error(refused);
    }
    return registryUnavailable(this.backend, this.#where, told, this.#causes, doing);
  }
}

/** One ZooKeeper session, with promise-returning, time-bounded operations. */
class Session {
  readonly client: ZooKeeperClientLike;
  readonly zk: Zk;
  readonly leases = new Set<RegistryLease>();
  ttlMs = 0;

  constructor(client: ZooKeeperClientLike, timeoutMs: number, where: () => string) {
    this.client = client;
    this.zk = new Zk(client, timeoutMs, where);
  }

  close(): void {
    this.client.close();
  }
}

/** node-zookeeper-client's callback API as promises, each call bounded by the operation timeout. */
class Zk {
  readonly #client: ZooKeeperClientLike;
  readonly #timeoutMs: number;
  readonly #where: () => string;

  constructor(client: ZooKeeperClientLike, timeoutMs: number, where: () => string) {
    this.#client = client;
    this.#timeoutMs = timeoutMs;
    this.#where = where;
  }

  mkdirp(path: string): Promise<string> {
    return this.#call((cb) => this.#client.mkdirp(path, cb));
  }

  create(path: string, data: Buffer, mode: number): Promise<string> {
    return this.#call((cb) => this.#client.create(path, data, mode, cb));
  }

  remove(path: string): Promise<void> {
    return this.#call((cb) => this.#client.remove(path, -1, cb));
  }

  /** Sets `path`'s data if its version is `version` (-1: any). */
  setData(path: string, data: Buffer, version = -1): Promise<ZooKeeperStat> {
    return this.#call((cb) => this.#client.setData(path, data, version, cb));
  }

  getData(path: string): Promise<[Buffer, ZooKeeperStat]> {
    return this.#call((cb) =>
      this.#client.getData(path, (error, data, stat) => cb(error, [data, stat])),
    );
  }

  getChildren(path: string): Promise<[string[], ZooKeeperStat]> {
    return this.#call((cb) =>
      this.#client.getChildren(path, (error, children, stat) => cb(error, [children, stat])),
    );
  }

  commit(transaction: ZooKeeperTransactionLike): Promise<unknown> {
    return this.#call((cb) => transaction.commit(cb));
  }

  transaction(): ZooKeeperTransactionLike {
    return this.#client.transaction();
  }

  /** Calls `onDeleted` once when `path` is deleted (a one-shot watch, as ZooKeeper's are). */
  watchDeletion(path: string, onDeleted: () => void): void {
    this.#client.exists(
      path,
      (event) => {
        if (event.getType() === NODE_DELETED_EVENT) onDeleted();
      },
      () => {},
    );
  }

  #call<T>(run: (callback: (error: unknown, result: T) => void) => void): Promise<T> {
    const call = new Promise<T>((resolve, reject) => {
      run((error, result) => (error ? reject(error) : resolve(result)));
    });
    return withTimeout(
      call,
      this.#timeoutMs,
      () => new Error(`no answer from ${this.#where()} within ${this.#timeoutMs} ms`),
    );
  }
}

function codeOf(error: unknown): number {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : 0;
}

/** A `.catch` handler that turns a ZooKeeper error with `code` into `value` and rethrows others. */
function ifCode<T>(code: number, value: T): (error: unknown) => T {
  return (error) => {
    if (codeOf(error) === code) return value;
    throw error;
  };
}

/**
 * `10.0.0.1:8080-0000000005` -> entry; Leaf splits on "-", the last one keeps hosts with dashes.
 */
function parseEntry(node: string): ForeverEntry | undefined {
  const dash = node.lastIndexOf('-');
  const seq = node.slice(dash + 1);
  if (dash <= 0 || !/^\d{1,10}$/.test(seq)) return undefined;
  return { node, address: node.slice(0, dash), workerId: Number(seq) };
}

/** The name ZooKeeper would give sequence `workerId`: ten digits, zero-padded. */
function entryName(address: string, workerId: number): string {
  return `${address}-${String(workerId).padStart(10, '0')}`;
}

/** Leaf's Endpoint JSON, field for field (Leaf's Jackson mapper rejects unknown fields). */
function leafData(identity: NodeIdentity, timestamp: number): Buffer {
  return Buffer.from(
    JSON.stringify({
      ip: identity.host,
      port: String(identity.port),
      timestamp: Math.max(0, timestamp),
    }),
  );
}

/** The record of an entry only Leaf wrote: it may have issued IDs until its next report was due. */
function leafRecord(data: Buffer): ZkRecord {
  const timestamp = Number((JSON.parse(data.toString()) as { timestamp?: unknown }).timestamp);
  if (!Number.isSafeInteger(timestamp) || timestamp <= 0)
    return { lastTimestamp: -1, reportedAt: -1 };
  return { lastTimestamp: timestamp + LEAF_REPORT_INTERVAL_MS, reportedAt: timestamp };
}

function holderData(identity: NodeIdentity): Buffer {
  return Buffer.from(JSON.stringify({ host: identity.host, port: identity.port }));
}

function readMs(time: Buffer): number {
  return Number(time.readBigInt64BE(0));
}

/** Options for {@link connectZooKeeperWorkerRegistry}. */
export type ConnectZooKeeperOptions = Omit<
  ZooKeeperWorkerRegistryOptions,
  'createClient' | 'where'
>;

/**
 * A registry on ZooKeeper at `hosts` (2181 where no port is given), with node-zookeeper-client
 * loaded only now. Sessions are opened on first use.
 */
export async function connectZooKeeperWorkerRegistry(
  hosts: readonly UrlHost[],
  options: ConnectZooKeeperOptions = {},
): Promise<ZooKeeperWorkerRegistry> {
  const connectionString = hosts.map((host) => hostText(host, 2181)).join(',');
  const zookeeper = await loadDriver(
    'node-zookeeper-client',
    'a zookeeper:// worker registry',
    () => import('node-zookeeper-client'),
  );
  const closeWithinMs = options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
  return new ZooKeeperWorkerRegistry({
    ...options,
    where: connectionString,
    hosts: hosts.map((host) => ({ host: host.host, port: host.port ?? 2181 })),
    createClient: (sessionTimeout) =>
      closedWithin(
        zookeeper.createClient(connectionString, { sessionTimeout, spinDelay: 500, retries: 0 }),
        closeWithinMs,
      ),
  });
}

/**
 * node-zookeeper-client's close() sends CLOSE_SESSION and waits for the server to end the
 * connection. A server that accepted the connection but never answers never does, and the open
 * socket keeps the process alive forever. Once the close has had `ms` (one round trip's bound),
 * the socket is destroyed: the client is then closed, and the server ends the session on its own.
 */
function closedWithin<T extends { close(): void }>(client: T, ms: number): T {
  const close = client.close.bind(client);
  client.close = () => {
    close();
    // The client's connection manager is not part of its typed API: reached defensively.
    const manager = (
      client as { connectionManager?: { socket?: { destroy(): void; destroyed?: boolean } } }
    ).connectionManager;
    setTimeout(() => {
      if (manager?.socket !== undefined && manager.socket.destroyed !== true)
        manager.socket.destroy();
    }, ms).unref();
  };
  return client;
}
