import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { decomposeId, getLayout } from '../src/core/layout.ts';
import { metricSample } from './support/metrics-text.ts';
import { deleteRedisNamespace } from './support/registry-admin.ts';
import { startServe, type ServeProcess } from './support/serve-process.ts';
import { SERVICES, describeWithServices, uniqueName } from './support/services.ts';

// A server process that stops running for a while (SIGSTOP: as a long GC pause or a starved
// machine) past its lease's fence answers the requests that came in meanwhile once its renewal
// confirms the lease, instead of 503 LEASE_LOST: every request 200, the IDs unique and from
// the worker it held before.

const layout = getLayout('idmint');
const root = mkdtempSync(join(tmpdir(), 'idmint-stall-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** The server's environment: snowflake mode alone, nothing from the runner's IDMINT_ vars. */
function serverEnv(name: string, extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  const dir = mkdtempSync(join(root, `${name}-`));
  return {
    ...env,
    IDMINT_SEGMENT_ENABLED: 'false',
    IDMINT_WORKER_STATE_DIR: join(dir, 'state'),
    // A lock directory of its own: static:0 of another run on this host is none of its business.
    IDMINT_WORKER_LOCK_DIR: join(dir, 'locks'),
    ...extra,
  };
}

interface Answer {
  readonly status: number;
  readonly ids: bigint[];
  readonly body: string;
}

/** One Leaf-style single ID or one JSON batch of three, as a client sends them. */
async function ask(url: string, n: number): Promise<Answer> {
  const batch = n % 2 === 1;
  const response = await fetch(
    batch ? `${url}/v1/snowflake?count=3` : `${url}/api/snowflake/get/x`,
  );
  const body = await response.text();
  if (response.status !== 200) return { status: response.status, ids: [], body };
  const ids = batch
    ? (JSON.parse(body) as { ids: string[] }).ids.map((id) => BigInt(id))
    : [BigInt(body)];
  return { status: response.status, ids, body };
}

/**
 * Stops the server for `stallMs`, sends `requests` requests while it is stopped (they wait in
 * the kernel's queues), lets it run again and returns the answers with the IDs drawn before.
 */
async function stallWithRequests(
  server: ServeProcess,
  stallMs: number,
  requests: number,
): Promise<{ before: bigint; answers: Answer[] }> {
  const pid = server.child.pid;
  assert.ok(pid !== undefined);
  const warm = await ask(server.url, 0);
  assert.equal(warm.status, 200, warm.body);
  const before = warm.ids[0] ?? 0n;
  process.kill(pid, 'SIGSTOP');
  let answers: Promise<Answer[]>;
  try {
    // Sent some time into the stop, as the stall already outlasts the fence.
    await sleep(stallMs / 2);
    answers = Promise.all(Array.from({ length: requests }, (_, n) => ask(server.url, n)));
    await sleep(stallMs / 2);
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  return { before, answers: await answers };
}

async function metrics(url: string): Promise<string> {
  const response = await fetch(`${url}/metrics`);
  assert.equal(response.status, 200);
  return response.text();
}

/** Every answer 200, every ID unique, above the one before the stall and from `workerId`. */
function assertServed(
  answers: readonly Answer[],
  before: bigint,
  workerId: number,
  logs = '',
): number {
  const seen = new Set<bigint>([before]);
  for (const answer of answers) {
    assert.equal(answer.status, 200, `answered ${answer.status}: ${answer.body} ${logs}`);
    for (const id of answer.ids) {
      assert.ok(!seen.has(id), `${id} issued twice`);
      seen.add(id);
      assert.ok(id > before, `${id} not above ${before}, issued before the stall`);
      assert.equal(decomposeId(id, layout).workerId, workerId);
    }
  }
  return seen.size - 1;
}

/**
 * Starts `idmint serve` on `env`, stops it for `stallMs` with 8 requests sent meanwhile (4 single
 * IDs, 4 batches of 3) and checks every one was answered from the lease held before the stop.
 */
async function ridesOutStall(env: NodeJS.ProcessEnv, stallMs: number): Promise<void> {
  const server = await startServe([], { env });
  try {
    const { before, answers } = await stallWithRequests(server, stallMs, 8);
    const workerId = decomposeId(before, layout).workerId;
    const logs = JSON.stringify(server.logs.slice(-12));
    assert.equal(assertServed(answers, before, workerId, logs), 4 + 4 * 3);
    const text = await metrics(server.url);
    // The requests did meet a fenced generator: the stop outlasted the fence.
    assert.ok((metricSample(text, 'idmint_snowflake_fenced_waits_total') ?? 0) >= 1, text);
    assert.equal(metricSample(text, 'idmint_snowflake_lease_losses_total'), 0);
  } finally {
    await server.stop();
  }
}

describe('a server stopped past its fence (static registry)', () => {
  it('answers the requests sent meanwhile once renewed: all 200', async () => {
    // The default static TTL (3 s): its fence is 2 s after a renewal; the stop lasts 4 s.
    await ridesOutStall(serverEnv('static', { IDMINT_WORKER_CLUSTER: uniqueName('stall') }), 4000);
  });
});

await describeWithServices('a server stopped past its fence (redis registry)', ['redis'], () => {
  const names: string[] = [];
  after(async () => {
    for (const name of names) await deleteRedisNamespace(SERVICES.redis.url, name);
  });

  it('answers the requests sent meanwhile once renewed: all 200', async () => {
    const name = uniqueName('stall');
    names.push(name);
    // TTL 2200 ms: renewed every 400 ms, fenced 1200 ms after a renewal. A 1400 ms stop is past
    // the fence whenever it starts, and ends before the key can expire in Redis (2200 ms after
    // the last renewal, at most 400 ms before the stop): the lease is still this node's.
    const env = serverEnv('redis', {
      IDMINT_WORKER_REGISTRY: SERVICES.redis.url,
      IDMINT_WORKER_CLUSTER: name,
      IDMINT_LEASE_TTL_MS: '2200',
    });
    await ridesOutStall(env, 1400);
  });
});
