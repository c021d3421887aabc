// Issue 23.4: a store or registry that fails while idmint runs is told in one line naming the
// backend, its address and the cause as the operating system (or the database) gave it, with the
// operation in words: `postgres segment store at 127.0.0.1:5432, allocating a range: connection
// refused`. Never a driver's words (etcd3's "circuit breaker is open", ioredis's "Stream isn't
// writeable", pg's "Connection terminated unexpectedly") nor a method's name ("listTagChanges
// failed"). Each real service sits behind a TcpProxy that refuses (its port closed: the service
// is down) or black-holes (connections open, nothing answers) while the adapter runs.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { openWorkerRegistry } from '../src/backends/open-worker-registry.ts';
import type { WorkerLease, WorkerRegistry } from '../src/ports/worker-registry.ts';
import { NOT_IN_A_LINE, assertLine } from './support/failure-lines.ts';
import { FAILING_REGISTRIES, FAILING_STORES } from './support/failing-backends.ts';
import { SEGMENT_BACKENDS, withPort } from './support/segment-backends.ts';
import { dropSet } from './support/segment-sets.ts';
import { SERVICES, describeWithServices, hostPort, uniqueName } from './support/services.ts';
import { TcpProxy } from './support/tcp-proxy.ts';
import { describeWithReplication, startReplicaPair } from './support/replication.ts';
import { tmpfsSkipReason } from './support/tmpfs.ts';

/** Each call's bound; a black-holed call fails with it. */
const TIMEOUT_MS = 1000;

/** The message `promise` rejects with (a fulfilled promise fails the test). */
async function failure(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  assert.fail('the call succeeded with its backend cut off');
}

/**
 * Calls `call` until its failure ends with `want` (at most 10 times, 200 ms apart): the first
 * call after a refusal may still meet the connection the proxy dropped ("connection closed").
 * Returns every message seen.
 */
async function failuresUntil(call: () => Promise<unknown>, want: string): Promise<string[]> {
  const seen: string[] = [];
  for (let i = 0; i < 10; i++) {
    seen.push(await failure(call()));
    if (seen[seen.length - 1]?.endsWith(want)) return seen;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.fail(`never "${want}": ${seen.join(' | ')}`);
}

for (const [kind, name, service] of FAILING_STORES) {
  await describeWithServices(`a ${kind} segment store failing at runtime`, [service], () => {
    /** A store on a table of its own, through a proxy; the caller restores and disposes. */
    const open = async () => {
      const proxy = await TcpProxy.start(hostPort(SERVICES[service].url));
      const fixture = await SEGMENT_BACKENDS[name].open({
        url: withPort(SERVICES[service].url, proxy.port),
        timeoutMs: TIMEOUT_MS,
      });
      await fixture.store.createTag({ tag: 'runtime', step: 10 });
      await fixture.store.allocate('runtime');
      return { proxy, fixture, at: `${kind} segment store at ${proxy.address}` };
    };

    it('refused: "<kind> segment store at <address>, <doing>: connection refused"', async () => {
      const { proxy, fixture, at } = await open();
      try {
        await proxy.refuse();
        const seen = await failuresUntil(
          () => fixture.store.allocate('runtime'),
          'connection refused',
        );
        for (const message of seen)
          assertLine(message, `${at}, allocating a range: `, /^connection (closed|refused)$/);
        assertLine(
          await failure(fixture.store.listTags()),
          `${at}, reading the tag list: `,
          /^connection refused$/,
        );
        assertLine(
          await failure(fixture.store.getTag('runtime')),
          `${at}, reading a tag: `,
          /^connection refused$/,
        );
      } finally {
        await proxy.restore();
        await fixture.dispose();
        await proxy.close();
      }
    });

    it('black-holed: "<kind> segment store at <address>, <operation>: timed out"', async () => {
      const { proxy, fixture, at } = await open();
      try {
        proxy.hang();
        assertLine(
          await failure(fixture.store.allocate('runtime')),
          `${at}, allocating a range: `,
          new RegExp(`^timed out after ${TIMEOUT_MS} ms$`),
        );
        assertLine(
          await failure(fixture.store.listTags()),
          `${at}, reading the tag list: `,
          // mysql2 bounds a new connection itself, and says so with the system's ETIMEDOUT.
          new RegExp(`^timed out( after ${TIMEOUT_MS} ms)?$`),
        );
      } finally {
        await proxy.restore();
        await fixture.dispose();
        await proxy.close();
      }
    });
  });
}

for (const registryCase of FAILING_REGISTRIES) {
  const { kind, service } = registryCase;
  await describeWithServices(`a ${kind} worker registry failing at runtime`, [service], () => {
    /** A registry through a proxy holding a lease; the caller restores and closes. */
    const open = async () => {
      const proxy = await TcpProxy.start(hostPort(SERVICES[service].url));
      // The cluster is the name (Redis), the table (SQL) or the URL's path (ZooKeeper, etcd).
      const cluster = uniqueName('rt').toLowerCase();
      const registry: WorkerRegistry = await openWorkerRegistry(
        registryCase.url(proxy.port, cluster),
        { operationTimeoutMs: TIMEOUT_MS, ttlMs: 3000, name: cluster, table: cluster },
      );
      const lease: WorkerLease = await registry.acquire({
        identity: { host: 'runtime', port: 1 },
        maxWorkers: 1024,
      });
      const done = async () => {
        await proxy.restore();
        await lease.release({ lastTimestamp: Date.now(), reportedAt: Date.now() }).catch(() => {});
        await registry.close();
        await proxy.close();
        await registryCase.clean(cluster);
      };
      return { proxy, registry, lease, done, at: `${kind} worker registry at ${proxy.address}, ` };
    };
    const report = () => ({ lastTimestamp: Date.now(), reportedAt: Date.now() });
    /** What was being done, in words, then one of `causes`. */
    const line = (doing: string, causes: string) => new RegExp(`^${doing}: (${causes})$`);
    const renewing = 'renewing the lease of worker \\d+';
    const acquiring = '(acquiring a worker ID|connecting|creating the table)';

    it('refused: "<kind> worker registry at <address>, <doing>: connection refused"', async () => {
      const { proxy, registry, lease, done, at } = await open();
      try {
        await proxy.refuse();
        // A renewal on the connection the proxy dropped may see it closed first.
        const refused = 'connection (closed|refused)|could not connect';
        assertLine(await failure(lease.renew(report())), at, line(renewing, refused));
        const seen = await failuresUntil(
          () => registry.acquire({ identity: { host: 'other', port: 2 }, maxWorkers: 1024 }),
          'connection refused',
        );
        for (const message of seen) assertLine(message, at, line(acquiring, refused));
      } finally {
        await done();
      }
    });

    it('black-holed: "<kind> worker registry at <address>, <doing>: timed out"', async () => {
      const { proxy, lease, done, at } = await open();
      try {
        proxy.hang();
        const timedOut = 'timed out( after \\d+ ms)?';
        assertLine(await failure(lease.renew(report())), at, line(renewing, timedOut));
      } finally {
        await done();
      }
    });
  });
}

// The database's own refusal, while the store runs: a privilege revoked, a role made read-only.
await describeWithServices(
  'a PostgreSQL store refused by the database at runtime',
  ['postgres'],
  () => {
    it('revoked, then read-only: "<...>, <doing>: <the database\'s words>"', async (t) => {
      const { default: pg } = await import('pg');
      const admin = new pg.Client({ connectionString: SERVICES.postgres.url });
      await admin.connect();
      const role = uniqueName('rt_role').toLowerCase();
      const fixture = await SEGMENT_BACKENDS.postgres.open();
      const { table } = fixture;
      t.after(async () => {
        await fixture.dispose();
        await admin.query(`DROP OWNED BY ${role}`).catch(() => undefined);
        await admin.query(`DROP ROLE IF EXISTS ${role}`);
        await admin.end();
      });
      await fixture.store.createTag({ tag: 'runtime', step: 10 });
      await admin.query(`CREATE ROLE ${role} LOGIN`);
      await admin.query(
        `GRANT SELECT, INSERT, UPDATE, DELETE ON ${table}, idmint_history TO ${role}`,
      );
      const target = new URL(SERVICES.postgres.url);
      const url = `postgres://${role}@${target.host}${target.pathname}`;
      const { openSegmentStore } = await import('../src/backends/open-segment-store.ts');
      const store = await openSegmentStore(url, { table, timeoutMs: TIMEOUT_MS });
      t.after(() => store.close());
      await store.allocate('runtime');
      const at = `postgres segment store at ${target.host}, allocating a range: `;

      await admin.query(`REVOKE UPDATE ON ${table} FROM ${role}`);
      assertLine(
        await failure(store.allocate('runtime')),
        at,
        new RegExp(`^permission denied for table ${table}$`),
      );

      await admin.query(`GRANT UPDATE ON ${table} TO ${role}`);
      await admin.query(`ALTER ROLE ${role} SET default_transaction_read_only = on`);
      // The setting applies to new sessions: the store's are ended (as a restart of the database
      // ends them), and it opens new ones.
      await admin.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1',
        [role],
      );
      const seen = await failuresUntil(
        () => store.allocate('runtime'),
        'cannot execute UPDATE in a read-only transaction',
      );
      // The session the database ended may be met first: closed, or the database's own words.
      const causes = [
        'connection closed',
        'terminating connection due to administrator command',
        'cannot execute UPDATE in a read-only transaction',
      ];
      for (const message of seen) assertLine(message, at, new RegExp(`^(${causes.join('|')})$`));
    });
  },
);

await describeWithServices('a MySQL store refused by the database at runtime', ['mysql'], () => {
  it('revoked: "<...>, allocating a range: <the database\'s words>"', async (t) => {
    const mysql = await import('mysql2/promise');
    const admin = await mysql.createConnection(SERVICES.mysql.url);
    const user = uniqueName('rt').toLowerCase().slice(0, 32);
    const fixture = await SEGMENT_BACKENDS.mariadb.open();
    const { table } = fixture;
    t.after(async () => {
      await fixture.dispose();
      await admin.query(`DROP USER IF EXISTS '${user}'@'%'`);
      await admin.end();
    });
    await fixture.store.createTag({ tag: 'runtime', step: 10 });
    const target = new URL(SERVICES.mysql.url);
    const database = target.pathname.slice(1);
    await admin.query(`CREATE USER '${user}'@'%'`);
    for (const granted of [table, 'idmint_history'])
      await admin.query(
        `GRANT SELECT, INSERT, UPDATE, DELETE ON ${database}.${granted} TO '${user}'@'%'`,
      );
    const { openSegmentStore } = await import('../src/backends/open-segment-store.ts');
    const store = await openSegmentStore(`mysql://${user}@${target.host}/${database}`, {
      table,
      timeoutMs: TIMEOUT_MS,
    });
    t.after(() => store.close());
    await store.allocate('runtime');
    await admin.query(`REVOKE UPDATE ON ${database}.${table} FROM '${user}'@'%'`);
    assertLine(
      await failure(store.allocate('runtime')),
      `mysql segment store at ${target.host}, allocating a range: `,
      new RegExp(`^UPDATE command denied to user '${user}'@'[^']+' for table .*${table}.*$`),
    );
  });
});

// A set of databases: each database's failure is its own line, named by its address.
await describeWithServices(
  'a set of segment databases, one refused at runtime',
  ['postgres', 'redis'],
  () => {
    it("the database's line, in its stats and in the set's failure", async (t) => {
      const { openSegmentStores } = await import('../src/backends/open-segment-store.ts');
      const pgProxy = await TcpProxy.start(hostPort(SERVICES.postgres.url));
      const redisProxy = await TcpProxy.start(hostPort(SERVICES.redis.url));
      const table = uniqueName('rtset').toLowerCase();
      const store = await openSegmentStores(
        [
          withPort(SERVICES.postgres.url, pgProxy.port),
          withPort(SERVICES.redis.url, redisProxy.port),
        ],
        { init: true, table, timeoutMs: TIMEOUT_MS },
      );
      t.after(async () => {
        await pgProxy.restore();
        await redisProxy.restore();
        await store.deleteTag('runtime').catch(() => undefined);
        await store.close();
        await pgProxy.close();
        await redisProxy.close();
        await dropSet([SERVICES.postgres.url, SERVICES.redis.url], table);
      });
      await store.createTag({ tag: 'runtime', step: 10 });
      await store.allocate('runtime');
      await pgProxy.refuse();
      const messages: string[] = [];
      for (let i = 0; i < 3; i++)
        await store.allocate('runtime').catch((error: Error) => messages.push(error.message));
      const at = `postgres segment store at ${pgProxy.address}, `;
      const database = store.stats()[0];
      assertLine(String(database?.lastError), at, /^[a-z' ]+: connection (closed|refused)$/);
      for (const message of messages) {
        assert.ok(!message.includes('\n'), message);
        assert.doesNotMatch(message, NOT_IN_A_LINE, message);
        assert.ok(message.includes(at), message);
      }
    });
  },
);

describe('a SQLite store whose file system fills up at runtime', {
  skip: tmpfsSkipReason() ?? false,
}, () => {
  it('"sqlite segment store at <file>, <doing>: no space left on device"', async (t) => {
    const mount = mkdtempSync(join(tmpdir(), 'idmint-full-'));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mount]);
    const file = join(mount, 'ids.db');
    const { openSegmentStore } = await import('../src/backends/open-segment-store.ts');
    const store = await openSegmentStore(`sqlite:${file}`, { timeoutMs: TIMEOUT_MS }).catch(
      (error: unknown) => {
        execFileSync('umount', [mount]);
        rmSync(mount, { recursive: true, force: true });
        throw error;
      },
    );
    // The file closed first: a file system with an open file cannot be unmounted.
    t.after(async () => {
      await store.close();
      execFileSync('umount', [mount]);
      rmSync(mount, { recursive: true, force: true });
    });
    await store.createTag({ tag: 'runtime', step: 10 });
    await store.allocate('runtime');
    // Fill what is left of the 1 MiB (dd ends with "No space left on device": expected).
    try {
      execFileSync('dd', ['if=/dev/zero', `of=${join(mount, 'filler')}`, 'bs=4k'], {
        stdio: 'ignore',
      });
    } catch {}
    const at = `sqlite segment store at ${file}, `;
    assertLine(
      await failure(store.allocate('runtime')),
      `${at}allocating a range: `,
      /^no space left on device$/,
    );
    assertLine(
      await failure(store.createTag({ tag: 'another', step: 5, description: 'x'.repeat(200) })),
      `${at}creating a tag: `,
      /^no space left on device$/,
    );
  });
});

// The database's own process stopped (killed, as a crash or an OOM kill ends it), not a proxy:
// a server of our own (test/support/replication.ts), so the shared one keeps running.
for (const backend of ['postgres', 'redis'] as const) {
  await describeWithReplication(`a ${backend} store whose server is killed`, backend, () => {
    it('"<backend> segment store at <address>, <doing>: <the system\'s cause>"', async (t) => {
      const pair = await startReplicaPair(backend);
      t.after(() => pair.stop());
      const { openSegmentStore } = await import('../src/backends/open-segment-store.ts');
      const store = await openSegmentStore(pair.url(pair.primary.port), {
        table: uniqueName('killed').toLowerCase(),
        timeoutMs: TIMEOUT_MS,
        init: true,
      });
      t.after(() => store.close());
      await store.createTag({ tag: 'runtime', step: 10 });
      await store.allocate('runtime');
      await pair.killPrimary();
      const seen = await failuresUntil(() => store.allocate('runtime'), 'connection refused');
      const at = `${backend} segment store at ${pair.primary.host}:${pair.primary.port}, `;
      // The connection the crash cut is met first (closed, or reset), then the port refuses.
      for (const message of seen)
        assertLine(message, `${at}allocating a range: `, /^connection (closed|reset|refused)$/);
    });
  });
}
