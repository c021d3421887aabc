// Worker-ID registries at scale (issue 13, "Nodes and worker IDs"): what a node pays to find a
// free worker ID as the 1,024 of a 10-bit worker field fill up, what 50 live nodes' renewals cost
// the coordinator, and how long 20 nodes starting at the same moment take to all hold an ID.
//
//   npm run bench:registry                                  every part, every reachable backend
//   npm run bench:registry -- --parts acquire --backends redis,etcd
//   NODES=50 STARTUP_NODES=20 WINDOW_MS=15000 TAKEN=1,512,1023 npm run bench:registry -- --write
//
// Everything it writes is under a namespace (or table) of its own, removed at the end, and every
// node process it starts is stopped before it exits.
import { readFileSync, readdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Socket } from 'node:net';
import type { WorkerLease, WorkerRegistry } from '../src/ports/worker-registry.ts';
import {
  openWorkerRegistry,
  type OpenWorkerRegistryOptions,
} from '../src/backends/open-worker-registry.ts';
import { EtcdWorkerRegistry, type EtcdLike } from '../src/registries/etcd/etcd-worker-registry.ts';
import { SqlWorkerRegistry } from '../src/registries/sql/sql-worker-registry.ts';
import {
  ZooKeeperWorkerRegistry,
  type ZooKeeperClientLike,
} from '../src/registries/zookeeper/zookeeper-worker-registry.ts';
import { backendOptions } from '../src/backends/catalog.ts';
import { mysqlBackend } from '../src/backends/mysql/mysql-backend.ts';
import { postgresBackend } from '../src/backends/postgres/postgres-backend.ts';
import { MysqlDriver } from '../src/sql/mysql-driver.ts';
import { PostgresDriver } from '../src/sql/postgres-driver.ts';
import type { SqlDriver } from '../src/sql/sql-driver.ts';
import { SqliteDriver } from '../src/sql/sqlite-driver.ts';
import {
  deleteEtcdNamespace,
  deleteRedisNamespace,
  deleteZooKeeperNamespace,
  dropSqlTable,
} from '../test/support/registry-admin.ts';
import { SERVICES, reachable, type ServiceName } from '../test/support/services.ts';
import { WorkerProcess } from '../test/support/worker-processes.ts';
import {
  loadNote,
  machineLine,
  markdownTable,
  median,
  pause,
  writeSection,
} from './support/report.ts';

const WRITE = process.argv.includes('--write');
const MAX_WORKERS = 1024;
/** Worker IDs already held by other live leases when a new node acquires. */
const TAKEN = (process.env['TAKEN'] ?? '1,512,1023').split(',').map(Number);
/** Timed acquires at each fill level (acquire, then release). */
const REPEATS = Number(process.env['REPEATS'] ?? 5);
const NODES = Number(process.env['NODES'] ?? 50);
const STARTUP_NODES = Number(process.env['STARTUP_NODES'] ?? 20);
const WINDOW_MS = Number(process.env['WINDOW_MS'] ?? 15_000);
/** The server's defaults: a 10 s lease renewed every 3 s (docs/configuration.md). */
const TTL_MS = 10_000;
const RENEW_INTERVAL_MS = 3000;
const SAFETY_MARGIN_MS = 1000;
/** Fill leases must outlive a whole curve without being renewed. */
const FILL_TTL_MS = 300_000;
const RUN = `bench_${process.pid}_${Date.now().toString(36)}`;

function argList(flag: string): string[] | undefined {
  const at = process.argv.indexOf(flag);
  return at < 0 ? undefined : (process.argv[at + 1] ?? '').split(',').filter(Boolean);
}

/** One backend: how to reach it, what to remove afterwards, and where its server's load shows. */
interface Backend {
  readonly name: string;
  readonly service?: ServiceName;
  readonly url: string;
  readonly options: OpenWorkerRegistryOptions;
  cleanup(): Promise<void>;
  /** Starts counting requests reaching the server; what it returns stops and gives the count. */
  requests?(): Promise<() => Promise<number>>;
  /** The name of the server's processes, for their CPU time from /proc. */
  readonly processName?: string;
  /**
   * For the acquire curve: the timed node's registry, and what it read so far (SQL: rows the node
   * received; Redis: commands its scripts ran, from INFO commandstats). Default: opened from the
   * URL, reads not counted.
   */
  openCounted?(
    options: OpenWorkerRegistryOptions,
  ): Promise<{ registry: WorkerRegistry; reads(): Promise<number> }>;
}

const sqliteDir = mkdtempSync(join(tmpdir(), 'idmint-bench-registry-'));
const TABLE = `worker_node_${RUN}`;

/** A SQL registry on `driver`, counting the rows every statement returns to the node. */
async function countedSql(open: () => Promise<SqlDriver>, options: OpenWorkerRegistryOptions) {
  const driver = await open();
  let rows = 0;
  const client: SqlDriver = {
    dialect: driver.dialect,
    withConnection: (run, connectionOptions) =>
      driver.withConnection(
        (connection) =>
          run({
            query: async (sql, params) => {
              const result = await connection.query(sql, params);
              rows += result.rows.length;
              return result;
            },
          }),
        connectionOptions,
      ),
    close: () => driver.close(),
  };
  const registry = new SqlWorkerRegistry({
    client,
    ownsClient: true,
    name: options.name,
    table: options.table,
    ttlMs: options.ttlMs,
  });
  return { registry, reads: async () => rows };
}
const pool = { poolSize: 2, timeoutMs: 30_000 };

/** An etcd registry whose client counts the keys its ranges return to the node. */
async function countedEtcd(options: OpenWorkerRegistryOptions) {
  const { Etcd3 } = await import('etcd3');
  // As connectEtcdWorkerRegistry: a constant watch backoff, or close() leaves a 30 s timer behind.
  const watchBackoff = { duration: 500, next: () => watchBackoff };
  const etcd = new Etcd3({ hosts: SERVICES.etcd.url, faultHandling: { watchBackoff } });
  let keys = 0;
  const client = new Proxy(etcd, {
    get(target, property, receiver) {
      if (property !== 'getAll') return Reflect.get(target, property, receiver) as unknown;
      return () => ({
        prefix: (prefix: string) => ({
          exec: async () => {
            const result = await target.getAll().prefix(prefix).exec();
            keys += result.kvs.length;
            return result;
          },
        }),
      });
    },
  }) as unknown as EtcdLike;
  const registry = new EtcdWorkerRegistry({
    client,
    ownsClient: true,
    name: RUN,
    ttlMs: options.ttlMs,
  });
  return { registry, reads: async () => keys };
}

/** A ZooKeeper registry whose sessions count the children their listings return to the node. */
async function countedZooKeeper(options: OpenWorkerRegistryOptions) {
  const zookeeper = await import('node-zookeeper-client');
  let children = 0;
  const createClient = (sessionTimeout: number): ZooKeeperClientLike => {
    const client = zookeeper.createClient(SERVICES.zookeeper.url, {
      sessionTimeout,
      spinDelay: 500,
      retries: 0,
    }) as unknown as ZooKeeperClientLike;
    const getChildren = client.getChildren.bind(client);
    client.getChildren = (path, callback) =>
      getChildren(path, (error, names, stat) => {
        children += names?.length ?? 0;
        callback(error, names, stat);
      });
    return client;
  };
  const registry = new ZooKeeperWorkerRegistry({
    createClient,
    name: RUN,
    ttlMs: options.ttlMs,
    operationTimeoutMs: options.operationTimeoutMs,
  });
  return { registry, reads: async () => children };
}

const BACKENDS: Record<string, Backend> = {
  sqlite: {
    name: 'sqlite',
    url: `sqlite:${join(sqliteDir, 'registry.db')}`,
    options: { name: RUN },
    cleanup: async () => rmSync(sqliteDir, { recursive: true, force: true }),
    openCounted: (options) =>
      countedSql(
        () => SqliteDriver.open(join(sqliteDir, 'registry.db'), { timeoutMs: 30_000 }),
        options,
      ),
  },
  postgres: {
    name: 'postgres',
    service: 'postgres',
    url: SERVICES.postgres.url,
    options: { name: RUN, table: TABLE },
    cleanup: () => dropSqlTable(SERVICES.postgres.url, TABLE),
    requests: () => counting(postgresStatements),
    processName: 'postgres',
    openCounted: (options) =>
      countedSql(
        () => PostgresDriver.open(backendOptions(postgresBackend, SERVICES.postgres.url), pool),
        options,
      ),
  },
  mysql: {
    name: 'mysql',
    service: 'mysql',
    url: SERVICES.mysql.url,
    options: { name: RUN, table: TABLE },
    cleanup: () => dropSqlTable(SERVICES.mysql.url, TABLE),
    processName: 'mariadbd',
    openCounted: (options) =>
      countedSql(
        () => MysqlDriver.open(backendOptions(mysqlBackend, SERVICES.mysql.url), pool),
        options,
      ),
  },
  redis: {
    name: 'redis',
    service: 'redis',
    url: SERVICES.redis.url,
    options: { name: RUN },
    cleanup: () => deleteRedisNamespace(SERVICES.redis.url, RUN),
    requests: redisNamespaceScripts,
    processName: 'redis-server',
    openCounted: async (options) => ({
      registry: await openWorkerRegistry(SERVICES.redis.url, options),
      reads: redisScriptCommands,
    }),
  },
  etcd: {
    name: 'etcd',
    service: 'etcd',
    url: `etcd://${new URL(SERVICES.etcd.url).host}/${RUN}`,
    options: {},
    cleanup: () => deleteEtcdNamespace(SERVICES.etcd.url, RUN),
    requests: () => counting(etcdMessages),
    processName: 'etcd',
    openCounted: countedEtcd,
  },
  zookeeper: {
    name: 'zookeeper',
    service: 'zookeeper',
    url: `zookeeper://${SERVICES.zookeeper.url}/${RUN}`,
    options: {},
    cleanup: () => deleteZooKeeperNamespace(SERVICES.zookeeper.url, RUN),
    requests: () => counting(zooKeeperPackets),
    processName: 'java',
    openCounted: countedZooKeeper,
  },
};

// --- coordinator-side counters -------------------------------------------------------------

/** Redis's calls per command (INFO commandstats). */
async function redisCommandStats(): Promise<Map<string, number>> {
  const { Redis } = await import('ioredis');
  const client = new Redis(SERVICES.redis.url, { lazyConnect: true });
  await client.connect();
  try {
    const info = await client.info('commandstats');
    return new Map(
      [...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map((m) => [m[1] ?? '', Number(m[2])]),
    );
  } finally {
    client.disconnect();
  }
}

/** Counts by reading a running total at the start and at the end. */
async function counting(total: () => Promise<number>): Promise<() => Promise<number>> {
  const start = await total();
  return async () => (await total()) - start;
}

/**
 * Redis: the scripts run on this run's keys, seen through MONITOR (every registry call is one
 * EVAL, one round trip; the commands inside a script are not round trips). Only this namespace:
 * other sessions share the server.
 */
async function redisNamespaceScripts(): Promise<() => Promise<number>> {
  const { Redis } = await import('ioredis');
  const client = new Redis(SERVICES.redis.url, { lazyConnect: true });
  await client.connect();
  const monitor = await client.monitor();
  const tag = `{${RUN}}`;
  let calls = 0;
  monitor.on('monitor', (_time: string, args: string[]) => {
    if (/^eval(sha)?$/i.test(args[0] ?? '') && args.some((arg) => arg.includes(tag))) calls++;
  });
  return async () => {
    monitor.disconnect();
    client.disconnect();
    return calls;
  };
}

/**
 * Redis: commands run other than the scripts themselves and INFO: what the scripts read and wrote.
 */
async function redisScriptCommands(): Promise<number> {
  let total = 0;
  for (const [command, calls] of await redisCommandStats())
    if (!['eval', 'evalsha', 'info'].includes(command)) total += calls;
  return total;
}

/** etcd: gRPC messages received, unary calls and keep-alive stream messages alike (/metrics). */
async function etcdMessages(): Promise<number> {
  const text = await (await fetch(`${SERVICES.etcd.url}/metrics`)).text();
  return [...text.matchAll(/^grpc_server_msg_received_total\{[^}]*\} (\S+)$/gm)].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
}

/** ZooKeeper: packets received (`srvr`, one of the four-letter words this server allows). */
function zooKeeperPackets(): Promise<number> {
  const { hostname: host, port } = new URL(`tcp://${SERVICES.zookeeper.url}`);
  return new Promise((resolve, reject) => {
    const socket = new Socket();
    let text = '';
    socket.on('data', (chunk) => (text += chunk.toString()));
    socket.on('error', reject);
    socket.on('close', () => {
      const received = /^Received: (\d+)$/m.exec(text);
      if (received === null) reject(new Error(`no packet count in srvr's answer: ${text}`));
      else resolve(Number(received[1]));
    });
    socket.connect(Number(port), host, () => socket.end('srvr'));
  });
}

/**
 * PostgreSQL: statements on this run's table (index and sequential scans, pg_stat_user_tables):
 * each registry statement is one. Only this table: other sessions share the database.
 */
async function postgresStatements(): Promise<number> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: SERVICES.postgres.url });
  await client.connect();
  try {
    // Backends send their statistics when a transaction ends, at most once a second (a node's
    // connection runs one statement every 3 s, so it sends every time); clear this session's
    // snapshot so the read sees the latest.
    await client.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ n: string }>(
      'SELECT COALESCE(seq_scan, 0) + COALESCE(idx_scan, 0) AS n FROM pg_stat_user_tables ' +
        'WHERE relname = $1',
      [TABLE],
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

/** CPU time (user + system, ms) of every process named `name`, read from /proc. */
function cpuMs(name: string): number {
  const tick = 10; // USER_HZ is 100 on Linux: one tick is 10 ms
  let total = 0;
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      if (stat.slice(stat.indexOf('(') + 1, close) !== name) continue;
      const fields = stat.slice(close + 2).split(' ');
      total += (Number(fields[11]) + Number(fields[12])) * tick; // utime, stime
    } catch {
      // the process ended while the list was read
    }
  }
  return total;
}

// --- part 1: acquire time as the worker IDs fill up -----------------------------------------

interface AcquireRow {
  backend: string;
  taken: number;
  medianMs: number;
  maxMs: number;
  /** Time to take the fill leases up to this level, per lease. */
  fillMsPerLease: number;
  /** What the acquire read (median): see {@link Backend.openCounted}. */
  reads: number;
}

async function acquireCurve(backend: Backend): Promise<AcquireRow[]> {
  const options = { ...backend.options, ttlMs: FILL_TTL_MS, operationTimeoutMs: 30_000 };
  // The fill leases come from one registry (each with an identity of its own), the timed acquires
  // from another: a different node, as in a fleet.
  const filler = await openWorkerRegistry(backend.url, options);
  const counted =
    backend.openCounted === undefined ? undefined : await backend.openCounted(options);
  const node = counted?.registry ?? (await openWorkerRegistry(backend.url, options));
  const held: WorkerLease[] = [];
  const rows: AcquireRow[] = [];
  try {
    for (const taken of TAKEN) {
      const fillStart = performance.now();
      const before = held.length;
      while (held.length < taken)
        held.push(
          await filler.acquire({
            identity: { host: `10.1.${held.length >> 8}.${held.length & 255}`, port: 8080 },
            maxWorkers: MAX_WORKERS,
          }),
        );
      const fillMsPerLease = (performance.now() - fillStart) / Math.max(1, held.length - before);
      const times: number[] = [];
      const reads: number[] = [];
      for (let i = 0; i < REPEATS; i++) {
        const r0 = (await counted?.reads()) ?? Number.NaN;
        const t = performance.now();
        const lease = await node.acquire({
          identity: { host: `10.2.0.${i}`, port: 8080 },
          maxWorkers: MAX_WORKERS,
        });
        times.push(performance.now() - t);
        reads.push(((await counted?.reads()) ?? Number.NaN) - r0);
        await lease.release({ lastTimestamp: lease.lastTimestamp, reportedAt: lease.reportedAt });
      }
      rows.push({
        backend: backend.name,
        taken,
        medianMs: median(times),
        maxMs: Math.max(...times),
        fillMsPerLease,
        reads: median(reads),
      });
      process.stderr.write(
        `acquire ${backend.name} taken=${taken}: median ${median(times).toFixed(2)} ms, ` +
          `reads ${median(reads)}, fill ${fillMsPerLease.toFixed(2)} ms/lease\n`,
      );
    }
  } finally {
    for (const lease of held)
      await lease
        .release({ lastTimestamp: lease.lastTimestamp, reportedAt: lease.reportedAt })
        .catch(() => {});
    await Promise.all([filler.close(), node.close()]);
  }
  return rows;
}

// --- parts 2 and 3: node processes ---------------------------------------------------------

function startNodes(backend: Backend, count: number, tag: string): WorkerProcess[] {
  return Array.from(
    { length: count },
    (_, i) =>
      new WorkerProcess({
        url: backend.url,
        options: { ...backend.options, ttlMs: TTL_MS },
        identity: { host: `10.3.${tag}.${i}`, port: 8080 },
        layout: 'idmint',
        renewIntervalMs: RENEW_INTERVAL_MS,
        safetyMarginMs: SAFETY_MARGIN_MS,
        // Issuing is not what is measured: one ID a minute, so the first burst never comes.
        batch: 1,
        everyMs: 600_000,
      }),
  );
}

async function stopNodes(nodes: readonly WorkerProcess[]): Promise<void> {
  await Promise.all(
    nodes.map(async (node) => {
      const stopped = await Promise.race([node.stop(), pause(10_000).then(() => 'late' as const)]);
      if (stopped === 'late') await node.kill();
    }),
  );
}

interface StartupRow {
  backend: string;
  nodes: number;
  allMs: number;
  medianMs: number;
  distinct: number;
}

/** STARTUP_NODES processes, loaded, told to start at one moment: until every one holds an ID. */
async function startup(backend: Backend): Promise<StartupRow> {
  const nodes = startNodes(backend, STARTUP_NODES, '1');
  try {
    await Promise.all(nodes.map((node) => node.loaded));
    const go = Date.now();
    for (const node of nodes) node.start();
    const started = await Promise.all(nodes.map((node) => node.started));
    const ids = started.map((s) => s.workerId);
    const distinct = new Set(ids).size;
    if (distinct !== nodes.length)
      throw new Error(
        `${backend.name}: ${nodes.length} nodes got only ${distinct} distinct worker IDs: ` +
          `${ids.join(',')}`,
      );
    const times = started.map((s) => s.at - go);
    process.stderr.write(
      `startup ${backend.name}: all ${Math.max(...times)} ms, IDs ${ids.join(',')}\n`,
    );
    return {
      backend: backend.name,
      nodes: nodes.length,
      allMs: Math.max(...times),
      medianMs: median(times),
      distinct,
    };
  } finally {
    await stopNodes(nodes);
  }
}

interface RenewalRow {
  backend: string;
  nodes: number;
  idlePerSecond: number;
  loadedPerSecond: number;
  perNodePerSecond: number;
  idleCpuPercent: number;
  loadedCpuPercent: number;
}

/** The server's request rate and CPU over one window. */
async function window(backend: Backend): Promise<{ perSecond: number; cpuPercent: number }> {
  const stop = await backend.requests?.();
  const c0 = cpuMs(backend.processName ?? '');
  const t0 = performance.now();
  await pause(WINDOW_MS);
  const requests = (await stop?.()) ?? Number.NaN;
  const elapsed = performance.now() - t0;
  const c1 = cpuMs(backend.processName ?? '');
  return { perSecond: (requests * 1000) / elapsed, cpuPercent: ((c1 - c0) * 100) / elapsed };
}

/** NODES processes holding a lease each at the default renewal interval, against an idle window. */
async function renewalLoad(backend: Backend): Promise<RenewalRow> {
  const idle = await window(backend);
  const nodes = startNodes(backend, NODES, '2');
  try {
    await Promise.all(nodes.map((node) => node.loaded));
    for (const node of nodes) node.start();
    await Promise.all(nodes.map((node) => node.started));
    await pause(RENEW_INTERVAL_MS); // start-up's own requests out of the window
    const loaded = await window(backend);
    const row = {
      backend: backend.name,
      nodes: NODES,
      idlePerSecond: idle.perSecond,
      loadedPerSecond: loaded.perSecond,
      perNodePerSecond: (loaded.perSecond - idle.perSecond) / NODES,
      idleCpuPercent: idle.cpuPercent,
      loadedCpuPercent: loaded.cpuPercent,
    };
    process.stderr.write(`renewal ${backend.name}: ${JSON.stringify(row)}\n`);
    return row;
  } finally {
    await stopNodes(nodes);
  }
}

// --- the run ---------------------------------------------------------------------------------

const parts = argList('--parts') ?? ['acquire', 'renewal', 'startup'];
const wanted = argList('--backends') ?? Object.keys(BACKENDS);
const backends: Backend[] = [];
for (const name of wanted) {
  const backend = BACKENDS[name];
  if (backend === undefined)
    throw new Error(`unknown backend ${name}; one of ${Object.keys(BACKENDS).join(', ')}`);
  if (backend.service !== undefined && !(await reachable(backend.service))) {
    process.stderr.write(`!!! ${name} unreachable at ${SERVICES[backend.service].url}: left out\n`);
    continue;
  }
  backends.push(backend);
}

const load = loadNote();
const acquireRows: AcquireRow[] = [];
const renewalRows: RenewalRow[] = [];
const startupRows: StartupRow[] = [];
try {
  for (const backend of backends) {
    try {
      if (parts.includes('acquire')) acquireRows.push(...(await acquireCurve(backend)));
      // Renewal load: the coordinators a fleet renews against (SQLite is one host's file).
      if (parts.includes('renewal') && backend.requests !== undefined)
        renewalRows.push(await renewalLoad(backend));
      if (parts.includes('startup')) startupRows.push(await startup(backend));
    } finally {
      await backend.cleanup();
    }
  }
} finally {
  rmSync(sqliteDir, { recursive: true, force: true });
}

const f = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : 'n/a';
const sections: string[] = [
  `${machineLine()} ${load} The services run on the same 2 cores, and other sessions use them too.`,
];
let acquireTable: string | undefined;
if (acquireRows.length > 0) {
  const byBackend = new Map<string, AcquireRow[]>();
  for (const row of acquireRows)
    byBackend.set(row.backend, [...(byBackend.get(row.backend) ?? []), row]);
  const rows = [...byBackend.values()].map((list) => {
    const at = (taken: number) => list.find((r) => r.taken === taken);
    const first = at(TAKEN[0] ?? 1)?.medianMs ?? Number.NaN;
    const last = at(TAKEN.at(-1) ?? 1023)?.medianMs ?? Number.NaN;
    return [
      list[0]?.backend ?? '',
      ...TAKEN.map((taken) => f(at(taken)?.medianMs ?? Number.NaN, 2)),
      f(last / first, 1),
      ...TAKEN.map((taken) => f(at(taken)?.reads ?? Number.NaN)),
      ...TAKEN.slice(1).map((taken) => f(at(taken)?.fillMsPerLease ?? Number.NaN, 2)),
    ];
  });
  acquireTable = markdownTable(
    [
      'registry',
      ...TAKEN.map((t) => `${f(t)} taken, ms`),
      `${f(TAKEN.at(-1) ?? 0)} vs ${f(TAKEN[0] ?? 0)}`,
      ...TAKEN.map((t) => `read at ${f(t)}`),
      ...TAKEN.slice(1).map((t) => `fill to ${f(t)}, ms/lease`),
    ],
    rows,
  );
  sections.push(
    `**Acquire time** with 1, 512 and 1,023 of ${f(MAX_WORKERS)} worker IDs held by other ` +
      `live leases: median of ${REPEATS} acquires by a new node (each released before the ` +
      `next, so after the first the freed ID is recycled), in ms. "Read" is what one acquire ` +
      `read, the median: SQL, rows the database returned to the node; Redis, commands its ` +
      `script ran inside Redis (INFO commandstats, shared with other clients); etcd, keys its ` +
      `ranges returned; ZooKeeper, children its listings returned. "Fill" is the mean time ` +
      `per lease while the other leases were taken, one after another.\n\n` +
      acquireTable,
  );
}
if (renewalRows.length > 0) {
  sections.push(
    `**Renewal load** of ${NODES} node processes, each holding a lease (TTL ` +
      `${TTL_MS / 1000} s, renewed every ${RENEW_INTERVAL_MS / 1000} s: the defaults), ` +
      `measured at the server over ${WINDOW_MS / 1000} s against an idle window just before: ` +
      `requests per second the server received (Redis: EVAL calls on this run's keys, one per ` +
      `registry call, by MONITOR; PostgreSQL: statements on this run's table, ` +
      `pg_stat_user_tables; etcd: gRPC messages, keep-alive stream messages included, ` +
      `/metrics; ZooKeeper: packets, \`srvr\`. The etcd and ZooKeeper counts are server-wide, ` +
      `and other sessions share the services: read them against the idle window) and the ` +
      `server processes' CPU from /proc (100% = one core).\n\n` +
      markdownTable(
        [
          'coordinator',
          'idle req/s',
          `with ${NODES} nodes req/s`,
          'per node req/s',
          'idle CPU %',
          `with ${NODES} nodes CPU %`,
        ],
        renewalRows.map((r) => [
          r.backend,
          f(r.idlePerSecond, 1),
          f(r.loadedPerSecond, 1),
          f(r.perNodePerSecond, 2),
          f(r.idleCpuPercent, 1),
          f(r.loadedCpuPercent, 1),
        ]),
      ),
  );
}
if (startupRows.length > 0) {
  sections.push(
    `**Start-up of ${STARTUP_NODES} nodes at once**: ${STARTUP_NODES} processes, each with ` +
      `its registry open, told to start at the same moment; time until each holds a worker ID ` +
      `(\`SnowflakeWorker.start\`: acquire and the clock check against the live peers). Every ` +
      `run checks that the ${STARTUP_NODES} IDs are distinct.\n\n` +
      markdownTable(
        ['registry', 'nodes', 'all hold an ID, ms', 'median node, ms', 'distinct IDs'],
        startupRows.map((r) => [r.backend, f(r.nodes), f(r.allMs), f(r.medianMs), f(r.distinct)]),
      ),
  );
}
const markdown = sections.join('\n\n');
// What docs/benchmarks.md keeps: the acquire table, and the renewal load and the start-up in a line
// each.
const takenList = [
  TAKEN.slice(0, -1)
    .map((t) => f(t))
    .join(', '),
  f(TAKEN.at(-1) ?? 0),
]
  .filter((part) => part !== '')
  .join(' and ');
const lines = [
  ...(renewalRows.length === 0
    ? []
    : [
        `renewal load of ${NODES} nodes, requests per node per second (server CPU with ` +
          `${NODES} nodes): ` +
          renewalRows
            .map((r) => `${r.backend} ${f(r.perNodePerSecond, 2)} (${f(r.loadedCpuPercent, 1)}%)`)
            .join(', '),
      ]),
  ...(startupRows.length === 0
    ? []
    : [
        `${STARTUP_NODES} nodes started at once, until all hold an ID: ` +
          startupRows.map((r) => `${r.backend} ${f(r.allMs)} ms`).join(', ') +
          `; distinct IDs in every run: ` +
          `${startupRows.every((r) => r.distinct === r.nodes) ? 'yes' : '**no**'}`,
      ]),
];
const page = [
  `${machineLine()} ${load} The services run on the same 2 cores. Acquire: median of ${REPEATS} by \
a new node with \
${takenList} of ${f(MAX_WORKERS)} worker IDs held; "read" is what one acquire read (SQL rows, \
Redis script \
commands, etcd keys, ZooKeeper children).`,
  acquireTable ?? '',
  lines.map((line) => `- ${line}`).join('\n'),
]
  .filter((part) => part !== '')
  .join('\n\n');
process.stdout.write(`${markdown}\n`);
if (WRITE) writeSection('registry', page);
