// Issue 23.4: every start-up failure of a backend ends `idmint serve` (exit 1) with one line
// naming the backend, its address and the cause as the operating system or the database gave it:
// no driver wording ("the circuit breaker is open"), no internal method ("listTagChanges").
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, after, describe, it } from 'node:test';
import { defineConfig } from '../src/config/load.ts';
import { isIdMintError } from '../src/core/errors.ts';
import { openBackends } from '../src/service/backends.ts';
import { BlackHole } from './support/black-hole.ts';
import { NOT_IN_A_LINE } from './support/failure-lines.ts';
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

/** `text` as a pattern matching itself. */
const literally = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

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

// Issue 23.4, bounded: a start that cannot reach its store or registry fails within the timeout
// configured for it (segment.timeoutMs, snowflake.registryTimeoutMs), not once per step. A start
// asks its backend several times in a row (a set's check, then the tag list; the peers' clocks,
// then a worker ID; a SQL registry's table, then its rows), and each call used to wait out the
// whole timeout, with a driver's retry or a slow close on top: with 2000 ms, a black-holed etcd
// failed a start after 4 s, Redis after 4 s (6 s for `idmint serve`), a set after 6 s and a SQL
// registry after 8 s. Measured in process (openBackends, as `idmint serve` opens them) and as
// a process, against a refusing port and a black hole.
describe('an unreachable backend fails a start within its timeout, in one line', () => {
  /** The timeouts in process. */
  const TIMEOUT_MS = 2000;
  /**
   * In process: the timer firing late and the failure travelling through the start's steps
   * (500 ms at most measured on a loaded machine; ZooKeeper's refusal is told just after the
   * timeout, when the address has been looked at).
   */
  const IN_PROCESS_SLACK_MS = 1000;
  /**
   * The timeouts of `idmint serve` (the registry's default): long beside the slack below, so a
   * step that waits a timeout again (a Redis store's QUIT did) cannot hide in the slack.
   */
  const SERVE_TIMEOUT_MS = 5000;
  /**
   * `idmint serve`, from its log line saying it opens its backends (loading idmint before it takes
   * 4 s alone on a loaded 2-core machine) to its exit: loading the backend's driver (etcd3 and
   * gRPC, after the line), closing what was opened, probing the address to name the cause,
   * writing the line and exiting. Measured 100 to 600 ms at a load of 7 to 11, 2.4 s once at 13.
   */
  const PROCESS_SLACK_MS = 3000;
  const OPENING = 'opening the segment store and the worker registry';

  /** Where each role's URL is set, and the code its failure has in process. */
  const ROLES = {
    'segment store': {
      section: 'segment',
      key: 'store',
      variable: 'IDMINT_SEGMENT_STORE',
      code: 'STORE_UNAVAILABLE',
    },
    'worker registry': {
      section: 'snowflake',
      key: 'registry',
      variable: 'IDMINT_WORKER_REGISTRY',
      code: 'REGISTRY_UNAVAILABLE',
    },
  } as const;
  type Role = keyof typeof ROLES;

  /** One backend, started alone (the other mode off): its URLs, and where they are set. */
  interface StartCase {
    readonly role: Role;
    /** The backend at each address (two for a set of databases). */
    readonly kinds: readonly string[];
    /** The setting: segment.stores (IDMINT_SEGMENT_STORES) for a set, else the role's. */
    readonly key: string;
    readonly variable: string;
    /** The URL of the backend at each port. */
    urls(ports: readonly number[]): string[];
  }
  const alone = (role: Role, kind: string, url: (port: number) => string): StartCase => ({
    role,
    kinds: [kind],
    key: ROLES[role].key,
    variable: ROLES[role].variable,
    urls: ([port = 0]) => [url(port)],
  });
  const postgres = (port: number) => `postgres://u@127.0.0.1:${port}/x`;
  const mysql = (port: number) => `mysql://u@127.0.0.1:${port}/x`;
  const redis = (port: number) => `redis://127.0.0.1:${port}/0`;
  const cases: StartCase[] = [
    alone('segment store', 'postgres', postgres),
    alone('segment store', 'mysql', mysql),
    alone('segment store', 'redis', redis),
    {
      role: 'segment store',
      kinds: ['postgres', 'redis'],
      key: 'stores',
      variable: 'IDMINT_SEGMENT_STORES',
      urls: ([first = 0, second = 0]) => [postgres(first), redis(second)],
    },
    alone('worker registry', 'etcd', (port) => `etcd://127.0.0.1:${port}/x`),
    alone('worker registry', 'zookeeper', (port) => `zookeeper://127.0.0.1:${port}/x`),
    alone('worker registry', 'redis', redis),
    alone('worker registry', 'postgres', postgres),
    alone('worker registry', 'mysql', mysql),
  ];
  const nameOf = (backend: StartCase) =>
    backend.kinds.length === 1
      ? `${backend.kinds[0]} ${backend.role}`
      : `a set of ${backend.kinds.join(' and ')} databases`;
  /** The mode the backend is not for, turned off. */
  const otherSection = (backend: StartCase) =>
    ROLES[backend.role].section === 'segment' ? 'snowflake' : 'segment';
  /** The start's configuration, as a config file says it, with both timeouts at TIMEOUT_MS. */
  const backendConfig = (backend: StartCase, ports: readonly number[]) => {
    const urls = backend.urls(ports);
    // The URL, or a set's list.
    const value = backend.kinds.length === 1 ? urls[0] : urls;
    const part = (section: string) =>
      section === ROLES[backend.role].section ? { [backend.key]: value } : { enabled: false };
    return {
      segment: { timeoutMs: TIMEOUT_MS, ...part('segment') },
      snowflake: { registryTimeoutMs: TIMEOUT_MS, ...part('snowflake') },
    };
  };
  /** `idmint serve`'s flags for the same start (a flag is its variable's name, lower-case). */
  const flags = (backend: StartCase, ports: readonly number[]) => [
    `--no-${otherSection(backend)}-enabled`,
    `--${backend.variable.slice('IDMINT_'.length).toLowerCase().replaceAll('_', '-')}`,
    backend.urls(ports).join(','),
    ...['--segment-timeout-ms', String(SERVE_TIMEOUT_MS)],
    ...['--registry-timeout-ms', String(SERVE_TIMEOUT_MS)],
  ];

  /** Where a backend is reached, and how a start that cannot reach it says why. */
  interface Target {
    readonly what: string;
    /** The cause in process (a driver's own timer may say "timed out" without its bound). */
    cause(timeoutMs: number): string;
    /** The cause on `idmint serve`'s line. */
    told(timeoutMs: number): string;
    open(): Promise<{ port: number; close(): Promise<void> }>;
  }
  const targets: Target[] = [
    {
      what: 'a refused port',
      cause: () => 'connection refused',
      told: () => 'connection refused',
      open: async () => ({ port: await closedPort(), close: async () => undefined }),
    },
    {
      what: 'a black hole',
      cause: (timeoutMs) => `timed out(?: after ${timeoutMs} ms)?`,
      told: (timeoutMs) => `timed out after ${timeoutMs} ms`,
      open: async () => {
        const hole = await BlackHole.start();
        return { port: hole.port, close: () => hole.close() };
      },
    },
  ];

  /** The ports of `backend` on fresh `target`s, closed by `t.after`. */
  async function reach(t: TestContext, backend: StartCase, target: Target): Promise<number[]> {
    const ports: number[] = [];
    for (let i = 0; i < backend.kinds.length; i++) {
      const opened = await target.open();
      t.after(() => opened.close());
      ports.push(opened.port);
    }
    return ports;
  }

  /** `<backend> <role> at 127.0.0.1:<port>, <doing>: <cause>` for each address, as a pattern. */
  const failures = (backend: StartCase, ports: readonly number[], cause: string) =>
    backend.kinds.map(
      (kind, i) => `${kind} ${backend.role} at 127.0.0.1:${ports[i]}, [A-Za-z' ]+: ${cause}`,
    );

  for (const backend of cases) {
    for (const target of targets) {
      it(`${nameOf(backend)}, ${target.what}: the start fails within the timeout`, async (t) => {
        const ports = await reach(t, backend, target);
        const config = defineConfig(backendConfig(backend, ports));
        const started = performance.now();
        const error = await openBackends(config).then(
          async (opened) => {
            await opened.close();
            assert.fail('the start succeeded with its backend unreachable');
          },
          (reason: unknown) => reason,
        );
        const tookMs = performance.now() - started;
        assert.ok(isIdMintError(error, ROLES[backend.role].code), String(error));
        assert.ok(!error.message.includes('\n'), error.message);
        assert.doesNotMatch(error.message, NOT_IN_A_LINE, error.message);
        for (const failure of failures(backend, ports, target.cause(TIMEOUT_MS)))
          assert.match(error.message, new RegExp(`(^|: |; )${failure}(;|$)`), error.message);
        assert.ok(
          tookMs < TIMEOUT_MS + IN_PROCESS_SLACK_MS,
          `failed after ${Math.round(tookMs)} ms, over ${TIMEOUT_MS} + ${IN_PROCESS_SLACK_MS} ms`,
        );
      });

      it(`${nameOf(backend)}, ${target.what}: "idmint serve" exits 1 within it`, async (t) => {
        const ports = await reach(t, backend, target);
        const serve = spawnServe([...flags(backend, ports), '--log-level', 'debug'], {
          env: clean(),
          cwd: mkdtempSync(join(root, 'w-')),
        });
        const killer = setTimeout(() => serve.child.kill('SIGKILL'), 60_000);
        t.after(() => clearTimeout(killer));
        const opening = serve
          .logLine((line) => line['msg'] === OPENING)
          .then(
            () => performance.now(),
            () => undefined,
          );
        const { code } = await serve.exited;
        const exitedAt = performance.now();
        const openingAt = await opening;
        const stderr = serve.stderr();
        assert.equal(code, 1, stderr);
        assert.ok(openingAt !== undefined, `no "${OPENING}" line; stderr: ${stderr}`);
        // One database: `<backend> at <address>: <cause>`; a set: its own line, each database's
        // failure in the database's words.
        const told =
          backend.kinds.length === 1
            ? `${backend.kinds[0]} at 127.0.0.1:${ports[0]}: ${target.told(SERVE_TIMEOUT_MS)}`
            : `.*${failures(backend, ports, target.cause(SERVE_TIMEOUT_MS)).join('; .*')}`;
        assert.match(
          stderr,
          new RegExp(
            `^idmint serve: ${literally(`${backend.role} (${backend.variable})`)}: ${told}\n$`,
          ),
        );
        assert.doesNotMatch(stderr, NOT_IN_A_LINE, stderr);
        const tookMs = exitedAt - openingAt;
        const boundMs = SERVE_TIMEOUT_MS + PROCESS_SLACK_MS;
        assert.ok(tookMs < boundMs, `exit ${Math.round(tookMs)} ms after opening, over ${boundMs}`);
      });
    }
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
