// The cluster-order promise across OS processes and real stores (docs/segments.md, Cluster order):
// three `idmint serve` processes share a cluster-ordered tag; clients send requests to random
// nodes over Leaf's, idmint's and TinyId's routes, and for every two answers A and B where B's
// request was sent after A's answer arrived, B's IDs must all be above A's. Faults: SIGKILL of
// the issuer, SIGSTOP of it past the lease's TTL and SIGCONT (it comes back with its buffered
// ranges), a partition of it from its store (its TCP proxy cut), a rolling restart of every node.
// Every ID must also be unique.
import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import type { SegmentBackend, BackendFixture } from './support/segment-backends.ts';
import { SEGMENT_BACKENDS, withPort } from './support/segment-backends.ts';
import { startServe, type ServeProcess } from './support/serve-process.ts';
import { TcpProxy } from './support/tcp-proxy.ts';
import { describeWithServices, hostPort } from './support/services.ts';
import { startLoad, type Load } from './support/ordered-load.ts';
import { describeViolations, orderViolations, repeatedIds } from './support/ordering-check.ts';

const TAG = 'orders';
/** Short, so a handover fits a test: the issuer fences 1 s (the safety margin) before it. */
const TTL_MS = 3000;
const NODES = 3;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Three serve processes on one store, each through a TCP proxy of its own where it has a port. */
class Cluster {
  readonly nodes: (ServeProcess | undefined)[] = [];
  readonly proxies: TcpProxy[] = [];
  readonly #fixture: BackendFixture;

  private constructor(fixture: BackendFixture) {
    this.#fixture = fixture;
  }

  static async start(backend: SegmentBackend): Promise<Cluster> {
    const fixture = await backend.open();
    await fixture.store.createTag({ tag: TAG, step: 1000, startId: 1n, ordering: 'cluster' });
    const cluster = new Cluster(fixture);
    if (backend.name !== 'sqlite')
      for (let i = 0; i < NODES; i++)
        cluster.proxies.push(await TcpProxy.start(hostPort(fixture.url)));
    for (let i = 0; i < NODES; i++) await cluster.restart(i);
    return cluster;
  }

  /** Starts node `i` (again), through its own proxy. */
  async restart(i: number): Promise<void> {
    const proxy = this.proxies[i];
    const store = proxy === undefined ? this.#fixture.url : withPort(this.#fixture.url, proxy.port);
    this.nodes[i] = await startServe([], {
      env: {
        IDMINT_SEGMENT_STORE: store,
        IDMINT_SEGMENT_TABLE: this.#fixture.table,
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
    for (const proxy of this.proxies) await proxy.close();
    await this.#fixture.dispose();
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

for (const name of ['sqlite', 'postgres', 'mariadb'] as const) {
  const backend = SEGMENT_BACKENDS[name];
  await describeWithServices(`cluster order on ${name}`, backend.services, () => {
    const clusters: Cluster[] = [];
    const loads: Load[] = [];
    after(async () => {
      // A failed test leaves its load running: stopped first, or the loops keep the process up.
      for (const load of loads) await load.stop();
      for (const cluster of clusters) await cluster.close().catch(() => undefined);
    });
    const start = async () => {
      const cluster = await Cluster.start(backend);
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
      const proxy = cluster.proxies[issuer];
      proxy?.hang();
      stopped.child.kill('SIGCONT');
      await waited;
      proxy?.restore();
      // It wakes with its buffered ranges and the requests that waited: it must not serve them.
      await sleep(1000);
      await progress(load, 200, 10_000, 'after SIGCONT');
      await check(load);
    });

    if (name !== 'sqlite')
      it('holds across a partition of the issuer from its store', async () => {
        const { cluster, load, issuer } = await start();
        const proxy = cluster.proxies[issuer] as TcpProxy;
        proxy.cut();
        // It stops at its deadline; another node claims once the lease runs out.
        await cluster.issuer(issuer);
        await progress(load, 200, 20_000, 'while the issuer is cut off');
        await sleep(1000);
        proxy.restore();
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
