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
  candidateWorkerIds,
  checkName,
  checkTtl,
  leaseLost,
  planAcquire,
  registryDoing,
  registryUnavailable,
  workerIdsExhausted,
  type Interleave,
  type KnownWorker,
} from '../common.ts';
import { BackendCauses } from '../../shared/failure-cause.ts';
import { loadDriver } from '../../shared/load-driver.ts';
import { hostText, type UrlHost } from '../../shared/connection-url.ts';

/** An operation for a transaction (etcd3's PutBuilder, DeleteBuilder and SingleRangeBuilder). */
export interface EtcdOperationLike {
  op(): Promise<object>;
}

/** A key as etcd returns it. */
export interface EtcdKeyValueLike {
  readonly key: Buffer;
  readonly value: Buffer;
  readonly lease: string;
  readonly mod_revision: string;
}

/** A transaction being built (etcd3's ComparatorBuilder). */
export interface EtcdTransactionLike {
  and(
    key: string,
    column: 'Create' | 'Mod' | 'Lease',
    cmp: '==',
    value: string | number,
  ): EtcdTransactionLike;
  then(...operations: EtcdOperationLike[]): EtcdTransactionLike;
  else(...operations: EtcdOperationLike[]): EtcdTransactionLike;
  /**
   * `responses` answer the operations of the branch taken, in order; `header.revision` is the
   * store's revision after it.
   */
  commit(): Promise<{
    succeeded: boolean;
    header: { revision: string };
    responses: { response_range?: { kvs: EtcdKeyValueLike[] } | null }[];
  }>;
}

/** The part of an `etcd3` client (`Etcd3` or a namespace of it) the registry uses. */
export interface EtcdLike {
  if(
    key: string,
    column: 'Create' | 'Mod' | 'Lease',
    cmp: '==',
    value: string | number,
  ): EtcdTransactionLike;
  put(key: string): EtcdOperationLike & {
    value(value: string): EtcdOperationLike & { lease(id: string): EtcdOperationLike };
  };
  delete(): { key(key: string): EtcdOperationLike };
  get(key: string): EtcdOperationLike & { exec(): Promise<{ kvs: EtcdKeyValueLike[] }> };
  getAll(): { prefix(prefix: string): { exec(): Promise<{ kvs: EtcdKeyValueLike[] }> } };
  lease(ttlSeconds: number, options: { autoKeepAlive: boolean }): EtcdLeaseLike;
  watch(): { key(key: string): { create(): Promise<EtcdWatcherLike> } };
  /** Used for one call, leaseTimeToLive, which etcd3 exposes only on its raw client. */
  readonly leaseClient: {
    leaseTimeToLive(request: { ID: string }): Promise<{ TTL: string; grantedTTL: string }>;
  };
  close(): void;
}

/** An etcd3 Lease with automatic keep-alive off: the worker renews it, so it knows when. */
export interface EtcdLeaseLike {
  grant(): Promise<string>;
  keepaliveOnce(): Promise<{ TTL: string }>;
  revoke(): Promise<void>;
  on(event: 'lost', handler: (error: Error) => void): unknown;
}

export interface EtcdWatcherLike {
  on(event: 'delete', handler: () => void): unknown;
  cancel(): Promise<void>;
}

/** Options for {@link EtcdWorkerRegistry}. */
export interface EtcdWorkerRegistryOptions {
  readonly client: EtcdLike;
  /** Cluster name; worker IDs are unique within it. Default `idmint`. */
  readonly name?: string;
  /** Lease TTL in ms, rounded up to whole seconds (etcd's unit). Default 10000. */
  readonly ttlMs?: number;
  /** Where etcd is, for error messages. Default `etcd`. */
  readonly where?: string;
  /** Close `client` in {@link EtcdWorkerRegistry.close}. Default false. */
  readonly ownsClient?: boolean;
  /** Tests only: pauses at the steps docs/workers.md lists (see {@link Interleave}). */
  readonly interleave?: Interleave;
}

interface EtcdRecord {
  readonly lastTimestamp: number;
  readonly reportedAt: number;
  readonly host: string;
  readonly port: number;
}

/** A record as this holder last saw it, with its mod revision ("0": none), for compare-and-swap. */
interface KnownRecord {
  record: EtcdRecord | undefined;
  modRevision: string;
}

/**
 * Worker IDs leased in etcd. Keys under `/idmint/workers/<name>/`:
 *
 * - `lease/<id>`: the claim, created in a transaction only if absent (`create_revision == 0`) and
 *   bound to an etcd lease, so it disappears when the lease expires or is revoked. The same
 *   transaction reads `record/<id>`, so the lease starts from the record as it stands after the
 *   claim, whatever happened since the candidates were listed;
 * - `record/<id>`: `{"lastTimestamp","reportedAt","host","port"}`, written only in transactions
 *   that check `lease/<id>` is still bound to the writer's lease, and kept after it is gone. A
 *   renewal writes the larger of the stored and the reported values, compare-and-swap on the
 *   record's mod revision, so one that lands late never lowers it.
 *
 * The worker renews (the guarded record write, then one keep-alive) every few seconds; etcd3's own
 * background keep-alive is off, so a lease never outlives the renewals that fence the generator.
 * A watch on the claim key tells the holder at once when etcd deletes it.
 */
export class EtcdWorkerRegistry implements WorkerRegistry {
  readonly backend = 'etcd';
  readonly #client: EtcdLike;
  readonly #prefix: string;
  readonly #ttlSeconds: number;
  readonly #where: string;
  /** Causes of this registry's failures, the last one the system named remembered. */
  readonly #causes = new BackendCauses();
  readonly #ownsClient: boolean;
  readonly #watchers = new Set<EtcdWatcherLike>();
  readonly #interleave: Interleave | undefined;

  constructor(options: EtcdWorkerRegistryOptions) {
    this.#client = options.client;
    this.#prefix = `/idmint/workers/${checkName(options.name ?? 'idmint')}/`;
    this.#ttlSeconds = Math.ceil(checkTtl(options.ttlMs ?? DEFAULT_TTL_MS) / 1000);
    this.#where = options.where ?? 'etcd';
    this.#ownsClient = options.ownsClient ?? false;
    this.#interleave = options.interleave;
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    const plan = planAcquire(request);
    const client = this.#client;
    const etcdLease = client.lease(this.#ttlSeconds, { autoKeepAlive: false });
    etcdLease.on('lost', () => {}); // reported by the failing renewal instead
    try {
      const leaseId = await etcdLease.grant();
      const [claims, records] = await Promise.all([this.#list('lease/'), this.#records()]);
      const live = new Set(claims.map((kv) => kv.id));
      const known: KnownWorker[] = [...records].map(([workerId, r]) => ({
        workerId,
        host: r.host,
        port: r.port,
        lastTimestamp: r.lastTimestamp,
        live: live.has(workerId),
      }));
      for (const id of live)
        if (!records.has(id))
          known.push({ workerId: id, host: '', port: -1, lastTimestamp: -1, live: true });
      const value = JSON.stringify({ host: plan.identity.host, port: plan.identity.port });
      for (const workerId of candidateWorkerIds(plan, known)) {
        const claimKey = this.#key('lease/', workerId);
        if (this.#interleave !== undefined)
          await this.#interleave({ point: 'before-claim', backend: this.backend, workerId });
        const { succeeded, responses } = await client
          .if(claimKey, 'Create', '==', 0)
          .then(
            client.put(claimKey).value(value).lease(leaseId),
            client.get(this.#key('record/', workerId)),
          )
          .commit();
        if (!succeeded) continue; // another node claimed it first: try the next ID
        // The record as the claim left it, not as listed: another node may have acquired, issued
        // and released this ID in between.
        const stored = responses[1]?.response_range?.kvs[0];
        const record =
          stored === undefined ? undefined : (JSON.parse(stored.value.toString()) as EtcdRecord);
        if (allows(plan, workerId, record?.lastTimestamp ?? -1)) {
          return await this.#lease(
            workerId,
            leaseId,
            etcdLease,
            { record, modRevision: stored?.mod_revision ?? '0' },
            plan.identity,
          );
        }
        // Used since it was listed, past what the caller asked for: give it back untouched.
        await client
          .if(claimKey, 'Lease', '==', leaseId)
          .then(client.delete().key(claimKey))
          .commit();
      }
      throw workerIdsExhausted(this.backend, plan, live.size);
    } catch (error) {
      // Nothing held: give the etcd lease back (and with it any claim it made) instead of
      // letting it block an ID until its TTL runs out.
      await etcdLease.revoke().catch(() => {});
      throw registryUnavailable(
        this.backend,
        this.#where,
        error,
        this.#causes,
        registryDoing.acquire,
      );
    }
  }

  async peers(): Promise<PeerTime[]> {
    try {
      const [claims, records] = await Promise.all([this.#list('lease/'), this.#records()]);
      const peers = await Promise.all(
        claims.map(async ({ id, lease }) => {
          const record = records.get(id);
          if (record === undefined || record.reportedAt < 0) return undefined;
          // etcd keeps no wall time; the lease's elapsed TTL says how long ago the peer renewed
          // (and so reported), to within a second.
          const ttl = await this.#client.leaseClient.leaseTimeToLive({ ID: lease });
          const ageMs = Math.max(0, (Number(ttl.grantedTTL) - Number(ttl.TTL) - 0.5) * 1000);
          return { workerId: id, reportedAt: record.reportedAt, ageMs };
        }),
      );
      return peers.filter((peer) => peer !== undefined);
    } catch (error) {
      throw registryUnavailable(
        this.backend,
        this.#where,
        error,
        this.#causes,
        registryDoing.peers,
      );
    }
  }

  async close(): Promise<void> {
    // Cancel the watches first: etcd3 re-opens a watch stream that breaks under it, on a timer
    // that would keep the process alive for half a minute after close.
    await Promise.all(
      [...this.#watchers].map((watcher) =>
        withTimeout(watcher.cancel(), 1000, () => new Error('cancel timed out')).catch(() => {}),
      ),
    );
    this.#watchers.clear();
    if (this.#ownsClient) this.#client.close();
  }

  async #lease(
    workerId: number,
    leaseId: string,
    etcdLease: EtcdLeaseLike,
    known: KnownRecord,
    identity: NodeIdentity,
  ): Promise<WorkerLease> {
    const { record } = known;
    const client = this.#client;
    const claimKey = this.#key('lease/', workerId);
    const recordKey = this.#key('record/', workerId);
    const watcher = await client.watch().key(claimKey).create();
    this.#watchers.add(watcher);
    const stop = () => {
      this.#watchers.delete(watcher);
      watcher.cancel().catch(() => {});
    };
    const lease: RegistryLease = new RegistryLease({
      backend: this.backend,
      workerId,
      lastTimestamp: record?.lastTimestamp ?? -1,
      reportedAt: record?.reportedAt ?? -1,
      ttlMs: this.#ttlSeconds * 1000,
      write: async (kind, report) => {
        try {
          if (kind === 'release') {
            const value = JSON.stringify({ ...report, host: identity.host, port: identity.port });
            const { succeeded } = await client
              .if(claimKey, 'Lease', '==', leaseId)
              .then(client.put(recordKey).value(value), client.delete().key(claimKey))
              .commit();
            if (!succeeded)
              throw leaseLost(this.backend, workerId, 'its key is gone or bound to another lease');
            stop();
            await etcdLease.revoke().catch(() => {});
            return 0;
          }
          // The record first (guarded by the lease), the keep-alive last: the TTL granted counts
          // from the keep-alive, so nothing after it delays the answer that moves the fence.
          await this.#renewRecord(workerId, leaseId, known, report, identity);
          const { TTL } = await etcdLease.keepaliveOnce();
          return Number(TTL) * 1000;
        } catch (error) {
          throw this.#failed(error, workerId, kind);
        }
      },
    });
    watcher.on('delete', () => {
      stop();
      lease.lose(
        leaseLost(this.backend, workerId, 'etcd deleted its key (lease expired or revoked)'),
      );
    });
    return lease;
  }

  /**
   * Writes the larger of the stored and the reported values while `lease/<id>` is bound to
   * `leaseId`: compare-and-swap on the record's mod revision. While the lease is held only its
   * holder writes the record, so the record this holder last saw (`known`) is normally current
   * and the swap takes one round trip; when it is not (a renewal sent earlier landed in between),
   * the failed swap returns the record as it is, and it is tried again from that.
   */
  async #renewRecord(
    workerId: number,
    leaseId: string,
    known: KnownRecord,
    report: WorkerReport,
    identity: NodeIdentity,
  ): Promise<void> {
    const client = this.#client;
    const claimKey = this.#key('lease/', workerId);
    const recordKey = this.#key('record/', workerId);
    let seen = { ...known };
    // Only this holder's own renewals compete for the record, one or two at a time.
    for (let attempt = 1; attempt <= 10; attempt++) {
      const record: EtcdRecord = {
        lastTimestamp: Math.max(seen.record?.lastTimestamp ?? -1, report.lastTimestamp),
        reportedAt: Math.max(seen.record?.reportedAt ?? -1, report.reportedAt),
        host: identity.host,
        port: identity.port,
      };
      if (this.#interleave !== undefined)
        await this.#interleave({
          point: 'before-renew-write',
          backend: this.backend,
          workerId,
          report,
        });
      const { succeeded, header, responses } = await client
        .if(claimKey, 'Lease', '==', leaseId)
        .and(recordKey, 'Mod', '==', seen.modRevision)
        .then(client.put(recordKey).value(JSON.stringify(record)))
        .else(client.get(claimKey), client.get(recordKey))
        .commit();
      if (succeeded) {
        // The put's mod revision is the revision the transaction made.
        if (BigInt(header.revision) > BigInt(known.modRevision))
          Object.assign(known, { record, modRevision: header.revision });
        return;
      }
      if (responses[0]?.response_range?.kvs[0]?.lease !== leaseId)
        throw leaseLost(this.backend, workerId, 'its key is gone or bound to another lease');
      const stored = responses[1]?.response_range?.kvs[0];
      seen = {
        record:
          stored === undefined ? undefined : (JSON.parse(stored.value.toString()) as EtcdRecord),
        modRevision: stored?.mod_revision ?? '0',
      };
    }
    throw new Error(`the record of worker ${workerId} kept changing under its renewal`);
  }

  #failed(error: unknown, workerId: number, kind: 'renew' | 'release'): Error {
    // etcd3 rejects a keep-alive of an expired lease with EtcdLeaseInvalidError.
    if (error instanceof Error && error.constructor.name === 'EtcdLeaseInvalidError')
      return leaseLost(this.backend, workerId, 'its etcd lease expired');
    const doing = registryDoing[kind](workerId);
    return registryUnavailable(this.backend, this.#where, error, this.#causes, doing);
  }

  #key(kind: 'lease/' | 'record/', workerId: number): string {
    return `${this.#prefix}${kind}${workerId}`;
  }

  async #list(kind: 'lease/' | 'record/'): Promise<{ id: number; lease: string; value: string }[]> {
    const { kvs } = await this.#client
      .getAll()
      .prefix(this.#prefix + kind)
      .exec();
    return kvs.map((kv) => ({
      id: Number(kv.key.toString().slice(this.#prefix.length + kind.length)),
      lease: kv.lease,
      value: kv.value.toString(),
    }));
  }

  async #records(): Promise<Map<number, EtcdRecord>> {
    const records = new Map<number, EtcdRecord>();
    for (const { id, value } of await this.#list('record/'))
      records.set(id, JSON.parse(value) as EtcdRecord);
    return records;
  }
}

/** Options for {@link connectEtcdWorkerRegistry}. */
export interface ConnectEtcdOptions
  extends Omit<EtcdWorkerRegistryOptions, 'client' | 'ownsClient' | 'where'> {
  /** Bound on one call. Default 5000 ms. */
  readonly operationTimeoutMs?: number;
}

/** Connects to etcd at `hosts` (2379 where no port is given) with etcd3, loaded only now. */
export async function connectEtcdWorkerRegistry(
  hosts: readonly UrlHost[],
  options: ConnectEtcdOptions = {},
): Promise<EtcdWorkerRegistry> {
  const endpoints = hosts.map((host) => `http://${hostText(host, 2379)}`);
  const { Etcd3 } = await loadDriver('etcd3', 'an etcd:// worker registry', () => import('etcd3'));
  const timeout = options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
  // A broken watch stream is re-opened after a constant, short pause: the default backoff grows
  // to 30 s, on a timer that outlives close() and holds the process open.
  const watchBackoff = { duration: 500, next: () => watchBackoff };
  const client = new Etcd3({
    hosts: endpoints,
    dialTimeout: timeout,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + timeout }),
    faultHandling: { watchBackoff },
  });
  // host:port, as every backend's address reads in messages (the URL scheme is etcd://).
  const where = hosts.map((host) => hostText(host, 2379)).join(',');
  return new EtcdWorkerRegistry({ ...options, client, ownsClient: true, where });
}
