import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { decomposeId, getLayout } from '../src/core/layout.ts';
import { runIdmint } from './support/cli.ts';
import { spawnServe, type ServeChild } from './support/serve-process.ts';

/**
 * `idmint serve --processes N` with real processes: N children behind one port, each with its own
 * worker ID and segment ranges; a child killed with SIGKILL under load is replaced without a
 * repeated ID, and no connection is left unanswered; a child that keeps failing to start is given
 * up on (exit 3, its cause named), one that fails a few times and then starts is kept; SIGTERM
 * stops them all, and a second signal kills them at once.
 */

const root = mkdtempSync(join(tmpdir(), 'idmint-cli-processes-'));
after(() => rmSync(root, { recursive: true, force: true }));
const layout = getLayout('idmint');

const clean = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return { ...env, ...extra };
};

interface Supervised {
  readonly serve: ServeChild;
  readonly url: string;
  readonly childPids: number[];
}

/**
 * Starts `serve --processes n <args>` (zero setup: SQLite store, static registry) in `cwd` (a new
 * directory by default) and waits until every child listens.
 */
async function startProcesses(
  n: number,
  name: string,
  options: { args?: string[]; cwd?: string } = {},
): Promise<Supervised> {
  const cwd = options.cwd ?? mkdtempSync(join(root, `${name}-`));
  const serve = spawnServe(['--processes', String(n), ...(options.args ?? [])], {
    cwd,
    env: clean(),
  });
  const ready = await serve.logLine((line) => line['msg'] === 'idmint processes listening');
  return { serve, url: String(ready['url']), childPids: ready['childPids'] as number[] };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A request that got neither an answer nor an error within its timeout. */
class NoAnswer extends Error {}

/**
 * One GET over `agent`: status and body. Bounded, as every client of a fleet must be: without the
 * supervisor's guard (src/cli/handoff-guard.ts), a connection the cluster primary handed to a
 * child just as it was SIGKILLed was never answered nor closed (seen once in CI: the test hung for
 * 9 minutes); a request that gets no answer rejects with {@link NoAnswer}.
 */
function request(agent: Agent, url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const call = get(url, { agent, timeout: 5000 }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      response.on('error', reject);
    });
    call.on('timeout', () => call.destroy(new NoAnswer(`no answer from ${url} within 5 s`)));
    call.on('error', reject);
  });
}

/**
 * Draws IDs with `connections` concurrent loops (keep-alive connections of their own unless
 * `keepAlive` is false, then a new connection per request, so each call spreads over the children
 * live when it starts) until `until` resolves (or `total` is reached), alternating segment and
 * snowflake. Requests that fail (a connection to a killed child) are counted, not kept; those
 * left unanswered are counted apart.
 */
async function draw(
  url: string,
  tag: string,
  options: { connections: number; total?: number; until?: Promise<unknown>; keepAlive?: boolean },
): Promise<{ segment: bigint[]; snowflake: bigint[]; failed: number; unanswered: number }> {
  const segment: bigint[] = [];
  const snowflake: bigint[] = [];
  let failed = 0;
  let unanswered = 0;
  let stop = false;
  void options.until?.then(() => (stop = true));
  let issued = 0;
  const agent = new Agent({
    keepAlive: options.keepAlive ?? true,
    maxSockets: options.connections,
  });
  const loop = async () => {
    while (!stop && (options.total === undefined || issued < options.total)) {
      const n = issued++;
      const path = n % 2 === 0 ? `/api/segment/get/${tag}` : `/api/snowflake/get/${tag}`;
      try {
        const { status, body } = await request(agent, `${url}${path}`);
        if (status !== 200) {
          failed++;
          continue;
        }
        (n % 2 === 0 ? segment : snowflake).push(BigInt(body));
      } catch (error) {
        if (error instanceof NoAnswer) unanswered++;
        else failed++;
      }
    }
  };
  await Promise.all(Array.from({ length: options.connections }, loop));
  agent.destroy();
  return { segment, snowflake, failed, unanswered };
}

/** `promise`, or a rejection naming `what` if it has not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)),
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Ends whatever a test left running: the supervisor and any child still alive (one stopped with
 * SIGSTOP included).
 */
async function killAll(serve: ServeChild, childPids: readonly number[]): Promise<void> {
  for (const pid of childPids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  await serve.kill('SIGKILL');
}

/**
 * A configuration file that every child reads again when it starts; `broken()` makes that start
 * fail (exit 2).
 */
function configFile(cwd: string): { args: string[]; broken(): void; repaired(): void } {
  const path = join(cwd, 'idmint.json');
  const repaired = () => writeFileSync(path, JSON.stringify({ log: { level: 'info' } }));
  repaired();
  return {
    args: ['--config', 'idmint.json'],
    broken: () => writeFileSync(path, JSON.stringify({ segment: { store: 'nosuch://x' } })),
    repaired,
  };
}
const BROKEN_CONFIG =
  'idmint serve: invalid configuration: segment.store = "nosuch://x" (from idmint.json): ' +
  'not a segment store URL';

function assertDistinct(ids: readonly bigint[], what: string): void {
  const seen = new Set<bigint>();
  for (const id of ids) {
    assert.ok(!seen.has(id), `${what}: ${id} issued twice`);
    seen.add(id);
  }
}

async function createTag(url: string, tag: string, step: number): Promise<void> {
  const created = await fetch(`${url}/v1/tags`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tag, step }),
  });
  assert.equal(created.status, 201, await created.text());
}

describe('idmint serve --processes', () => {
  it('two processes on one port: every ID distinct; SIGTERM stops all', async () => {
    const { serve, url, childPids } = await startProcesses(2, 'distinct');
    let code: number | null = null;
    try {
      assert.equal(childPids.length, 2);
      assert.deepEqual(
        serve.logs
          .filter((line) => line['msg'] === 'idmint listening')
          .map((line) => (line['snowflake'] as { workerId: number }).workerId)
          .sort(),
        [0, 1],
        'each child holds its own static worker ID',
      );
      // A small step: many range loads, from both processes, race in the store.
      await createTag(url, 'order', 50);
      const ids = await draw(url, 'order', { connections: 16, total: 4000 });
      assert.equal(ids.failed, 0);
      assert.equal(ids.segment.length + ids.snowflake.length, 4000);
      assertDistinct(ids.segment, 'segment');
      assertDistinct(ids.snowflake, 'snowflake');
      // Both processes served (the cluster hands connections out in turn).
      assert.deepEqual(
        [...new Set(ids.snowflake.map((id) => decomposeId(id, layout).workerId))].sort(),
        [0, 1],
      );
      // Each process's metrics carry its slot, so the N series behind one port never collide.
      const slots = new Set<string>();
      for (let i = 0; i < 20 && slots.size < 2; i++) {
        const agent = new Agent({ keepAlive: false });
        const { body } = await request(agent, `${url}/metrics`);
        for (const match of body.matchAll(/^idmint_\w+\{[^}]*process="(\d+)"/gm))
          slots.add(match[1] ?? '');
        assert.doesNotMatch(
          body,
          /^idmint_\w+(\{(?![^}]*process=)[^}]*\})? /m,
          'a series without its process label',
        );
      }
      assert.deepEqual([...slots].sort(), ['0', '1']);
    } finally {
      code = (await serve.kill('SIGTERM')).code;
    }
    assert.equal(code, 0, serve.stderr());
    for (const pid of childPids) assert.equal(alive(pid), false, `child ${pid} still runs`);
    const messages = serve.logs.map((line) => line['msg']);
    assert.equal(
      messages.filter((m) => m === 'idmint stopped').length,
      2,
      'each child shut down gracefully',
    );
    assert.equal(
      messages.filter((m) => typeof m === 'string' && m.startsWith('released worker')).length,
      2,
      'each child released its worker ID',
    );
    assert.equal(messages.at(-1), 'idmint processes stopped');
  });

  it('a child SIGKILLed under load is replaced; no ID is issued twice', async () => {
    const { serve, url, childPids } = await startProcesses(2, 'sigkill');
    try {
      await createTag(url, 'pay', 100);
      const [victim] = childPids;
      assert.ok(victim !== undefined);
      const replaced = serve.logLine(
        (line) =>
          line['msg'] === 'process listening' && line['slot'] === 0 && line['childPid'] !== victim,
      );
      const before = await draw(url, 'pay', { connections: 8, total: 1000 });
      const load = draw(url, 'pay', {
        connections: 8,
        until: replaced.then(() => new Promise((resolve) => setTimeout(resolve, 500))),
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      process.kill(victim, 'SIGKILL');
      const successor = await replaced;
      const during = await load;
      const afterwards = await draw(url, 'pay', { connections: 8, total: 1000 });
      assert.equal(afterwards.failed, 0);
      assert.ok(alive(Number(successor['childPid'])));
      const restart = serve.logs.find((line) => line['msg'] === 'process ended: restarting it');
      assert.deepEqual([restart?.['slot'], restart?.['signal']], [0, 'SIGKILL']);
      const segment = [...before.segment, ...during.segment, ...afterwards.segment];
      const snowflake = [...before.snowflake, ...during.snowflake, ...afterwards.snowflake];
      assertDistinct(segment, 'segment');
      assertDistinct(snowflake, 'snowflake');
      // The successor took the dead child's worker ID (static:0 again) and issued with it.
      const successorWorker = serve.logs
        .filter(
          (line) => line['msg'] === 'idmint listening' && line['pid'] === successor['childPid'],
        )
        .map((line) => (line['snowflake'] as { workerId: number }).workerId);
      assert.deepEqual(successorWorker, [0]);
      assert.ok(
        afterwards.snowflake.some((id) => decomposeId(id, layout).workerId === 0),
        'the successor served IDs as worker 0',
      );
    } finally {
      assert.equal((await serve.kill('SIGTERM')).code, 0, serve.stderr());
    }
  });

  it('a connection handed to a child as it is SIGKILLed is closed at once', async () => {
    const { serve, url, childPids } = await startProcesses(2, 'handoff');
    try {
      await createTag(url, 'handoff', 100);
      // A new connection for every request: the supervisor is handing one out at any moment.
      let stopLoad: () => void = () => {};
      const load = draw(url, 'handoff', {
        connections: 8,
        keepAlive: false,
        until: new Promise<void>((resolve) => (stopLoad = resolve)),
      });
      for (const [slot, victim] of childPids.entries()) {
        const successor = serve.logLine(
          (line) =>
            line['msg'] === 'process listening' &&
            line['slot'] === slot &&
            line['childPid'] !== victim,
        );
        await new Promise((resolve) => setTimeout(resolve, 500));
        process.kill(victim, 'SIGKILL');
        await within(successor, 30_000, `slot ${slot} replaced`);
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
      stopLoad();
      const ids = await load;
      assert.equal(
        ids.unanswered,
        0,
        `${ids.unanswered} requests got no answer (${ids.failed} failed, ` +
          `${ids.segment.length + ids.snowflake.length} served)`,
      );
      assert.ok(ids.segment.length > 0 && ids.snowflake.length > 0);
      assertDistinct(ids.segment, 'segment');
      assertDistinct(ids.snowflake, 'snowflake');
    } finally {
      assert.equal((await serve.kill('SIGTERM')).code, 0, serve.stderr());
    }
  });

  it('gives up on a child that keeps ending at start: exit 3, its last error', async () => {
    const cwd = mkdtempSync(join(root, 'give-up-'));
    const config = configFile(cwd);
    const { serve, childPids } = await startProcesses(2, 'give-up', { cwd, args: config.args });
    const [victim, sibling] = childPids;
    assert.ok(victim !== undefined && sibling !== undefined);
    try {
      // The file breaks while the node runs; a child that dies now cannot start again.
      config.broken();
      process.kill(victim, 'SIGKILL');
      // Five restarts (100 ms to 1.6 s apart, 3.1 s of waiting), then the sixth end gives up.
      const { code } = await within(serve.exited, 60_000, 'the supervisor giving up');
      assert.equal(code, 3, serve.stderr());
      const lines = serve.stderr().trimEnd().split('\n');
      const last = lines.at(-1) ?? '';
      assert.ok(
        last.startsWith(
          'idmint serve: gave up: process 0 ended 6 times in a row, each before serving 30 ' +
            's; every process stopped. Its last end (exit code 2): ',
        ),
        last,
      );
      assert.ok(
        last.endsWith(
          lines.find((line) => line.startsWith(BROKEN_CONFIG)) ?? 'the broken configuration',
        ),
        last,
      );
      // Each failed start's own line reached stderr, relayed by the supervisor.
      assert.equal(
        lines.filter((line) => line.startsWith(BROKEN_CONFIG)).length,
        5,
        serve.stderr(),
      );
      const restarts = serve.logs.filter((line) => line['msg'] === 'process ended: restarting it');
      assert.deepEqual(
        restarts.map((line) => [line['slot'], line['failures'], line['delayMs']]),
        [
          [0, 1, 100],
          [0, 2, 200],
          [0, 3, 400],
          [0, 4, 800],
          [0, 5, 1600],
        ],
      );
      assert.equal(restarts[0]?.['signal'], 'SIGKILL');
      for (const restart of restarts.slice(1))
        assert.ok(String(restart['error']).startsWith(BROKEN_CONFIG), JSON.stringify(restart));
      // The healthy sibling was stopped gracefully, not killed, and nothing is left running.
      assert.ok(
        serve.logs.some((line) => line['msg'] === 'idmint stopped' && line['pid'] === sibling),
        'the sibling drained and stopped',
      );
      for (const pid of childPids) assert.equal(alive(pid), false, `child ${pid} still runs`);
    } finally {
      await killAll(serve, childPids);
    }
  });

  it('a child that fails a few starts is replaced, each restart naming the cause', async () => {
    const cwd = mkdtempSync(join(root, 'recover-'));
    const config = configFile(cwd);
    const { serve, url, childPids } = await startProcesses(2, 'recover', {
      cwd,
      args: config.args,
    });
    const [victim] = childPids;
    assert.ok(victim !== undefined);
    try {
      config.broken();
      const failedStart = serve.logLine(
        (line) =>
          line['msg'] === 'process ended: restarting it' &&
          String(line['error']).startsWith(BROKEN_CONFIG),
      );
      const successor = serve.logLine(
        (line) =>
          line['msg'] === 'process listening' && line['slot'] === 0 && line['childPid'] !== victim,
      );
      // Awaited one after the other: the later one must not reject unhandled if the first fails.
      successor.catch(() => undefined);
      process.kill(victim, 'SIGKILL');
      await within(failedStart, 30_000, 'a failed start');
      config.repaired();
      const replaced = await within(successor, 30_000, 'the successor listening');
      assert.ok(alive(Number(replaced['childPid'])));
      await createTag(url, 'recovered', 100);
      const ids = await draw(url, 'recovered', { connections: 4, total: 200 });
      assert.equal(ids.failed, 0);
      assert.ok(
        ids.snowflake.some((id) => decomposeId(id, layout).workerId === 0),
        'the successor served IDs as worker 0',
      );
    } finally {
      assert.equal((await serve.kill('SIGTERM')).code, 0, serve.stderr());
    }
  });

  it('a second signal while draining kills every child, exits 1; IDs freed', async () => {
    const cwd = mkdtempSync(join(root, 'forced-'));
    const { serve, childPids } = await startProcesses(2, 'forced', { cwd });
    const [stuck] = childPids;
    assert.ok(stuck !== undefined);
    try {
      // A child that cannot drain (stopped: it handles no signal until SIGCONT).
      process.kill(stuck, 'SIGSTOP');
      serve.child.kill('SIGTERM');
      // The same signal again at once is a copy (npm start passes Ctrl-C on): still draining.
      serve.child.kill('SIGTERM');
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.equal(serve.child.exitCode, null, 'a copy of the first signal forced the stop');
      const sentAt = Date.now();
      serve.child.kill('SIGINT');
      const { code } = await within(serve.exited, 5000, 'the forced stop');
      assert.ok(Date.now() - sentAt < 5000);
      assert.equal(code, 1, serve.stderr());
      assert.match(
        serve.stderr(),
        new RegExp(
          '^idmint serve: second signal \\(SIGINT\\): forced stop, every process killed ' +
            'without finishing its shutdown$',
          'm',
        ),
      );
      // The supervisor saw every child end before it exited: none is left to hold a worker ID.
      for (const pid of childPids) assert.equal(alive(pid), false, `child ${pid} still runs`);
    } finally {
      await killAll(serve, childPids);
    }
    // The node started again at once gets both worker IDs (static:0 and static:1) back.
    const again = await startProcesses(2, 'forced', { cwd });
    try {
      assert.deepEqual(
        again.serve.logs
          .filter((line) => line['msg'] === 'idmint listening')
          .map((line) => (line['snowflake'] as { workerId: number }).workerId)
          .sort(),
        [0, 1],
      );
    } finally {
      assert.equal((await again.serve.kill('SIGTERM')).code, 0, again.serve.stderr());
    }
  });

  it('refuses a bad --processes or IDMINT_PROCESSES with exit 2 and one line', async () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [
        ['--processes', '0'],
        {},
        new RegExp(
          'processes = "0" \\(from --processes\\): must be an integer from 1 to 64, or auto ' +
            '\\(the number of CPUs\\)',
        ),
      ],
      [['--processes', '65'], {}, /processes = "65" \(from --processes\)/],
      [['--processes', 'many'], {}, /processes = "many" \(from --processes\)/],
      [[], { IDMINT_PROCESSES: '1.5' }, /processes = "1\.5" \(from IDMINT_PROCESSES\)/],
    ];
    for (const [args, env, message] of cases) {
      const result = await runIdmint(['serve', ...args], {
        env: clean(env),
        cwd: mkdtempSync(join(root, 'bad-')),
      });
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, message);
      assert.equal(result.stderr.trimEnd().split('\n').length, 1, result.stderr);
    }
  });

  it('exits 2 when one child cannot start (static:31 needs worker 32)', async () => {
    const result = await runIdmint(
      [
        'serve',
        '--port',
        '0',
        '--processes',
        '2',
        '--layout',
        'twitter',
        '--worker-registry',
        'static:31',
      ],
      { env: clean(), cwd: mkdtempSync(join(root, 'layout-')) },
    );
    assert.equal(result.code, 2, result.stderr);
    // The cause comes first; a sibling stopped while it was still starting may add that it stopped.
    const [cause, ...rest] = result.stderr.trimEnd().split('\n');
    assert.equal(
      cause,
      'idmint serve: static worker ID 32 does not fit the layout: worker IDs go from 0 to 31',
    );
    for (const line of rest)
      assert.equal(
        line,
        'idmint serve: SIGTERM during start-up: stopped before serving',
        result.stderr,
      );
  });
});
