import assert from 'node:assert/strict';
import { mkdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isIdMintError } from '../../src/core/errors.ts';
import { StaticWorkerRegistry } from '../../src/registries/static/static-worker-registry.ts';
import { TEST_LOCK_DIR } from '../support/lock-dir.ts';
import { stateFileRecord } from '../support/registry-admin.ts';
import { listeningUrl, spawnServe, startServe } from '../support/serve-process.ts';
import { assertNoDuplicateIds, drawSnowflakes } from '../support/snowflake-draw.ts';
import { runWorkerProcessScenarios } from '../support/worker-process-scenarios.ts';
import { WorkerProcess, assertNoDuplicates } from '../support/worker-processes.ts';
import { runInterleavingSuite, type RegistryHarness } from '../support/worker-registry-suite.ts';
import { delay, tempDir } from '../support/workers.ts';

const dir = await tempDir('static-registry');
// The host-wide locks of these registries: the test process's own directory (support/lock-dir.ts).
const lockDir = TEST_LOCK_DIR;
const identity = { host: '10.0.0.1', port: 8080 };
const maxWorkers = 1024;

describe('static worker registry', () => {
  it('hands out the configured ID and keeps reports across restarts', async () => {
    const stateDir = join(dir.path, 'a');
    const registry = new StaticWorkerRegistry({ workerId: 7, stateDir, lockDir });
    const lease = await registry.acquire({ identity, maxWorkers: 1024 });
    assert.deepEqual(
      [lease.workerId, lease.lastTimestamp, lease.reportedAt, lease.ttlMs],
      [7, -1, -1, 3000],
    );
    assert.equal(await lease.renew({ lastTimestamp: 5000, reportedAt: 2000 }), 3000);
    assert.deepEqual(JSON.parse(await readFile(registry.stateFile, 'utf8')), {
      workerId: 7,
      lastTimestamp: 5000,
      reportedAt: 2000,
    });
    await lease.release({ lastTimestamp: 2500, reportedAt: 2600 });
    const again = new StaticWorkerRegistry({ workerId: 7, stateDir, lockDir });
    const restarted = await again.acquire({ identity, maxWorkers: 1024 });
    assert.deepEqual([restarted.lastTimestamp, restarted.reportedAt], [2500, 2600]);
    assert.deepEqual(await registry.peers(), []);
  });

  it('a renewal waits one turn of a busy event loop, not one per file step', async () => {
    const registry = new StaticWorkerRegistry({
      workerId: 3,
      stateDir: join(dir.path, 'busy'),
      lockDir,
    });
    const lease = await registry.acquire({ identity, maxWorkers: 1024 });
    // Every turn of the loop holds it for 40 ms, as a server handling a thousand connections does.
    let turns = 0;
    let busy = true;
    const hold = () => {
      turns++;
      const until = performance.now() + 40;
      while (performance.now() < until) {
        // the requests of this turn
      }
      if (busy) setImmediate(hold);
    };
    setImmediate(hold);
    try {
      await lease.renew({ lastTimestamp: 9000, reportedAt: 8000 });
    } finally {
      busy = false;
    }
    // The flush is the one step off the loop: it lands in the turn after it started, or the next
    // if the disk is slower than a turn. Six awaited steps took six turns or more.
    assert.ok(turns <= 3, `the renewal took ${turns} turns of the busy loop`);
    assert.deepEqual(JSON.parse(await readFile(registry.stateFile, 'utf8')), {
      workerId: 3,
      lastTimestamp: 9000,
      reportedAt: 8000,
    });
    await lease.release({ lastTimestamp: 9000, reportedAt: 8000 });
  });

  it('refuses to start over from nothing when the state file is damaged', async () => {
    const stateDir = join(dir.path, 'b');
    const registry = new StaticWorkerRegistry({ workerId: 1, stateDir, lockDir });
    await mkdir(stateDir, { recursive: true });
    // Torn by hand: the registry writes atomically.
    await writeFile(registry.stateFile, '{"workerId":1,"lastTim');
    await assert.rejects(registry.acquire({ identity, maxWorkers: 2 }), (error) => {
      assert.ok(isIdMintError(error, 'REGISTRY_UNAVAILABLE'));
      assert.ok(error.message.includes(registry.stateFile));
      return true;
    });
    await writeFile(registry.stateFile, '{"workerId":2,"lastTimestamp":1,"reportedAt":1}');
    await assert.rejects(
      registry.acquire({ identity, maxWorkers: 4 }),
      (error) => isIdMintError(error, 'REGISTRY_UNAVAILABLE'),
      'a file of another worker ID',
    );
  });

  it('rejects an ID the layout cannot hold, and honours what switch-worker asks for', async () => {
    const registry = new StaticWorkerRegistry({
      workerId: 64,
      stateDir: join(dir.path, 'c'),
      lockDir,
    });
    await assert.rejects(
      registry.acquire({ identity, maxWorkers: 64 }),
      (error) => isIdMintError(error, 'CONFIG_INVALID') && /0 to 63/.test(error.message),
    );
    await assert.rejects(registry.acquire({ identity, maxWorkers: 1024, exclude: [64] }), (error) =>
      isIdMintError(error, 'WORKER_IDS_EXHAUSTED'),
    );
    const lease = await registry.acquire({ identity, maxWorkers: 1024 });
    // While it is held, switch-worker's request to leave it is refused for what it is.
    await assert.rejects(
      registry.acquire({ identity, maxWorkers: 1024, exclude: [64] }),
      (error) =>
        isIdMintError(error, 'WORKER_IDS_EXHAUSTED') &&
        /worker IDs 64 were excluded/.test(error.message),
    );
    await lease.release({ lastTimestamp: 10_000, reportedAt: 10_000 });
    await assert.rejects(
      registry.acquire({ identity, maxWorkers: 1024, lastTimestampBelow: 9000 }),
      (error) => isIdMintError(error, 'WORKER_IDS_EXHAUSTED'),
    );
  });
});

const harness: RegistryHarness = {
  backend: 'static',
  services: [],
  ttlMs: 3000,
  url: () => 'static:0',
  options: (name) => ({ stateDir: join(dir.path, name), lockDir: join(dir.path, name, 'locks') }),
  cleanup: async () => {},
  record: (name) => stateFileRecord(join(dir.path, name, 'idmint-worker-0.json')),
};

describe('static worker registry: one holder per state file', () => {
  const other = { host: '10.0.0.2', port: 9090 };

  it('refuses a second holder of a state file in one process, naming both', async () => {
    const stateDir = join(dir.path, 'lock-1');
    const one = new StaticWorkerRegistry({ workerId: 3, stateDir, lockDir });
    const two = new StaticWorkerRegistry({ workerId: 3, stateDir, lockDir });
    const lease = await one.acquire({ identity, maxWorkers: 1024 });
    await assert.rejects(two.acquire({ identity: other, maxWorkers: 1024 }), (error) => {
      assert.ok(isIdMintError(error, 'WORKER_IDS_EXHAUSTED'), String(error));
      assert.ok(error.message.includes(one.stateFile), error.message);
      assert.match(error.message, new RegExp(`pid ${process.pid}\\b.*port 8080`));
      assert.ok(!error.message.includes('\n'));
      return true;
    });
    // Another worker ID in the same directory is another state file: no conflict.
    const neighbour = await new StaticWorkerRegistry({ workerId: 4, stateDir, lockDir }).acquire({
      identity: other,
      maxWorkers: 1024,
    });
    await neighbour.release({ lastTimestamp: 1, reportedAt: 1 });
    await lease.release({ lastTimestamp: 10_000, reportedAt: 10_001 });
    const next = await two.acquire({ identity: other, maxWorkers: 1024 });
    assert.deepEqual([next.lastTimestamp, next.reportedAt], [10_000, 10_001]);
    // Closing a registry frees the file as a crash does: without a last report.
    await two.close();
    const after = await one.acquire({ identity, maxWorkers: 1024 });
    await after.release({ lastTimestamp: 10_000, reportedAt: 10_002 });
    await one.close();
  });

  it('two processes, one worker ID: the second is refused; after a kill, later', {
    timeout: 120_000,
  }, async (t) => {
    const options = { stateDir: join(dir.path, 'lock-2'), lockDir };
    const nodes: WorkerProcess[] = [];
    const node = (port: number) => {
      const child = new WorkerProcess({
        url: 'static:5',
        options,
        identity: { host: '10.0.0.1', port },
        layout: 'idmint',
        renewIntervalMs: 500,
        safetyMarginMs: 500,
        batch: 50,
        everyMs: 10,
      });
      nodes.push(child);
      return child;
    };
    t.after(() =>
      Promise.all(nodes.map((child) => (child.child.exitCode === null ? child.kill() : undefined))),
    );
    const first = node(8081);
    await first.loaded;
    first.start();
    await first.started;
    const second = node(8082);
    await second.loaded;
    second.start();
    await assert.rejects(second.started, (error: Error & { code?: string }) => {
      assert.equal(error.code, 'WORKER_IDS_EXHAUSTED');
      assert.ok(
        error.message.includes(join(options.stateDir, 'idmint-worker-5.json')),
        error.message,
      );
      assert.match(error.message, new RegExp(`pid ${first.child.pid}\\b.*port 8081`));
      return true;
    });
    assert.equal(await second.exited, 3);
    await delay(300);
    await first.kill();
    const third = node(8083);
    await third.loaded;
    third.start();
    await third.started;
    await delay(300);
    assert.equal(await third.stop(), 0);
    assertNoDuplicates([first, third]);
    const firstMax = first.ids.reduce((max, { id }) => (id > max ? id : max), 0n);
    assert.ok(
      first.ids.length > 0 && third.ids.length > 0 && third.ids.every(({ id }) => id > firstMax),
    );
  });

  it('`idmint serve` twice in one directory: the second refused, then later', {
    timeout: 120_000,
  }, async () => {
    const cwd = join(dir.path, 'serve');
    await mkdir(cwd, { recursive: true });
    const first = await startServe([], { cwd });
    try {
      const refused = await startServe([], { cwd }).then(
        (server) =>
          server.stop().then(() => assert.fail('a second server started on the same state file')),
        (error: Error) => error.message,
      );
      const stderr = refused.slice(refused.indexOf('stderr: ') + 'stderr: '.length).trim();
      assert.equal(stderr.split('\n').length, 1, `one line, got: ${stderr}`);
      assert.match(stderr, /^idmint serve: /);
      assert.ok(stderr.includes(join('data', 'idmint-worker-0.json')), stderr);
      assert.match(stderr, new RegExp(`pid ${first.child.pid}\\b`));
    } finally {
      await first.stop('SIGKILL');
    }
    const next = await startServe([], { cwd });
    assert.equal(await next.stop(), 0);
  });
});

describe('static worker registry: one host, one worker ID (the host lock)', () => {
  const other = { host: '10.0.0.2', port: 9090 };

  /**
   * A registry of `workerId` with its state in `dir/<stateDir>`, its host lock in `dir/<lockDir>`.
   */
  const registry = (workerId: number, stateDir: string, lockDir: string, name?: string) =>
    new StaticWorkerRegistry({
      workerId,
      stateDir: join(dir.path, stateDir),
      lockDir: join(dir.path, lockDir),
      name,
    });

  const twoDirectories =
    'two state directories, one worker ID: the second is refused naming the first and its ' +
    "state file; another cluster is not; the next holder starts after the last one's record";
  it(twoDirectories, async () => {
    const hostLocks = join(dir.path, 'host-1');
    const first = registry(6, 'host-1-a', 'host-1');
    const second = registry(6, 'host-1-b', 'host-1');
    const lease = await first.acquire({ identity, maxWorkers: 1024 });
    await assert.rejects(second.acquire({ identity: other, maxWorkers: 1024 }), (error) => {
      assert.ok(isIdMintError(error, 'WORKER_IDS_EXHAUSTED'), String(error));
      const inUse =
        'worker 6 of cluster idmint is in use on this host ' +
        `by pid ${process.pid}\\b.*port 8080`;
      assert.match(error.message, new RegExp(inUse));
      assert.ok(
        error.message.includes(join(dir.path, 'host-1-a', 'idmint-worker-6.json')),
        error.message,
      );
      assert.ok(error.message.includes(join(hostLocks, 'idmint', 'worker-6.lock')), error.message);
      assert.ok(!error.message.includes('\n'));
      return true;
    });
    // Worker IDs are per cluster: another cluster's worker 6 is another ID space.
    const elsewhere = await registry(6, 'host-1-c', 'host-1', 'billing').acquire({
      identity: other,
      maxWorkers,
    });
    await elsewhere.release({ lastTimestamp: 1, reportedAt: 1 });
    await lease.release({ lastTimestamp: 20_000, reportedAt: 20_001 });
    // The second directory's state file never saw worker 6: the host record says where it stopped.
    const next = await second.acquire({ identity: other, maxWorkers: 1024 });
    assert.deepEqual([next.lastTimestamp, next.reportedAt], [20_000, 20_001]);
    await next.release({ lastTimestamp: 20_500, reportedAt: 20_501 });
    const back = await first.acquire({ identity, maxWorkers: 1024 });
    assert.deepEqual(
      [back.lastTimestamp, back.reportedAt],
      [20_500, 20_501],
      'back in the first directory',
    );
    await back.release({ lastTimestamp: 20_500, reportedAt: 20_502 });
  });

  it('lock directories are shared (mode 1777); a held lock stays fresh', async () => {
    const lease = await registry(9, 'host-3-a', 'host-3/locks').acquire({ identity, maxWorkers });
    const lockDir = join(dir.path, 'host-3', 'locks');
    const mode = async (path: string) => (await stat(path)).mode & 0o7777;
    assert.deepEqual([await mode(lockDir), await mode(join(lockDir, 'idmint'))], [0o1777, 0o1777]);
    assert.equal(
      (await mode(join(dir.path, 'host-3'))) & 0o1002,
      0,
      'a parent it made is not shared',
    );
    // A cleaner ages files by their times: each report sets the held lock's to now.
    const lockFile = join(lockDir, 'idmint', 'worker-9.lock');
    const old = new Date(Date.now() - 30 * 86_400_000);
    await utimes(lockFile, old, old);
    await lease.renew({ lastTimestamp: 1000, reportedAt: 900 });
    assert.ok(Date.now() - (await stat(lockFile)).mtimeMs < 60_000, 'touched by the renewal');
    await lease.release({ lastTimestamp: 1000, reportedAt: 1000 });
  });

  it('a holder killed while reserving: the next, elsewhere, starts after it', async () => {
    const killed = registry(2, 'host-2-a', 'host-2');
    const lease = await killed.acquire({ identity, maxWorkers: 1024 });
    // A renewal reserves a horizon ahead of the clock (and a borrow lead); then the process dies.
    await lease.renew({ lastTimestamp: 50_000, reportedAt: 47_000 });
    await killed.close();
    const next = await registry(2, 'host-2-b', 'host-2').acquire({ identity: other, maxWorkers });
    assert.deepEqual([next.lastTimestamp, next.reportedAt], [50_000, 47_000]);
    await next.release({ lastTimestamp: 50_000, reportedAt: 51_000 });
  });

  const twoServers =
    '`idmint serve` in two directories of one host, both static:0: the second is refused in one ' +
    'line naming the first, and no ID is issued twice (there were 1,900 in 6,000)';
  it(twoServers, { timeout: 120_000 }, async () => {
    // Both servers inherit this test process's IDMINT_WORKER_LOCK_DIR (support/lock-dir.ts): one
    // host.
    const [a, b] = [join(dir.path, 'serve-a'), join(dir.path, 'serve-b')];
    await Promise.all([mkdir(a, { recursive: true }), mkdir(b, { recursive: true })]);
    const first = await startServe([], { cwd: a });
    const second = spawnServe([], { cwd: b });
    try {
      const secondUrl = await listeningUrl(second);
      const drawing = delay(1500);
      const draw = (url: string | undefined) =>
        url === undefined ? [] : drawSnowflakes(url, drawing);
      const drawn = await Promise.all([draw(first.url), draw(secondUrl)]);
      assert.ok((drawn[0]?.length ?? 0) > 0, 'the first server served');
      assertNoDuplicateIds(drawn, 'two servers on static:0 in two directories');
      assert.equal(secondUrl, undefined, 'the second server must not serve');
      assert.equal((await second.exited).code, 1);
      const stderr = second.stderr().trim();
      assert.equal(stderr.split('\n').length, 1, `one line, got: ${stderr}`);
      const pid = first.child.pid;
      const inUse = `worker 0 of cluster idmint is in use on this host by pid ${pid}\\b`;
      assert.match(stderr, new RegExp(`^idmint serve: .*${inUse}`));
      assert.ok(stderr.includes(join(a, 'data', 'idmint-worker-0.json')), stderr);
    } finally {
      await Promise.all([first.stop('SIGKILL'), second.kill('SIGKILL')]);
    }
    // Once the first is gone (killed: the kernel dropped its locks), the second directory serves.
    const again = await startServe([], { cwd: b });
    assert.equal(await again.stop(), 0);
  });
});

// Nodes of one state directory are processes on one host sharing worker 0.
await runInterleavingSuite(harness);
// A killed static node restarts at once, but waits out the horizon it had reserved; a node
// restarted with its clock set back is refused.
await runWorkerProcessScenarios(harness, { configured: true });
await dir.dispose();
