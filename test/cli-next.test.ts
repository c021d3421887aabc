import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { decomposeId } from '../src/core/layout.ts';
import { IDMINT_BIN, runIdmint, type CliResult } from './support/cli.ts';
import { deleteRedisNamespace } from './support/registry-admin.ts';
import { startServe } from './support/serve-process.ts';
import { SERVICES, describeWithServices, uniqueName } from './support/services.ts';
import { assertNoDuplicateIds, drawSnowflakes } from './support/snowflake-draw.ts';
import { delay } from './support/workers.ts';

// `idmint next` issues snowflake IDs as `idmint serve` does: on a worker ID leased from the
// configured registry, refused while another process holds it, released on exit. Real OS
// processes throughout; every process of a test shares its lock directory (one host).

const root = mkdtempSync(join(tmpdir(), 'idmint-cli-next-'));
after(() => rmSync(root, { recursive: true, force: true }));
const workdir = (name: string) => mkdtempSync(join(root, `${name}-`));
const idsOf = (result: CliResult) =>
  result.stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => BigInt(line));
/** "worker 0 of cluster idmint is in use on this host by pid <pid>", as the refusal says it. */
const inUseBy = (pid: number | undefined) =>
  `worker 0 of cluster idmint is in use on this host by pid ${pid}\\b`;

describe('idmint next beside a server (static registry, the defaults)', () => {
  const title =
    "in the server's directory: refused in one line naming the server, no ID issued twice " +
    '(were 294,000)';
  it(title, { timeout: 180_000 }, async () => {
    const cwd = workdir('beside');
    const server = await startServe([], { cwd });
    try {
      const drawing = delay(3000);
      const drawn = drawSnowflakes(server.url, drawing);
      // As the user did: three runs of `idmint next` while the server is drawn from.
      const runs = await Promise.all(
        [0, 1, 2].map(() => runIdmint(['next', '--count', '300000'], { cwd })),
      );
      const cliIds = runs.map(idsOf);
      const served = await drawn;
      assert.ok(served.length > 0, 'the server served');
      assertNoDuplicateIds([served, ...cliIds], 'idmint next beside the server');
      for (const run of runs) {
        assert.equal(run.code, 1, `idmint next must be refused: ${run.stderr}`);
        assert.equal(run.stdout, '');
        const stderr = run.stderr.trim();
        assert.equal(stderr.split('\n').length, 1, `one line, got: ${stderr}`);
        const refusal = `^idmint next: static worker registry: ${inUseBy(server.child.pid)}`;
        assert.match(stderr, new RegExp(`${refusal}.*pass --worker <id>`));
      }
      // An explicit worker ID is an explicit choice: refused while a live process holds it ...
      const zero = await runIdmint(['next', '--worker', '0'], { cwd });
      assert.equal(zero.code, 1);
      assert.match(zero.stderr, /worker 0 of cluster idmint is in use on this host/);
      // ... and served when no one does.
      const one = await runIdmint(['next', '--worker', '1', '--count', '1000'], { cwd });
      assert.equal(one.code, 0, one.stderr);
      const oneIds = idsOf(one);
      assert.equal(oneIds.length, 1000);
      assert.ok(oneIds.every((id) => decomposeId(id).workerId === 1));
    } finally {
      await server.stop('SIGINT');
    }
    // The server released worker 0: next takes it, and starts after the server's last IDs.
    const after = await runIdmint(['next', '--count', '5'], { cwd });
    assert.equal(after.code, 0, after.stderr);
    assert.ok(idsOf(after).every((id) => decomposeId(id).workerId === 0));
  });

  it('from another directory of the host: refused the same way (the host lock)', {
    timeout: 60_000,
  }, async () => {
    const server = await startServe([], { cwd: workdir('server') });
    try {
      const elsewhere = await runIdmint(['next'], { cwd: workdir('elsewhere') });
      assert.equal(elsewhere.code, 1, elsewhere.stdout);
      assert.match(elsewhere.stderr, new RegExp(inUseBy(server.child.pid)));
    } finally {
      await server.stop();
    }
  });

  it("runs one after another: each starts after the last one's IDs, a server too", {
    timeout: 60_000,
  }, async () => {
    const cwd = workdir('sequence');
    let last = -1n;
    for (let run = 0; run < 3; run++) {
      const result = await runIdmint(['next', '--count', '20000'], { cwd });
      assert.equal(result.code, 0, result.stderr);
      const ids = idsOf(result);
      assert.ok((ids[0] ?? -1n) > last, `run ${run} starts after the one before`);
      last = ids.at(-1) ?? last;
    }
    const server = await startServe([], { cwd });
    try {
      const [first] = await drawSnowflakes(server.url, delay(1), 1);
      assert.ok(first !== undefined && first > last, "the server starts after idmint next's IDs");
    } finally {
      await server.stop();
    }
  });
});

await describeWithServices('idmint next on a coordinator (redis)', ['redis'], () => {
  const redis = SERVICES.redis.url;
  const names: string[] = [];
  after(async () => {
    for (const name of names) await deleteRedisNamespace(redis, name);
  });
  const setup = () => {
    const name = uniqueName('next');
    names.push(name);
    return { IDMINT_WORKER_REGISTRY: redis, IDMINT_WORKER_CLUSTER: name };
  };

  const title =
    "leases a worker ID of its own beside a server, refuses the server's with --worker, " +
    'releases on exit';
  it(title, { timeout: 120_000 }, async () => {
    const env = setup();
    const server = await startServe(['--no-segment-enabled'], { cwd: workdir('redis'), env });
    try {
      const listening = server.logs.find((line) => line['msg'] === 'idmint listening');
      const serverWorker = (listening!['snowflake'] as { workerId: number }).workerId;
      const drawing = delay(1500);
      const drawn = drawSnowflakes(server.url, drawing);
      const cli = await runIdmint(['next', '--count', '200000'], {
        cwd: workdir('redis-cli'),
        env,
      });
      const served = await drawn;
      assert.equal(cli.code, 0, cli.stderr);
      const cliIds = idsOf(cli);
      assert.equal(cliIds.length, 200_000);
      const cliWorker = decomposeId(cliIds[0] ?? 0n).workerId;
      assert.notEqual(cliWorker, serverWorker);
      assertNoDuplicateIds([served, cliIds], 'idmint next beside a server of the cluster');
      const taken = await runIdmint(['next', '--worker', String(serverWorker)], { env });
      assert.equal(taken.code, 1);
      const refusal =
        `^idmint next: redis worker registry: no free worker ID .*only worker ID ` +
        `${serverWorker} was`;
      assert.match(taken.stderr, new RegExp(`${refusal}.*pass --worker <id>`));
      // Released on exit: the same worker ID is free again at once (a lease left behind would
      // hold it for its 10 s TTL), after a normal end, after `| head -1`, and after SIGTERM.
      const free = serverWorker === 7 ? 8 : 7;
      for (let run = 0; run < 2; run++) {
        const again = await runIdmint(['next', '--worker', String(free), '--count', '3'], { env });
        assert.equal(again.code, 0, again.stderr);
        assert.ok(idsOf(again).every((id) => decomposeId(id).workerId === free));
      }
      const takeFree = async () =>
        (await runIdmint(['next', '--worker', String(free)], { env })).code;
      const idmint = `"${process.execPath}" "${IDMINT_BIN}"`;
      const piped = await shell(`${idmint} next --worker ${free} --count 5000000 | head -1`, env);
      assert.match(piped.stdout, /^[1-9][0-9]+\n$/);
      assert.equal(await takeFree(), 0, 'free again after | head -1');
      const long = ['next', '--worker', String(free), '--count', '10000000', '--layout', 'js-safe'];
      const stopped = await stopAfterFirstLine(long, env);
      assert.equal(stopped.signal, 'SIGTERM');
      assert.equal(await takeFree(), 0, 'free again after SIGTERM');
    } finally {
      await server.stop();
    }
  });
});

/** Runs a shell command line; resolves with its output once it ends. */
function shell(command: string, env: NodeJS.ProcessEnv): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', command], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Starts `idmint <args>`, sends SIGTERM once it printed its first ID, and resolves with how it
 * ended.
 */
function stopAfterFirstLine(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): Promise<{ signal: string | null }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [IDMINT_BIN, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.stdout.once('data', () => child.kill('SIGTERM'));
    child.stdout.resume();
    child.on('close', (_code, signal) => resolve({ signal }));
  });
}
