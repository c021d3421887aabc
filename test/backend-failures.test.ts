// Issue 23.4: every start-up failure of a backend ends `idmint serve` (exit 1) with one line
// naming the backend, its address and the cause as the operating system or the database gave it:
// no driver wording ("the circuit breaker is open"), no internal method ("listTagChanges").
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { BlackHole } from './support/black-hole.ts';
import { spawnServe } from './support/serve-process.ts';
import { tmpfsSkipReason } from './support/tmpfs.ts';
import { SERVICES, describeWithServices, uniqueName } from './support/services.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-failures-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** An environment without any IDMINT_ configuration the test runner itself may carry. */
function clean(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return env;
}

/** A loopback port nothing listens on: taken from the OS, then given back. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === 'object' && address !== null ? address.port : 0;
}

/** Runs `idmint serve` to its end (killed after 60 s, which would be a hang). */
async function serveUntilExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const serve = spawnServe(args, { env: clean(), cwd: mkdtempSync(join(root, 'w-')) });
  const timer = setTimeout(() => serve.child.kill('SIGKILL'), 60_000);
  const { code } = await serve.exited;
  clearTimeout(timer);
  return { code, stderr: serve.stderr() };
}

const SHORT = ['--segment-timeout-ms', '2000', '--registry-timeout-ms', '2000'];

describe('a backend at a closed port: refused, in one line', () => {
  const cases: [string, (port: number) => string[], (port: number) => string][] = [
    [
      'PostgreSQL store',
      (port) => ['--no-snowflake-enabled', '--segment-store', `postgres://u@127.0.0.1:${port}/x`],
      (port) => `segment store (IDMINT_SEGMENT_STORE): postgres at 127.0.0.1:${port}`,
    ],
    [
      'MySQL store',
      (port) => ['--no-snowflake-enabled', '--segment-store', `mysql://u@127.0.0.1:${port}/x`],
      (port) => `segment store (IDMINT_SEGMENT_STORE): mysql at 127.0.0.1:${port}`,
    ],
    [
      'Redis store',
      (port) => ['--no-snowflake-enabled', '--segment-store', `redis://127.0.0.1:${port}/0`],
      (port) => `segment store (IDMINT_SEGMENT_STORE): redis at 127.0.0.1:${port}`,
    ],
    [
      'etcd registry',
      (port) => ['--no-segment-enabled', '--worker-registry', `etcd://127.0.0.1:${port}/x`],
      (port) => `worker registry (IDMINT_WORKER_REGISTRY): etcd at 127.0.0.1:${port}`,
    ],
    [
      'ZooKeeper registry',
      (port) => ['--no-segment-enabled', '--worker-registry', `zookeeper://127.0.0.1:${port}/x`],
      (port) => `worker registry (IDMINT_WORKER_REGISTRY): zookeeper at 127.0.0.1:${port}`,
    ],
    [
      'Redis registry',
      (port) => ['--no-segment-enabled', '--worker-registry', `redis://127.0.0.1:${port}/0`],
      (port) => `worker registry (IDMINT_WORKER_REGISTRY): redis at 127.0.0.1:${port}`,
    ],
  ];
  for (const [name, args, prefix] of cases) {
    it(`${name}: exit 1, "<setting>: <backend> at <address>: connection refused"`, async () => {
      const port = await closedPort();
      const result = await serveUntilExit([...args(port), ...SHORT]);
      assert.equal(result.code, 1, result.stderr);
      assert.equal(result.stderr, `idmint serve: ${prefix(port)}: connection refused\n`);
    });
  }
});

describe('a SQLite file on a read-only file system', { skip: tmpfsSkipReason() ?? false }, () => {
  it('exit 1, one line naming the file and "read-only file system"', async () => {
    const mount = join(root, 'read-only');
    mkdirSync(mount);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', mount], {
      stdio: 'ignore',
    });
    try {
      for (const path of [join(mount, 'ids.db'), join(mount, 'data', 'ids.db')]) {
        const result = await serveUntilExit([
          '--no-snowflake-enabled',
          '--segment-store',
          `sqlite:${path}`,
        ]);
        assert.equal(result.code, 1, result.stderr);
        assert.equal(
          result.stderr,
          `idmint serve: cannot open SQLite file ${path} (IDMINT_SEGMENT_STORE): ` +
            'read-only file system\n',
        );
      }
    } finally {
      execFileSync('umount', [mount]);
    }
  });
});

// An unreachable ZooKeeper fails a start within snowflake.registryTimeoutMs (the bound on
// connecting), not twice it: the start asks the registry twice in a row (the peers' clocks, then
// a worker ID), and each used to wait out its own connect timeout (10.5 s for 5 s).
describe('an unreachable ZooKeeper fails a start within its connect timeout', () => {
  const TIMEOUT_MS = 2000;
  /** Loading idmint and starting the process, beyond the timeout (a loaded machine is slow). */
  const PROCESS_SLACK_MS = 1800;
  const targets: [string, string, () => Promise<{ port: number; close(): Promise<void> }>][] = [
    [
      'a refused port',
      'connection refused',
      async () => ({ port: await closedPort(), close: async () => undefined }),
    ],
    [
      'a black hole',
      `timed out after ${TIMEOUT_MS} ms`,
      async () => {
        const hole = await BlackHole.start();
        return { port: hole.port, close: () => hole.close() };
      },
    ],
  ];
  for (const [what, cause, start] of targets) {
    it(`${what}: "idmint serve" exits 1 within the timeout, in one line`, async () => {
      const target = await start();
      try {
        const started = performance.now();
        const result = await serveUntilExit([
          '--no-segment-enabled',
          '--worker-registry',
          `zookeeper://127.0.0.1:${target.port}/x`,
          '--registry-timeout-ms',
          String(TIMEOUT_MS),
        ]);
        const tookMs = performance.now() - started;
        assert.equal(result.code, 1, result.stderr);
        assert.equal(
          result.stderr,
          'idmint serve: worker registry (IDMINT_WORKER_REGISTRY): ' +
            `zookeeper at 127.0.0.1:${target.port}: ${cause}\n`,
        );
        assert.ok(
          tookMs < TIMEOUT_MS + PROCESS_SLACK_MS,
          `exit after ${Math.round(tookMs)} ms, over ${TIMEOUT_MS} + ${PROCESS_SLACK_MS} ms`,
        );
      } finally {
        await target.close();
      }
    });

    it(`${what}: the registry's start fails within the timeout plus 1 s`, async () => {
      const target = await start();
      const { openWorkerRegistry } = await import('../src/backends/open-worker-registry.ts');
      const { SnowflakeWorker } = await import('../src/service/snowflake-worker.ts');
      const { MonotonicClock } = await import('../src/clocks/monotonic-clock.ts');
      const { isIdMintError } = await import('../src/core/errors.ts');
      const registry = await openWorkerRegistry(`zookeeper://127.0.0.1:${target.port}/x`, {
        operationTimeoutMs: TIMEOUT_MS,
      });
      try {
        const started = performance.now();
        await assert.rejects(
          SnowflakeWorker.start({
            registry,
            clock: new MonotonicClock(),
            identity: { host: 'timeout-test', port: 1 },
          }),
          (error) => {
            assert.ok(isIdMintError(error, 'REGISTRY_UNAVAILABLE'), String(error));
            assert.equal(
              error.message,
              `zookeeper worker registry at 127.0.0.1:${target.port}, connecting: ${cause}`,
            );
            return true;
          },
        );
        const tookMs = performance.now() - started;
        assert.ok(
          tookMs < TIMEOUT_MS + 1000,
          `failed after ${Math.round(tookMs)} ms, over ${TIMEOUT_MS} + 1000 ms`,
        );
      } finally {
        await registry.close();
        await target.close();
      }
    });
  }
});

await describeWithServices(
  'a PostgreSQL role without permission on the table',
  ['postgres'],
  () => {
    it("exit 1, one line naming the address and the database's own refusal", async (t) => {
      const { default: pg } = await import('pg');
      const admin = new pg.Client({ connectionString: SERVICES.postgres.url });
      await admin.connect();
      const role = uniqueName('noperm')
        .toLowerCase()
        .replace(/[^a-z0-9_]/g, '_');
      const table = `${role}_alloc`;
      t.after(async () => {
        await admin.query(`DROP TABLE IF EXISTS ${table}`);
        await admin.query(`DROP ROLE IF EXISTS ${role}`);
        await admin.end();
      });
      await admin.query(`CREATE ROLE ${role} LOGIN`);
      // Leaf's table, whole: the role is refused for want of a privilege, not of a column.
      await admin.query(
        `CREATE TABLE ${table} (biz_tag varchar(128) PRIMARY KEY, max_id bigint NOT NULL DEFAULT 1,
       step int NOT NULL, description varchar(256), update_time timestamp NOT NULL DEFAULT now())`,
      );
      const target = new URL(SERVICES.postgres.url);
      const url = `postgres://${role}@${target.host}${target.pathname}`;
      const result = await serveUntilExit([
        '--no-snowflake-enabled',
        '--segment-store',
        url,
        '--segment-table',
        table,
        ...SHORT,
      ]);
      assert.equal(result.code, 1, result.stderr);
      assert.equal(
        result.stderr,
        'idmint serve: segment store (IDMINT_SEGMENT_STORE): ' +
          `postgres at ${target.host}: permission denied for table ${table}\n`,
      );
    });
  },
);
