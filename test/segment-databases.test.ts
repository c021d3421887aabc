import assert from 'node:assert/strict';
import { it, type TestContext } from 'node:test';
import { ManualClock } from '../src/clocks/manual-clock.ts';
import { MonotonicClock } from '../src/clocks/monotonic-clock.ts';
import { SegmentService } from '../src/service/segment-service.ts';
import { openSegmentStore } from '../src/backends/open-segment-store.ts';
import { FaultySegmentStore } from './support/faulty-segment-store.ts';
import { SEGMENT_BACKENDS, withPort, type SegmentBackend } from './support/segment-backends.ts';
import { rejectsWith } from './support/segment-store-suite.ts';
import { SERVICES, describeWithServices, hostPort } from './support/services.ts';
import { TcpProxy } from './support/tcp-proxy.ts';

const T0 = Date.UTC(2026, 5, 1, 12, 0, 0);

async function drawMany(service: SegmentService, tag: string, count: number): Promise<bigint[]> {
  const ids: bigint[] = [];
  for (let i = 0; i < count; i++) ids.push(service.nextSync(tag) ?? (await service.next(tag)));
  return ids;
}

/** Polls `condition` every 10 ms, failing after `ms` (generous: the machine is shared). */
async function until(condition: () => boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Runs `attempt` until it succeeds, at most `times` times, calling `between` after each failure.
 */
async function eventually<T>(
  attempt: () => Promise<T>,
  between: () => void = () => undefined,
  times = 6,
): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (error) {
      if (i >= times) throw error;
      between();
    }
  }
}

/**
 * A fixture with `tag`, plus a second store on the same table through a TcpProxy to cut, hang or
 * restore.
 */
async function behindProxy(
  t: TestContext,
  backend: SegmentBackend,
  service: 'postgres' | 'mysql' | 'redis',
  tag: string,
  step: number,
  timeoutMs: number,
) {
  const proxy = await TcpProxy.start(hostPort(SERVICES[service].url));
  t.after(() => proxy.close());
  const fixture = await backend.open();
  t.after(() => fixture.dispose());
  await fixture.store.createTag({ tag, step });
  const proxied = await openSegmentStore(withPort(fixture.url, proxy.port), {
    table: fixture.table,
    timeoutMs,
  });
  t.after(() => proxied.close());
  return { proxy, proxied };
}

function assertIncreasing(ids: readonly bigint[]): void {
  for (let i = 1; i < ids.length; i++)
    assert.ok(
      (ids[i] as bigint) > (ids[i - 1] as bigint),
      `not increasing at ${i}: ${ids[i - 1]} then ${ids[i]}`,
    );
}

// Leaf's own DDL (MySQL), verbatim but for the table name; the portable DDL elsewhere.
const LEAF_MYSQL_DDL = (table: string) => `CREATE TABLE \`${table}\` (
  \`biz_tag\` varchar(128)  NOT NULL DEFAULT '',
  \`max_id\` bigint(20) NOT NULL DEFAULT '1',
  \`step\` int(11) NOT NULL,
  \`description\` varchar(256)  DEFAULT NULL,
  \`update_time\` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (\`biz_tag\`)
) ENGINE=InnoDB`;
const PORTABLE_DDL = (table: string) =>
  `create table ${table} (biz_tag varchar(128) primary key, max_id bigint not null default ` +
  `1, step int not null, description varchar(256), update_time timestamp)`;

/**
 * The fence margin of the stores opened on tables idmint has no record of: the first allocation
 * fences every tag by it (docs/segments.md, Failover and restore).
 */
const FIRST_SIGHT = 1_000_000n;

const LEAF_TABLES: [SegmentBackend, (table: string) => string][] = [
  [SEGMENT_BACKENDS.mariadb, LEAF_MYSQL_DDL],
  [SEGMENT_BACKENDS.postgres, PORTABLE_DDL],
  [SEGMENT_BACKENDS.sqlite, PORTABLE_DDL],
];

for (const [backend, ddl] of LEAF_TABLES) {
  await describeWithServices(
    `Leaf compatibility: a leaf_alloc table made outside idmint (${backend.name})`,
    backend.services,
    () => {
      it("row ('leaf-segment-test', 1, 2000) gives 1, 2, 3, ... and max_id 2001", async (t) => {
        const fixture = await backend.open({ init: false });
        t.after(() => fixture.dispose());
        const sql = (statement: string) =>
          backend.sql?.(fixture.url, statement) ?? Promise.resolve([]);
        await sql(ddl(fixture.table));
        // idmint db init on the new table: adds only idmint's opaque column, and records the
        // database's history (the table is empty: the fence of a first sight raises nothing).
        await fixture.store.init();
        await sql(
          `insert into ${fixture.table}(biz_tag, max_id, step, description) ` +
            `values('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')`,
        );

        const service = new SegmentService({
          store: fixture.store,
          clock: new MonotonicClock(),
          tagRefreshMs: 0,
        });
        await service.start();
        assert.deepEqual(await drawMany(service, 'leaf-segment-test', 3), [1n, 2n, 3n]);
        const [row] = await sql(
          `select max_id from ${fixture.table} where biz_tag = 'leaf-segment-test'`,
        );
        assert.equal(String(row?.['max_id']), '2001');
        const record = await fixture.store.getTag('leaf-segment-test');
        assert.equal(record?.description, 'Test leaf Segment Mode Get Id');
        await service.close();
      });

      it('a tag moved from Leaf continues above it, fenced once, no overlap', async (t) => {
        const fixture = await backend.open({ init: false, fence: { ids: FIRST_SIGHT } });
        t.after(() => fixture.dispose());
        await backend.sql?.(fixture.url, ddl(fixture.table));
        // Leaf handed out ranges up to max_id 6001 (step 2000) before the switch.
        await backend.sql?.(
          fixture.url,
          `insert into ${fixture.table}(biz_tag, max_id, step, description) ` +
            `values('orders', 6001, 2000, 'moved from Leaf')`,
        );
        const service = new SegmentService({
          store: fixture.store,
          clock: new MonotonicClock(),
          tagRefreshMs: 0,
        });
        await service.start();
        assert.deepEqual(await drawMany(service, 'orders', 2), [
          6001n + FIRST_SIGHT,
          6002n + FIRST_SIGHT,
        ]);
        await service.close();
      });
    },
  );
}

const SERVERS: [SegmentBackend, 'postgres' | 'mysql' | 'redis'][] = [
  [SEGMENT_BACKENDS.postgres, 'postgres'],
  [SEGMENT_BACKENDS.mariadb, 'mysql'],
  [SEGMENT_BACKENDS.redis, 'redis'],
];

for (const [backend, service] of SERVERS) {
  await describeWithServices(
    `segment outage against a real database (${backend.name})`,
    backend.services,
    () => {
      it('serves buffered IDs while cut off, then fails fast, then recovers', async (t) => {
        const { proxy, proxied } = await behindProxy(t, backend, service, 'outage', 50, 1000);
        const store = new FaultySegmentStore(proxied); // passes everything through; counts calls
        const clock = new ManualClock(T0);
        const segments = new SegmentService({
          store,
          clock,
          step: { maxStep: 50 },
          retryAfterMs: 1000,
          tagRefreshMs: 0,
        });
        await segments.start();
        const stats = () => segments.stats().tags[0];

        const ids = await drawMany(segments, 'outage', 6); // past 10%: the next range loads
        await until(() => stats()?.nextReady === true, 'the next range is buffered');
        proxy.cut();
        for (let i = 0; i < 94; i++) {
          const id = segments.nextSync('outage');
          assert.notEqual(id, undefined, `buffered ID ${i} not served while the database is down`);
          ids.push(id as bigint);
        }
        await until(() => stats()?.loading === false, 'the failed prefetch settled');
        await rejectsWith(segments.next('outage'), 'STORE_UNAVAILABLE');
        const calls = store.calls.allocate;
        const burst = await Promise.allSettled(
          Array.from({ length: 50 }, () => segments.next('outage')),
        );
        assert.ok(
          burst.every(
            (r) =>
              r.status === 'rejected' &&
              (r.reason as { code?: string }).code === 'STORE_UNAVAILABLE',
          ),
        );
        assert.equal(store.calls.allocate, calls, 'failing fast: no database call per request');

        proxy.restore();
        clock.advance(1000);
        // The first attempt after the cut may still meet a connection the cut broke; each attempt
        // is bounded and the service retries on the next request after retryAfterMs.
        ids.push(
          await eventually(
            () => segments.next('outage'),
            () => clock.advance(1000),
          ),
        );
        assert.equal(new Set(ids).size, ids.length);
        assertIncreasing(ids);
        await segments.close();
      });

      it('a call never answered is STORE_UNAVAILABLE; the store recovers', async (t) => {
        const { proxy, proxied } = await behindProxy(t, backend, service, 'hang', 10, 1000);
        const first = await proxied.allocate('hang');
        proxy.hang();
        await rejectsWith(
          proxied.allocate('hang'),
          'STORE_UNAVAILABLE',
          /, allocating a range: timed out after 1000 ms$/,
        );
        proxy.restore();
        const next = await eventually(() => proxied.allocate('hang'));
        // The reply of the lost call must not answer this one (a desynchronised connection would).
        assert.ok(
          next.start >= first.end,
          `range [${next.start}, ${next.end}) overlaps [${first.start}, ${first.end})`,
        );
        assert.equal((await proxied.getTag('hang'))?.maxId, next.end);
      });

      it('skips a range the database committed but whose reply was lost', async (t) => {
        const fixture = await backend.open();
        t.after(() => fixture.dispose());
        await fixture.store.createTag({ tag: 'lost', step: 20 });
        const store = new FaultySegmentStore(fixture.store);
        const clock = new ManualClock(T0);
        const segments = new SegmentService({
          store,
          clock,
          step: { maxStep: 20 },
          prefetchThreshold: 1,
          loadTimeoutMs: 1000,
          retryAfterMs: 100,
          tagRefreshMs: 0,
        });
        await segments.start();
        const ids = await drawMany(segments, 'lost', 20);
        store.mode = 'lose-reply';
        await rejectsWith(segments.next('lost'), 'STORE_UNAVAILABLE', /outcome is unknown/);
        const lost = store.committed.at(-1);
        assert.deepEqual([lost?.start, lost?.end], [21n, 41n]);
        assert.equal(
          (await fixture.store.getTag('lost'))?.maxId,
          41n,
          'the database did commit it',
        );
        store.mode = 'pass';
        clock.advance(100);
        ids.push(...(await drawMany(segments, 'lost', 20)));
        assert.ok(
          ids.every((id) => id < 21n || id >= 41n),
          'an ID of the lost range was issued',
        );
        assert.equal(ids.at(-1), 60n);
        await segments.close();
      });
    },
  );
}
