import { withTimeout } from '../../core/timeout.ts';
import type { AcquireRequest, NodeIdentity, PeerTime, WorkerLease, WorkerRegistry, WorkerReport } from '../../ports/worker-registry.ts';
import {
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_TTL_MS,
  RegistryLease,
  candidateWorkerIds,
  checkName,
  checkTtl,
  leaseLost,
  planAcquire,
  registryUnavailable,
  workerIdsExhausted,
  type KnownWorker,
} from '../common.ts';

/** An operation for a transaction (etcd3's PutBuilder and DeleteBuilder). */
export interface EtcdOperationLike {
  op(): Promise<object>;
}

/** The part of an `etcd3` client (`Etcd3` or a namespace of it) the registry uses. */
export interface EtcdLike {
  if(key: string, column: 'Create' | 'Lease', cmp: '==', value: string | number): {
    then(...operations: EtcdOperationLike[]): { commit(): Promise<{ succeeded: boolean }> };
  };
  put(key: string): EtcdOperationLike & { value(value: string): EtcdOperationLike & { lease(id: string): EtcdOperationLike } };
  delete(): { key(key: string): EtcdOperationLike };
  getAll(): { prefix(prefix: string): { exec(): Promise<{ kvs: { key: Buffer; value: Buffer; lease: string }[] }> } };
  lease(ttlSeconds: number, options: { autoKeepAlive: boolean }): EtcdLeaseLike;
  watch(): { key(key: string): { create(): Promise<EtcdWatcherLike> } };
  /** Used for one call, leaseTimeToLive, which etcd3 exposes only on its raw client. */
  readonly leaseClient: { leaseTimeToLive(request: { ID: string }): Promise<{ TTL: string; grantedTTL: string }> };
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
}

interface EtcdRecord {
  readonly lastTimestamp: number;
  readonly reportedAt: number;
  readonly host: string;
  readonly port: number;
}

/**
 * Worker IDs leased in etcd. Keys under `/idmint/workers/<name>/`:
 *
 * - `lease/<id>`: the claim, created in a transaction only if absent (`create_revision == 0`) and
 *   bound to an etcd lease, so it disappears when the lease expires or is revoked;
 * - `record/<id>`: `{"lastTimestamp","reportedAt","host","port"}`, written only in transactions
 *   that check `lease/<id>` is still bound to the writer's lease, and kept after it is gone.
 *
 * The worker renews (one keep-alive plus the guarded record write) every few seconds; etcd3's own
 * background keep-alive is off, so a lease never outlives the renewals that fence the generator.
 * A watch on the claim key tells the holder at once when etcd deletes it.
 */
export class EtcdWorkerRegistry implements WorkerRegistry {
  readonly backend = 'etcd';
  readonly #client: EtcdLike;
  readonly #prefix: string;
  readonly #ttlSeconds: number;
  readonly #where: string;
  readonly #ownsClient: boolean;
  readonly #watchers = new Set<EtcdWatcherLike>();

  constructor(options: EtcdWorkerRegistryOptions) {
    this.#client = options.client;
    this.#prefix = `/idmint/workers/${checkName(options.name ?? 'idmint')}/`;
    this.#ttlSeconds = Math.ceil(checkTtl(options.ttlMs ?? DEFAULT_TTL_MS) / 1000);
    this.#where = options.where ?? 'etcd';
    this.#ownsClient = options.ownsClient ?? false;
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
      const known: KnownWorker[] = [...records].map(([workerId, r]) => ({ workerId, host: r.host, port: r.port, lastTimestamp: r.lastTimestamp, live: live.has(workerId) }));
      for (const id of live) if (!records.has(id)) known.push({ workerId: id, host: '', port: -1, lastTimestamp: -1, live: true });
      const value = JSON.stringify({ host: plan.identity.host, port: plan.identity.port });
      for (const workerId of candidateWorkerIds(plan, known)) {
        const claimKey = this.#key('lease/', workerId);
        const { succeeded } = await client.if(claimKey, 'Create', '==', 0).then(client.put(claimKey).value(value).lease(leaseId)).commit();
        if (succeeded) return await this.#lease(workerId, leaseId, etcdLease, records.get(workerId), plan.identity);
        // another node claimed it first: try the next ID
      }
      throw workerIdsExhausted(this.backend, plan, live.size);
    } catch (error) {
      // Nothing held: give the etcd lease back (and with it any claim it made) instead of
      // letting it block an ID until its TTL runs out.
      await etcdLease.revoke().catch(() => {});
      throw registryUnavailable(this.backend, this.#where, error);
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
      throw registryUnavailable(this.backend, this.#where, error);
    }
  }

  async close(): Promise<void> {
    // Cancel the watches first: etcd3 re-opens a watch stream that breaks under it, on a timer
    // that would keep the process alive for half a minute after close.
    await Promise.all([...this.#watchers].map((watcher) => withTimeout(watcher.cancel(), 1000, () => new Error('cancel timed out')).catch(() => {})));
    this.#watchers.clear();
    if (this.#ownsClient) this.#client.close();
  }

  async #lease(workerId: number, leaseId: string, etcdLease: EtcdLeaseLike, record: EtcdRecord | undefined, identity: NodeIdentity): Promise<WorkerLease> {
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
          let ttlMs = 0;
          if (kind === 'renew') {
            const { TTL } = await etcdLease.keepaliveOnce();
            ttlMs = Number(TTL) * 1000;
          }
          const value = JSON.stringify({ ...report, host: identity.host, port: identity.port });
          const write = client.put(recordKey).value(value);
          const operations = kind === 'renew' ? [write] : [write, client.delete().key(claimKey)];
          const { succeeded } = await client.if(claimKey, 'Lease', '==', leaseId).then(...operations).commit();
          if (!succeeded) throw leaseLost(this.backend, workerId, 'its key is gone or bound to another lease');
          if (kind === 'release') {
            stop();
            await etcdLease.revoke().catch(() => {});
          }
          return ttlMs;
        } catch (error) {
          throw this.#failed(error, workerId);
        }
      },
    });
    watcher.on('delete', () => {
      stop();
      lease.lose(leaseLost(this.backend, workerId, 'etcd deleted its key (lease expired or revoked)'));
    });
    return lease;
  }

  #failed(error: unknown, workerId: number): Error {
    // etcd3 rejects a keep-alive of an expired lease with EtcdLeaseInvalidError.
    if (error instanceof Error && error.constructor.name === 'EtcdLeaseInvalidError') return leaseLost(this.backend, workerId, 'its etcd lease expired');
    return registryUnavailable(this.backend, this.#where, error);
  }

  #key(kind: 'lease/' | 'record/', workerId: number): string {
    return `${this.#prefix}${kind}${workerId}`;
  }

  async #list(kind: 'lease/' | 'record/'): Promise<{ id: number; lease: string; value: string }[]> {
    const { kvs } = await this.#client.getAll().prefix(this.#prefix + kind).exec();
    return kvs.map((kv) => ({ id: Number(kv.key.toString().slice(this.#prefix.length + kind.length)), lease: kv.lease, value: kv.value.toString() }));
  }

  async #records(): Promise<Map<number, EtcdRecord>> {
    const records = new Map<number, EtcdRecord>();
    for (const { id, value } of await this.#list('record/')) records.set(id, JSON.parse(value) as EtcdRecord);
    return records;
  }
}

/** Options for {@link connectEtcdWorkerRegistry}. */
export interface ConnectEtcdOptions extends Omit<EtcdWorkerRegistryOptions, 'client' | 'ownsClient' | 'where'> {
  /** Bound on one call. Default 5000 ms. */
  readonly operationTimeoutMs?: number;
}

/** Connects to etcd at `hosts` (`http://host:2379`, comma-separated) with etcd3, loaded only now. */
export async function connectEtcdWorkerRegistry(hosts: string, options: ConnectEtcdOptions = {}): Promise<EtcdWorkerRegistry> {
  const { Etcd3 } = await import('etcd3');
  const timeout = options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
  // A broken watch stream is re-opened after a constant, short pause: the default backoff grows
  // to 30 s, on a timer that outlives close() and holds the process open.
  const watchBackoff = { duration: 500, next: () => watchBackoff };
  const client = new Etcd3({
    hosts: hosts.split(','),
    dialTimeout: timeout,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + timeout }),
    faultHandling: { watchBackoff },
  });
  return new EtcdWorkerRegistry({ ...options, client, ownsClient: true, where: hosts });
}
