// The cluster-order promise across OS processes and real stores (docs/segments.md, Cluster order):
// three `idmint serve` processes share a cluster-ordered tag; clients send requests to random
// nodes over Leaf's, idmint's and TinyId's routes, and for every two answers A and B where B's
// request was sent after A's answer arrived, B's IDs must all be above A's. Faults: SIGKILL of
// the issuer, SIGSTOP of it past the lease's TTL and SIGCONT (it comes back with its buffered
// ranges), a partition of it from its store (its TCP proxy cut), a rolling restart of every node.
// Every ID must also be unique.
import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import type { SegmentBackend } from './support/segment-backends.ts';
import { SEGMENT_BACKENDS, withPort } from './support/segment-backends.ts';
import { dropSet, SET_URLS } from './support/segment-sets.ts';
import { runIdmint } from './support/cli.ts';
import { startServe, type ServeProcess } from './support/serve-process.ts';
import { TcpProxy } from './support/tcp-proxy.ts';
import {
  describeWithServices,
  hostPort,
  uniqueName,
  type ServiceName,
} from './support/services.ts';
import { startLoad, type Load } from './support/ordered-load.ts';
import { describeViolations, orderViolations, repeatedIds } from './support/ordering-check.ts';

const TAG = 'orders';
/** Short, so a handover fits a test: the issuer fences 1 s (the safety margin) before it. */
const TTL_MS = 3000;
const NODES = 3;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Where the tag lives: one store, or a set of databases (`segment.stores`). */
interface Stores {
  /** The databases' URLs (one, or the set's in order). */
  readonly urls: readonly string[];
  readonly table: string;
  readonly set: boolean;
  dispose(): Promise<void>;
}

/** A store of `backend` on a table of its own, holding the cluster-ordered tag. */
async function oneStore(backend: SegmentBackend): Promise<Stores> {
  const fixture = await backend.open();
  await fixture.store.createTag({ tag: TAG, step: 1000, startId: 1n, ordering: 'cluster' });
  return {
    urls: [fixture.url],
    table: fixture.table,
    set: false,
    dispose: () => fixture.dispose(),
  };
}

/**
 * A set of two databases (PostgreSQL and MariaDB: database 0 keeps the lease and issues the tag),
 * made and given the tag by the CLI as an operator would.
 */
async function setOfTwo(): Promise<Stores> {
  const urls = [SET_URLS.postgresA, SET_URLS.mariadb];
  const table = uniqueName('ordset');
  const env = { IDMINT_SEGMENT_STORES: urls.join(','), IDMINT_SEGMENT_TABLE: table };
  const init = await runIdmint(['db', 'init'], { env });
  assert.equal(init.code, 0, init.stderr);
  const created = await runIdmint(
    ['tags', 'create', TAG, '--step', '1000', '--ordering', 'cluster'],
    { env },
  );
  assert.equal(created.code, 0, created.stderr);
  return { urls, table, set: true, dispose: () => dropSet(urls, table) };
}

/** Three serve processes on the stores, each through TCP proxies of its own where it can. */
class Cluster {
  readonly nodes: (ServeProcess | undefined)[] = [];
  /** Per node, one proxy per database. */
  readonly proxies: TcpProxy[][] = [];
  readonly #stores: Stores;

  private constructor(stores: Stores) {
    this.#stores = stores;
  }

  static async start(stores: Stores): Promise<Cluster> {
    const cluster = new Cluster(stores);
    const proxied = !stores.urls.some((url) => url.startsWith('sqlite:'));
    for (let i = 0; i < NODES; i++) {
      const mine: TcpProxy[] = [];
      if (proxied) for (const url of stores.urls) mine.push(await TcpProxy.start(hostPort(url)));
      cluster.proxies.push(mine);
    }
    for (let i = 0; i < NODES; i++) await cluster.restart(i);
    return cluster;
  }

  /** Starts node `i` (again), through its own proxies. */
  async restart(i: number): Promise<void> {
    const proxies = this.proxies[i] ?? [];
    const urls = this.#stores.urls.map((url, d) => {
      const proxy = proxies[d];
      return proxy === undefined ? url : withPort(url, proxy.port);
    });
    this.nodes[i] = await startServe([], {
      env: {
        ...(this.#stores.set
          ? { IDMINT_SEGMENT_STORES: urls.join(',') }
          : { IDMINT_SEGMENT_STORE: urls[0] }),
        IDMINT_SEGMENT_TABLE: this.#stores.table,
        IDMINT_SNOWFLAKE_ENABLED: 'false',
        IDMINT_SEGMENT_ISSUER_TTL_MS: String(TTL_MS),
        IDMINT_SEGMENT_ISSUER_RETRY_MS: '50',
        IDMINT_SEGMENT_WAIT_TIMEOUT_MS: '1000',
        IDMINT_SEGMENT_TIMEOUT_MS: '1000',
        IDMINT_SHUTDOWN_TIMEOUT_MS: '2000',
        IDMINT_LOG_LEVEL: 'info',
      },
    });
  }

  urls = (): string[] => this.nodes.filter((node) => node !== undefined).map((node) => node.url);

  /**
   * The index of a node that says it issues the tag (other than `not`), waiting up to `ms`.
   */
  async issuer(not?: number, ms = 20_000): Promise<number> {
    const until = performance.now() + ms;
    while (performance.now() < until) {
      for (const [i, node] of this.nodes.entries()) {
        if (node === undefined || i === not) continue;
        const status = await fetch(`${node.url}/v1/status`, { signal: AbortSignal.timeout(500) })
          .then((r) => r.json() as Promise<{ segment: { ordered: { issuer: string }[] } }>)
          .catch(() => undefined);
        if (status?.segment.ordered.some((entry) => entry.issuer === 'self')) return i;
      }
      await sleep(100);
    }
    throw new Error(`no node issued ${TAG} within ${ms} ms`);
  }

  async close(): Promise<void> {
    for (const node of this.nodes) {
      node?.child.kill('SIGCONT');
      await node?.kill('SIGKILL');
    }
    for (const proxy of this.proxies.flat()) await proxy.close();
    await this.#stores.dispose();
  }
}

/** Waits until the load has `more` answers beyond `from`, or fails after `ms`. */
async function progress(load: Load, more: number, ms: number, what: string): Promise<void> {
  const target = load.answered() + more;
  const until = performance.now() + ms;
  while (load.answered() < target) {
    if (performance.now() > until)
      assert.fail(`${what}: fewer than ${more} answers within ${ms} ms`);
    await sleep(50);
  }
}

/** Stops the load and asserts the promise and uniqueness over everything it recorded. */
async function check(load: Load): Promise<void> {
  const { answers, ids, failures } = await load.stop();
  const violations = orderViolations(answers);
  assert.equal(
    violations.length,
    0,
    `${violations.length} answers out of order of ${answers.length}:\n` +
      describeViolations(violations),
  );
  assert.deepEqual(repeatedIds(ids), [], 'IDs issued twice');
  process.stdout.write(
    `# ${answers.length} answers, ${ids.length} IDs, failures ${JSON.stringify([...failures])}\n`,
  );
}

const PLACES: readonly {
  name: string;
  services: readonly ServiceName[];
  open(): Promise<Stores>;
}[] = [
  ...(['sqlite', 'postgres', 'mariadb', 'redis'] as const).map((name) => ({
    name,
    services: SEGMENT_BACKENDS[name].services,
    open: () => oneStore(SEGMENT_BACKENDS[name]),
  })),
  { name: 'a set of PostgreSQL and MariaDB', services: ['postgres', 'mysql'], open: setOfTwo },
];

for (const { name, services, open } of PLACES) {
  await describeWithServices(`cluster order on ${name}`, services, () => {
    const clusters: Cluster[] = [];
    const loads: Load[] = [];
    after(async () => {
      // A failed test leaves its load running: stopped first, or the loops keep the process up.
      for (const load of loads) await load.stop();
      for (const cluster of clusters) await cluster.close().catch(() => undefined);
    });
    const start = async () => {
      const cluster = await Cluster.start(await open());
      clusters.push(cluster);
      const load = startLoad(cluster.urls, TAG);
      loads.push(load);
      await progress(load, 200, 15_000, 'before the fault');
      return { cluster, load, issuer: await cluster.issuer() };
    };

    it('holds across SIGKILL of the issuer', async () => {
      const { cluster, load, issuer } = await start();
      await cluster.nodes[issuer]?.kill('SIGKILL');
      cluster.nodes[issuer] = undefined;
      // Another node claims once the lease runs out, with a fresh range above the killed one's.
      await cluster.issuer(issuer);
      await progress(load, 200, 20_000, 'after SIGKILL');
      await cluster.restart(issuer);
      await progress(load, 200, 10_000, 'after the restart');
      await check(load);
    });

    it('holds across SIGSTOP of the issuer past its TTL, then SIGCONT', async () => {
      const { cluster, load, issuer } = await start();
      const stopped = cluster.nodes[issuer] as ServeProcess;
      stopped.child.kill('SIGSTOP');
      // Requests sent to it meanwhile wait; the others go on through a new issuer.
      await cluster.issuer(issuer);
      await progress(load, 200, 20_000, 'while the issuer is stopped');
      // A new issuer serves, so the stopped one's lease has run out. Requests sent to the stopped
      // node now wait in its socket and are read when it wakes, its old ranges still buffered.
      const waited = load.burst(stopped.url, 20);
      await sleep(500);
      // Its store, where it has a proxy, stalls as it wakes: the renewal that would tell it the
      // lease is gone takes a while, and only its own deadline stops it meanwhile.
      const proxies = cluster.proxies[issuer] ?? [];
      for (const proxy of proxies) proxy.hang();
      stopped.child.kill('SIGCONT');
      await waited;
      for (const proxy of proxies) proxy.restore();
      // It wakes with its buffered ranges and the requests that waited: it must not serve them.
      await sleep(1000);
      await progress(load, 200, 10_000, 'after SIGCONT');
      await check(load);
    });

    if (name !== 'sqlite')
      it('holds across a partition of the issuer from its store', async () => {
        const { cluster, load, issuer } = await start();
        const proxies = cluster.proxies[issuer] ?? [];
        for (const proxy of proxies) proxy.cut();
        // It stops at its deadline; another node claims once the lease runs out.
        await cluster.issuer(issuer);
        await progress(load, 200, 20_000, 'while the issuer is cut off');
        await sleep(1000);
        for (const proxy of proxies) proxy.restore();
        await progress(load, 200, 10_000, 'after the partition healed');
        await check(load);
      });

    it('holds across a rolling restart of every node', async () => {
      const { cluster, load } = await start();
      for (let i = 0; i < NODES; i++) {
        const node = cluster.nodes[i] as ServeProcess;
        cluster.nodes[i] = undefined;
        assert.equal(await node.stop('SIGTERM'), 0);
        await cluster.restart(i);
        await progress(load, 100, 15_000, `after restarting node ${i}`);
      }
      await check(load);
    });
  });
}
