// `idmint serve` starts and stops cleanly whatever the environment does: a backend that accepts
// connections but never answers, a signal while it starts, a port in use, a host that does not
// resolve, an address not of this machine, a SQLite file that cannot be opened. Each ends with
// one line naming the setting (exit 1: the environment is at fault), within its timeouts.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { BlackHole } from './support/black-hole.ts';
import { runIdmint } from './support/cli.ts';
import { spawnServe } from './support/serve-process.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-cli-startup-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** An environment without any IDMINT_ configuration the test runner itself may carry. */
function clean(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return env;
}

/** A fresh working directory, so the default ./data of one case never meets another's. */
function workdir(): string {
  return mkdtempSync(join(root, 'w-'));
}

/**
 * Generous bounds for a loaded 2-core machine. What they tell apart is bounded (seconds) from
 * hanging (before the fix: forever, or the configured 10 minutes).
 */
const TIMEOUT_MS = 1000;
const BOUND_MS = 25_000;
const SIGNAL_BOUND_MS = 10_000;

/** Runs `idmint serve` to its end and returns how it ended, and how long it took. */
async function serveUntilExit(
  args: string[],
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string; ms: number }> {
  const started = Date.now();
  const serve = spawnServe(args, { env: clean(), cwd: workdir() });
  const timer = setTimeout(() => serve.child.kill('SIGKILL'), BOUND_MS);
  const { code, signal } = await serve.exited;
  clearTimeout(timer);
  return { code, signal, stderr: serve.stderr(), ms: Date.now() - started };
}

describe('idmint serve against a backend that accepts connections but never answers', () => {
  const cases: [string, (hole: string) => string[], RegExp][] = [
    [
      'Redis store',
      (hole) => ['--no-snowflake-enabled', '--segment-store', `redis://${hole}/0`],
      new RegExp(
        '^idmint serve: segment store \\(IDMINT_SEGMENT_STORE\\): redis at ' +
          '127\\.0\\.0\\.1:\\d+: timed out after 1000 ms\\n$',
      ),
    ],
    [
      'PostgreSQL store',
      (hole) => ['--no-snowflake-enabled', '--segment-store', `postgres://idmint@${hole}/ids`],
      new RegExp(
        '^idmint serve: segment store \\(IDMINT_SEGMENT_STORE\\): postgres at ' +
          '127\\.0\\.0\\.1:\\d+: timed out( after 1000 ms)?\\n$',
      ),
    ],
    [
      'MySQL store',
      (hole) => ['--no-snowflake-enabled', '--segment-store', `mysql://idmint@${hole}/ids`],
      new RegExp(
        '^idmint serve: segment store \\(IDMINT_SEGMENT_STORE\\): mysql at ' +
          '127\\.0\\.0\\.1:\\d+: timed out( after 1000 ms)?\\n$',
      ),
    ],
    [
      'Redis registry',
      (hole) => ['--no-segment-enabled', '--worker-registry', `redis://${hole}/0`],
      new RegExp(
        '^idmint serve: worker registry \\(IDMINT_WORKER_REGISTRY\\): redis at ' +
          '127\\.0\\.0\\.1:\\d+: timed out( after 1000 ms)?\\n$',
      ),
    ],
    [
      'etcd registry',
      (hole) => ['--no-segment-enabled', '--worker-registry', `etcd://${hole}/hang`],
      new RegExp(
        '^idmint serve: worker registry \\(IDMINT_WORKER_REGISTRY\\): etcd at ' +
          '127\\.0\\.0\\.1:\\d+: timed out( after 1000 ms)?\\n$',
      ),
    ],
    [
      'ZooKeeper registry',
      (hole) => ['--no-segment-enabled', '--worker-registry', `zookeeper://${hole}/hang`],
      new RegExp(
        '^idmint serve: worker registry \\(IDMINT_WORKER_REGISTRY\\): zookeeper at ' +
          '127\\.0\\.0\\.1:\\d+: timed out( after 1000 ms)?\\n$',
      ),
    ],
  ];
  for (const [name, args, message] of cases) {
    it(`${name}: fails within its timeouts, exit 1, one line naming the setting`, async () => {
      const hole = await BlackHole.start();
      try {
        const result = await serveUntilExit([
          ...args(hole.address),
          '--segment-timeout-ms',
          String(TIMEOUT_MS),
          '--registry-timeout-ms',
          String(TIMEOUT_MS),
        ]);
        assert.ok(hole.accepted > 0, 'idmint connected to the black hole');
        assert.equal(
          result.code,
          1,
          `${result.signal ?? ''} after ${result.ms} ms: ${result.stderr}`,
        );
        assert.match(result.stderr, message);
      } finally {
        await hole.close();
      }
    });
  }

  for (const [signal, what, args] of [
    [
      'SIGTERM',
      'a Redis store',
      (hole: string) => ['--no-snowflake-enabled', '--segment-store', `redis://${hole}/0`],
    ],
    [
      'SIGINT',
      'a ZooKeeper registry (Ctrl-C: the whole process group)',
      (hole: string) => ['--no-segment-enabled', '--worker-registry', `zookeeper://${hole}/hang`],
    ],
  ] as const) {
    it(`${signal} while waiting on ${what}: stops within seconds, timeouts 10 min`, async () => {
      const hole = await BlackHole.start();
      const serve = spawnServe(
        [
          ...args(hole.address),
          '--segment-timeout-ms',
          '600000',
          '--registry-timeout-ms',
          '600000',
        ],
        { env: clean(), cwd: workdir(), group: signal === 'SIGINT' },
      );
      const guard = setTimeout(() => serve.child.kill('SIGKILL'), BOUND_MS + SIGNAL_BOUND_MS);
      try {
        // Start-up is under way: idmint is connected and waiting for an answer that never comes.
        while (hole.accepted === 0) {
          assert.equal(serve.child.exitCode, null, serve.stderr());
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        const sent = Date.now();
        const ended = await serve.kill(signal);
        const ms = Date.now() - sent;
        assert.ok(ms < SIGNAL_BOUND_MS, `took ${ms} ms to stop`);
        // It ends by the signal, as an interrupted program should (a shell reports 128 + its
        // number).
        assert.deepEqual(ended, { code: null, signal }, serve.stderr());
        assert.equal(
          serve.stderr(),
          `idmint serve: ${signal} during start-up: stopped before serving\n`,
        );
        assert.ok(!serve.logs.some((line) => line['msg'] === 'idmint listening'));
      } finally {
        clearTimeout(guard);
        await hole.close();
      }
    });
  }

  it('idmint tags list against such a store ends with one line within its timeout', async () => {
    const hole = await BlackHole.start();
    try {
      const started = Date.now();
      const result = await runIdmint(
        [
          'tags',
          'list',
          '--store',
          `redis://${hole.address}/0`,
          '--segment-timeout-ms',
          String(TIMEOUT_MS),
        ],
        { env: clean(), cwd: workdir(), timeoutMs: BOUND_MS },
      );
      assert.equal(result.code, 1, `after ${Date.now() - started} ms: ${result.stderr}`);
      assert.equal(
        result.stderr,
        `idmint tags: segment store (--store): redis at ${hole.address}: ` +
          `timed out after ${TIMEOUT_MS} ms\n`,
      );
      assert.equal(result.stdout, '');
    } finally {
      await hole.close();
    }
  });
});

describe('idmint serve, environment at fault: exit 1 and one line naming the setting', () => {
  it('port in use', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const address = taken.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      // --port after spawnServe's own `--port 0`: the last one wins.
      const result = await serveUntilExit(['--port', String(port), '--no-segment-enabled']);
      assert.equal(result.code, 1, result.stderr);
      assert.equal(
        result.stderr,
        `idmint serve: port ${port} (IDMINT_PORT) is in use by another process\n`,
      );
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it('an address that is not of this machine', async () => {
    // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): documentation only, never assigned to a machine.
    const result = await serveUntilExit(['--host', '192.0.2.1', '--no-segment-enabled']);
    assert.equal(result.code, 1, result.stderr);
    assert.equal(
      result.stderr,
      'idmint serve: host 192.0.2.1 (IDMINT_HOST) is not an address of this machine\n',
    );
  });

  it('a listen host, a store host and a registry host that do not resolve', async () => {
    // .invalid never resolves (RFC 6761).
    const cases: [string[], string][] = [
      [
        ['--host', 'nosuch.invalid', '--no-segment-enabled'],
        'idmint serve: host "nosuch.invalid" (IDMINT_HOST) does not resolve\n',
      ],
      [
        ['--no-snowflake-enabled', '--segment-store', 'postgres://idmint@nosuch.invalid:5432/ids'],
        'idmint serve: host "nosuch.invalid" in the segment store URL (IDMINT_SEGMENT_STORE) ' +
          'does not resolve\n',
      ],
      [
        [
          '--no-segment-enabled',
          '--worker-registry',
          'zookeeper://nosuch.invalid:2181/x',
          '--registry-timeout-ms',
          '1000',
        ],
        'idmint serve: host "nosuch.invalid" in the worker registry URL (IDMINT_WORKER_REGISTRY) ' +
          'does not resolve\n',
      ],
    ];
    for (const [args, line] of cases) {
      const result = await serveUntilExit(args);
      assert.equal(result.code, 1, `${args.join(' ')}: ${result.stderr}`);
      assert.equal(result.stderr, line);
    }
  });

  it('a SQLite file that cannot be opened', async () => {
    const dir = workdir();
    writeFileSync(join(dir, 'plain-file'), '');
    mkdirSync(join(dir, 'a-directory.db'));
    const cases: [string, string][] = [
      [join(dir, 'plain-file', 'ids.db'), `${join(dir, 'plain-file')} is not a directory`],
      [join(dir, 'a-directory.db'), 'it is a directory'],
    ];
    // Root may write anywhere, so a permission test means something only for another user.
    if (process.getuid?.() !== 0) {
      mkdirSync(join(dir, 'locked'), { mode: 0o500 });
      cases.push([join(dir, 'locked', 'ids.db'), 'permission denied']);
    }
    for (const [path, reason] of cases) {
      const result = await serveUntilExit([
        '--no-snowflake-enabled',
        '--segment-store',
        `sqlite:${path}`,
      ]);
      assert.equal(result.code, 1, result.stderr);
      assert.ok(
        result.stderr.startsWith(
          `idmint serve: cannot open SQLite file ${path} (IDMINT_SEGMENT_STORE): ${reason}`,
        ),
        result.stderr,
      );
      assert.equal(result.stderr.split('\n').length, 2, result.stderr);
    }
  });
});
