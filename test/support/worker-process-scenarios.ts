import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import { decomposeId, defineLayout, getLayout, type LayoutSpec } from '../../src/core/layout.ts';
import { REQUIRE_SERVICES, describeWithServices, uniqueName } from './services.ts';
import { TcpProxy } from './tcp-proxy.ts';
import {
  WorkerProcess,
  assertNoDuplicates,
  fakeTimeEnv,
  findLibfaketime,
} from './worker-processes.ts';
import { delay } from './workers.ts';
import type { WorkerProcessConfig } from './worker-process.ts';
import type { RegistryHarness } from './worker-registry-suite.ts';

const EPOCH = '2026-01-01T00:00:00Z';
/** One worker ID, so every node waits for whoever holds it. */
const oneWorker: LayoutSpec = {
  name: 'one-worker',
  timeBits: 41,
  workerBits: 0,
  sequenceBits: 22,
  epoch: EPOCH,
};
/** One worker ID and 32 IDs per ms: bursts make a `borrow` generator run ahead of its clock. */
const leading: LayoutSpec = {
  name: 'leading',
  timeBits: 48,
  workerBits: 0,
  sequenceBits: 5,
  totalBits: 53,
  epoch: EPOCH,
};

/** An ID a worker process printed, with the wall time of its burst. */
export interface PrintedId {
  readonly at: number;
  readonly id: bigint;
}

/**
 * What the SIGKILL scenario checks, from every ID the killed holder and its successor printed:
 * how far the killed one ran ahead of its clock, its last timestamp, the successor's first.
 * A loop, not `Math.max(...values)`: a fast machine prints several hundred thousand IDs, and
 * spreading that many arguments overflows the stack.
 */
export function killFigures(
  dead: readonly PrintedId[],
  next: readonly PrintedId[],
  spec: LayoutSpec,
): { lead: number; deadMax: number; nextMin: number } {
  const layout = defineLayout(spec);
  const timestampOf = (id: bigint) => decomposeId(id, layout).timestamp;
  let lead = Number.NEGATIVE_INFINITY;
  let deadMax = Number.NEGATIVE_INFINITY;
  for (const { at, id } of dead) {
    const t = timestampOf(id);
    if (t - at > lead) lead = t - at;
    if (t > deadMax) deadMax = t;
  }
  let nextMin = Number.POSITIVE_INFINITY;
  for (const { id } of next) nextMin = Math.min(nextMin, timestampOf(id));
  return { lead, deadMax, nextMin };
}

/**
 * Uniqueness under faults, with real OS processes: each scenario starts `worker-process.ts`
 * children against the backend, collects every ID they print, and checks none repeats.
 * `configured`: worker IDs come from configuration (static), so there is nothing to contend for.
 */
export async function runWorkerProcessScenarios(
  harness: RegistryHarness,
  options: { configured?: boolean } = {},
): Promise<void> {
  await describeWithServices(
    `${harness.backend} worker registry, several processes`,
    harness.services,
    () => {
      const timing = {
        renewIntervalMs: Math.floor(harness.ttlMs / 6),
        safetyMarginMs: Math.floor(harness.ttlMs / 6),
      };
      const children: WorkerProcess[] = [];
      const proxies: TcpProxy[] = [];
      const names: string[] = [];
      const namespace = () => {
        const name = uniqueName('p');
        names.push(name);
        return name;
      };
      const spawn = (
        name: string,
        overrides: Partial<WorkerProcessConfig> = {},
        env?: NodeJS.ProcessEnv,
      ) => {
        const child = new WorkerProcess(
          {
            url: harness.url(name),
            options: harness.options(name),
            identity: { host: '10.9.0.1', port: 9000 },
            layout: oneWorker,
            ...timing,
            batch: 50,
            everyMs: 10,
            ...overrides,
          },
          env,
        );
        children.push(child);
        return child;
      };
      after(async () => {
        await Promise.all(
          children.map((child) => (child.child.exitCode === null ? child.kill() : undefined)),
        );
        await Promise.all(proxies.map((proxy) => proxy.close()));
        for (const name of names) await harness.cleanup(name);
      });

      if (options.configured !== true) {
        it('20 processes started at once: 20 worker IDs, no collision (inv. 1)', {
          timeout: 120_000,
        }, async () => {
          const name = namespace();
          // The registry's default bound (5 s) for a start: until the coordinator first answers,
          // a start is bounded by it as a whole, and 20 processes connecting at once on a loaded
          // 2-core machine took longer than the suite's 1.5 s to hear first (etcd3's retries, a
          // SQL table's probe after a slow CREATE used to hide it).
          const options = { ...harness.options(name), operationTimeoutMs: 5000 };
          const nodes = Array.from({ length: 20 }, (_, i) =>
            spawn(name, {
              identity: { host: `10.9.1.${i}`, port: 9000 },
              layout: 'idmint',
              options,
            }),
          );
          await Promise.all(nodes.map((node) => node.loaded));
          // all at once: Leaf's cold-start race gave two nodes worker 0
          for (const node of nodes) node.start();
          const started = await Promise.all(nodes.map((node) => node.started));
          const workerIds = started.map((s) => s.workerId);
          assert.equal(new Set(workerIds).size, 20, `worker IDs: ${workerIds.join(', ')}`);
          await delay(1000);
          await Promise.all(nodes.map((node) => node.stop()));
          const count = assertNoDuplicates(nodes);
          assert.ok(count >= 20 * 50, `only ${count} IDs`);
          const idmint = getLayout('idmint');
          nodes.forEach((node, i) => {
            assert.ok(
              node.ids.every(({ id }) => decomposeId(id, idmint).workerId === workerIds[i]),
            );
          });
        });
      }

      it('SIGKILL of a holder ahead of its clock: the next starts past it (inv. 3)', {
        timeout: 120_000,
      }, async () => {
        const name = namespace();
        const borrow = { policy: 'borrow' as const, maxLeadMs: 1000 };
        // 200 IDs/ms asked, 32 possible
        const dead = spawn(name, { layout: leading, rollback: borrow, batch: 4000, everyMs: 20 });
        await dead.loaded;
        dead.start();
        await dead.started;
        // The successor is loaded before the kill, so it asks while the dead lease is surely live,
        // however long a process takes to start on this machine.
        const next = spawn(name, { layout: leading, rollback: borrow, retryStartMs: 60_000 });
        await next.loaded;
        await delay(1500);
        await dead.kill();
        const killedAt = Date.now();
        next.start();
        const started = await next.started;
        await delay(300);
        await next.stop();
        assertNoDuplicates([dead, next]);
        const { lead, deadMax, nextMin } = killFigures(dead.ids, next.ids, leading);
        assert.ok(
          lead > 100,
          `the killed holder ran only ${lead} ms ahead of its clock; the scenario needs it ahead`,
        );
        assert.ok(
          nextMin > deadMax,
          `next holder's first timestamp ${nextMin} is not after the dead one's last ${deadMax}`,
        );
        if (options.configured !== true) {
          assert.ok(
            next.retries.some((r) => r.code === 'WORKER_IDS_EXHAUSTED'),
            'the ID was refused while the dead lease was live',
          );
          const waited = started.at - killedAt;
          assert.ok(
            waited >= harness.ttlMs - timing.renewIntervalMs - 250,
            `reassigned ${waited} ms after the kill, before the ${harness.ttlMs} ms lease ` +
              `could expire`,
          );
        }
      });

      if (harness.target !== undefined) {
        const target = harness.target;
        it('coordinator unreachable: the holder stops before reassignment (inv. 2)', {
          timeout: 120_000,
        }, async () => {
          const name = namespace();
          const proxy = await TcpProxy.start(target);
          proxies.push(proxy);
          const cut = spawn(name, { url: harness.url(name, proxy), everyMs: 5 });
          await cut.loaded;
          cut.start();
          await cut.started;
          await delay(1000);
          proxy.hang();
          const next = spawn(name, {
            identity: { host: '10.9.0.2', port: 9000 },
            retryStartMs: 60_000,
          });
          await next.loaded;
          next.start();
          const started = await next.started;
          await delay(300);
          await next.stop();
          const fenced = cut.errors.find((e) => e.code === 'LEASE_LOST');
          assert.ok(
            fenced !== undefined,
            `the cut-off holder never fenced: ${JSON.stringify(cut.errors)}`,
          );
          assert.ok(
            fenced.at < started.at,
            `fenced at ${fenced.at}, after the ID was reassigned at ${started.at}`,
          );
          const lastCut = cut.ids.reduce(
            (max, { at }) => Math.max(max, at),
            Number.NEGATIVE_INFINITY,
          );
          assert.ok(lastCut < started.at, 'the cut-off holder issued after its ID was reassigned');
          assertNoDuplicates([cut, next]);
          const cutMax = cut.ids.reduce((max, { id }) => (id > max ? id : max), 0n);
          assert.ok(
            next.ids.every(({ id }) => id > cutMax),
            'the next holder issued IDs at or below the cut-off one',
          );
        });
      }

      const faketime = findLibfaketime();
      const noFaketime = `libfaketime not found (apt-get install faketime)`;
      if (faketime === undefined && !REQUIRE_SERVICES)
        process.stderr.write(`\n!!! SKIPPING the clock-rollback restart test: ${noFaketime}\n`);
      it('a restart with the clock 10 minutes back is refused (invariant 4)', {
        timeout: 120_000,
        skip: faketime === undefined && !REQUIRE_SERVICES ? noFaketime : false,
      }, async () => {
        assert.ok(faketime !== undefined, `IDMINT_REQUIRE_SERVICES=1 but ${noFaketime}`);
        const name = namespace();
        const first = spawn(name);
        await first.loaded;
        first.start();
        await first.started;
        await delay(300);
        assert.equal(await first.stop(), 0);
        const behind = spawn(name, {}, fakeTimeEnv(faketime, '-600s'));
        const { now } = await behind.loaded;
        assert.ok(
          Date.now() - now > 590_000,
          'libfaketime did not move the child process clock back',
        );
        behind.start();
        await assert.rejects(behind.started, (error: Error & { code?: string }) => {
          assert.equal(error.code, 'CLOCK_MOVED_BACKWARDS');
          assert.match(
            error.message,
            new RegExp(
              'local clock reads \\S+Z, (59\\d{4}|6\\d{5}) ms behind \\S+Z, the time its ' +
                "previous holder's clock showed",
            ),
          );
          return true;
        });
        assert.equal(await behind.exited, 3);
        // The record is untouched: a node with a correct clock starts, after the first one's IDs.
        const fine = spawn(name);
        await fine.loaded;
        fine.start();
        await fine.started;
        await delay(200);
        await fine.stop();
        const firstMax = first.ids.reduce((max, { id }) => (id > max ? id : max), 0n);
        assert.ok(fine.ids.length > 0 && fine.ids.every(({ id }) => id > firstMax));
        assertNoDuplicates([first, fine]);
      });
    },
  );
}
