// What a backend says about itself (the shape kysely gives its dialects): its kind, its URL
// schemes and forms, the roles it can play, how it reads its URL into typed options, and how it
// opens an adapter on them, loading its driver only then. The catalog (catalog.ts) lists one
// descriptor per backend; nothing outside a descriptor asks which backend a URL names.

import type { SegmentStore } from '../ports/segment-store.ts';
import type { WorkerRegistry } from '../ports/worker-registry.ts';
import type { Interleave } from '../registries/common.ts';
import type { UrlHost, UrlRefusal } from '../shared/connection-url.ts';
import type { ConnectSegmentStoreOptions } from '../stores/sql/sql-segment-store.ts';

export { isRefusal, refuse, type UrlRefusal } from '../shared/connection-url.ts';

/** What a backend can be: the two settings that take a URL. */
export type BackendRole = 'segment-store' | 'worker-registry';

/** Options every segment store is opened with (`table`, `timeoutMs`, `poolSize`, `fence`, ...). */
export interface StoreSettings extends ConnectSegmentStoreOptions {
  /** Where the URL came from, for messages: `IDMINT_SEGMENT_STORE`, `--store`. */
  readonly source?: string;
}

/** Options every worker registry is opened with; each applies only where it says. */
export interface RegistrySettings {
  /**
   * Cluster name for Redis, SQL and static; worker IDs are unique within it (static: on this
   * host). Default `idmint`. ZooKeeper and etcd take it from the URL path.
   */
  readonly name?: string;
  /** Lease TTL in ms (ZooKeeper: the session timeout asked for). Default 10000; static 3000. */
  readonly ttlMs?: number;
  /** Bound on connecting and on one coordinator round trip. Default 5000 ms. */
  readonly operationTimeoutMs?: number;
  /** static: directory of the state file. Default `./data`. */
  readonly stateDir?: string;
  /**
   * static: the host-wide directory of worker-ID locks, the same for every process of the host
   * (so two of them never run one worker ID of a cluster). Default `/tmp/idmint`.
   */
  readonly lockDir?: string;
  /**
   * Redis and SQL: the most any holder's `borrow` generator leads its clock (ms); a registry
   * whose database moved to a new history grants no lease for one TTL plus this. Default 0.
   */
  readonly maxLeadMs?: number;
  /** SQL: table name. Default `worker_node`. */
  readonly table?: string;
  /** ZooKeeper: how long an entry must be unwritten before it is recycled. Default 10000 ms. */
  readonly recycleAfterMs?: number;
  /** Tests only: pauses the registry at the steps docs/workers.md lists ({@link Interleave}). */
  readonly interleave?: Interleave;
}

/** One backend, described once. `Options` is what {@link parse} reads a URL into. */
export interface BackendDescriptor<Options> {
  /** `postgres`, `redis`, ...: the backend's name in messages, logs and metrics. */
  readonly kind: string;
  /** The URL schemes that name it, lower-case, without `:`. */
  readonly schemes: readonly string[];
  /**
   * The URL forms it accepts, per role it can play (for `--help`, messages and docs). A role
   * listed here must have its opener below, and the other way round (catalog.test.ts checks).
   */
  readonly forms: { readonly [R in BackendRole]?: readonly string[] };
  /**
   * True when the backend is a file this process owns: a store on it creates its schema when
   * opened, where a server database's schema is created deliberately (`idmint db init`).
   */
  readonly embedded?: boolean;
  /** `url` (which starts with one of {@link schemes}) read into options, or why it is refused. */
  parse(url: string): Options | UrlRefusal;
  /** Where the options point, without credentials (`db:5432`, a file), for messages. */
  target(options: Options): string;
  /** The host names to look up when explaining a failure; none for a file. */
  hosts(options: Options): readonly UrlHost[];
  /** Opens a segment store (its driver loaded only now). */
  openStore?(options: Options, settings: StoreSettings): Promise<SegmentStore>;
  /** Opens a worker registry (its driver loaded only now). */
  openRegistry?(options: Options, settings: RegistrySettings): Promise<WorkerRegistry>;
  /**
   * The cluster whose worker IDs a weak-dependency cache file holds (a file of another is never
   * used offline); absent when the registry needs no cache (static keeps its own state file).
   */
  cacheCluster?(options: Options, settings: RegistrySettings): string;
}
