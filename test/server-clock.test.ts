import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { decomposeId, getLayout } from '../src/core/layout.ts';
import { startServe, type ServeProcess } from './support/serve-process.ts';
import { REQUIRE_SERVICES } from './support/services.ts';
import { findLibfaketime } from './support/worker-processes.ts';
import { delay } from './support/workers.ts';

/**
 * Each rollback policy end to end (issue 8): a real `idmint serve` process runs under libfaketime
 * with the system clock (`--clock system`), its wall clock is stepped back while it serves, and
 * every answer over HTTP is checked against what the policy promises, and every ID it answered
 * against every other. libfaketime re-reads its offset from a file on each clock read
 * (FAKETIME_TIMESTAMP_FILE + FAKETIME_NO_CACHE); the monotonic clock is left alone.
 */

const root = mkdtempSync(join(tmpdir(), 'idmint-server-clock-'));
after(() => rmSync(root, { recursive: true, force: true }));

const faketime = findLibfaketime();
const noFaketime = 'libfaketime not found (apt-get install faketime, or scripts/services.sh up)';
if (faketime === undefined && !REQUIRE_SERVICES)
  process.stderr.write(`\n!!! SKIPPING the server clock-rollback tests: ${noFaketime}\n`);
const skip = faketime === undefined && !REQUIRE_SERVICES ? noFaketime : false;

const layout = getLayout('idmint');

/** One HTTP answer of a run, `at` ms after the latest clock step (negative: before any). */
interface Answer {
  readonly at: number;
  readonly tookMs: number;
  readonly status: number;
  readonly code?: string;
  readonly retryAfter?: string | null;
  readonly workerId?: number;
  readonly ids: readonly bigint[];
}

/** A server whose wall clock the test moves. */
class SteppedServer {
  readonly answers: Answer[] = [];
  readonly server: ServeProcess;
  readonly offsetFile: string;
  #steppedAt = Number.NEGATIVE_INFINITY;

  private constructor(server: ServeProcess, offsetFile: string) {
    this.server = server;
    this.offsetFile = offsetFile;
  }

  /**
   * `idmint serve --clock system <args>` (unless args name another clock) under libfaketime, in a
   * directory of its own.
   */
  static async start(name: string, args: readonly string[]): Promise<SteppedServer> {
    assert.ok(faketime !== undefined, `IDMINT_REQUIRE_SERVICES=1 but ${noFaketime}`);
    const cwd = mkdtempSync(join(root, `${name}-`));
    const offsetFile = join(cwd, 'faketime.rc');
    writeFileSync(offsetFile, '+0\n');
    const env: NodeJS.ProcessEnv = {
      LD_PRELOAD: faketime,
      FAKETIME_TIMESTAMP_FILE: offsetFile,
      FAKETIME_NO_CACHE: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
      IDMINT_SEGMENT_ENABLED: 'false',
      // Its static worker's host lock in its own directory, not the machine's /tmp/idmint.
      IDMINT_WORKER_LOCK_DIR: join(cwd, 'locks'),
    };
    // The runner's own configuration must not leak in.
    for (const key of Object.keys(process.env))
      if (key.startsWith('IDMINT_') && !(key in env)) env[key] = '';
    const server = await startServe(
      args.includes('--clock') ? args : ['--clock', 'system', ...args],
      { cwd, env },
    );
    return new SteppedServer(server, offsetFile);
  }

  /**
   * Sets the wall clock `seconds` behind the real time (atomically: libfaketime reads the file on
   * every clock read).
   */
  stepBack(seconds: number): void {
    const temporary = `${this.offsetFile}.tmp`;
    writeFileSync(temporary, `-${seconds}\n`);
    renameSync(temporary, this.offsetFile);
    this.#steppedAt = performance.now();
  }

  /** One `GET /v1/snowflake?count=`, recorded. */
  async draw(count = 5): Promise<Answer> {
    const start = performance.now();
    const response = await fetch(`${this.server.url}/v1/snowflake?count=${count}`);
    const body = (await response.json()) as {
      workerId?: number;
      ids?: string[];
      error?: { code: string };
    };
    const answer: Answer = {
      at: start - this.#steppedAt,
      tookMs: performance.now() - start,
      status: response.status,
      ids: (body.ids ?? []).map((id) => BigInt(id)),
      ...(body.error === undefined
        ? {}
        : { code: body.error.code, retryAfter: response.headers.get('retry-after') }),
      ...(body.workerId === undefined ? {} : { workerId: body.workerId }),
    };
    this.answers.push(answer);
    return answer;
  }

  /** Draws every ~25 ms for `ms`; returns the answers of that period. */
  async drawFor(ms: number): Promise<Answer[]> {
    const first = this.answers.length;
    const end = performance.now() + ms;
    while (performance.now() < end) {
      await this.draw();
      await delay(25);
    }
    return this.answers.slice(first);
  }

  /** Every ID answered, in answer order. */
  ids(): bigint[] {
    return this.answers.flatMap((a) => a.ids);
  }

  /** Stops the server (SIGTERM) and checks that no ID was answered twice over the whole run. */
  async stop(): Promise<void> {
    const code = await this.server.stop('SIGTERM');
    assert.equal(code, 0, this.server.stderr());
    const ids = this.ids();
    assert.ok(ids.length > 0, 'no ID was answered');
    assert.equal(
      new Set(ids).size,
      ids.length,
      `${ids.length - new Set(ids).size} IDs were answered twice`,
    );
  }
}

const maxOf = (ids: readonly bigint[]) => ids.reduce((max, id) => (id > max ? id : max), -1n);
const timestampOf = (id: bigint) => decomposeId(id, layout).timestamp;

/** True when IDs are strictly increasing in the order they were answered. */
function strictlyIncreasing(ids: readonly bigint[]): boolean {
  return ids.every((id, i) => i === 0 || id > (ids[i - 1] ?? -1n));
}

/** Asserts a 503 CLOCK_MOVED_BACKWARDS with Retry-After, the way a client is told to retry. */
function assertClockRefusal(answer: Answer): void {
  assert.equal(
    answer.status,
    503,
    `answer ${answer.at.toFixed(0)} ms after the step: ` +
      `${JSON.stringify({ ...answer, ids: answer.ids.length })}`,
  );
  assert.equal(answer.code, 'CLOCK_MOVED_BACKWARDS');
  assert.match(String(answer.retryAfter), /^[1-9][0-9]*$/);
}

describe('idmint serve with the system clock stepped back (libfaketime), each rollback policy', {
  skip,
  timeout: 180_000,
}, () => {
  it('refuse: 503 until the clock is back, then IDs continue above', async () => {
    const node = await SteppedServer.start('refuse', ['--rollback-policy', 'refuse']);
    try {
      await node.drawFor(300);
      const before = maxOf(node.ids());
      node.stepBack(3);
      // Well inside the 3 s the clock needs to get back where it was.
      const during = await node.drawFor(1500);
      assert.ok(during.length >= 5, `only ${during.length} requests in 1.5 s`);
      for (const answer of during) assertClockRefusal(answer);
      await delay(2000);
      const resumed = await node.drawFor(300);
      assert.ok(resumed.every((a) => a.status === 200) && resumed.length > 0);
      assert.ok(
        resumed.every((a) => a.ids.every((id) => id > before)),
        'IDs after the rollback must be above every earlier one',
      );
      assert.ok(strictlyIncreasing(node.ids()));
    } finally {
      await node.stop();
    }
  });

  it('wait: a rollback within maxBackwardMs is waited out; larger refused', async () => {
    const node = await SteppedServer.start('wait', [
      '--rollback-policy',
      'wait',
      '--rollback-max-backward-ms',
      '1000',
    ]);
    try {
      await node.drawFor(300);
      const before = maxOf(node.ids());
      node.stepBack(0.7);
      const first = await node.draw();
      assert.equal(first.status, 200, JSON.stringify(first.code));
      // The clock was still behind the last ID when the request came in: the generator slept
      // (twice the offset, Leaf's rule), then issued after it.
      assert.ok(
        first.tookMs >= 500 - first.at,
        `answered after ${first.tookMs.toFixed(0)} ms, ${first.at.toFixed(0)} ms after a ` +
          `700 ms step`,
      );
      assert.ok(first.ids.every((id) => id > before));
      const small = await node.drawFor(800);
      assert.ok(small.every((a) => a.status === 200));
      // Back in step: now a rollback beyond maxBackwardMs (3 s in all) is refused at once.
      node.stepBack(3.7);
      const large = await node.drawFor(1500);
      assert.ok(large.length >= 5);
      for (const answer of large) {
        assertClockRefusal(answer);
        // Refused at once: waiting out 3 s would have taken twice that.
        assert.ok(answer.tookMs < 1500, `a refused request took ${answer.tookMs.toFixed(0)} ms`);
      }
      assert.ok(strictlyIncreasing(node.ids()));
    } finally {
      await node.stop();
    }
  });

  it('borrow: IDs keep coming in order ahead of the clock, within the lead', async () => {
    const node = await SteppedServer.start('borrow', [
      '--rollback-policy',
      'borrow',
      '--rollback-max-lead-ms',
      '1000',
    ]);
    try {
      await node.drawFor(300);
      const before = maxOf(node.ids());
      const stepAt = Date.now();
      node.stepBack(0.6);
      const within = await node.drawFor(400);
      assert.ok(
        within.length >= 3 && within.every((a) => a.status === 200),
        JSON.stringify(within.map((a) => a.code ?? a.status)),
      );
      assert.ok(within.every((a) => a.ids.every((id) => id > before)));
      // Issued on borrowed time: each ID answered while the server's clock (real time - 600 ms)
      // was still behind the last timestamp has a timestamp ahead of what that clock read.
      const early = within.filter((a) => a.at + a.tookMs < 500);
      assert.ok(early.length > 0);
      for (const answer of early) {
        const clockAtAnswer = stepAt + answer.at + answer.tookMs - 600;
        for (const id of answer.ids)
          assert.ok(
            timestampOf(id) > clockAtAnswer,
            `ID at ${timestampOf(id)}, clock at most ${clockAtAnswer.toFixed(0)}`,
          );
      }
      // Past the lead (3 s more, 3.6 s in all): refused once maxWaitMs is spent.
      node.stepBack(3.6);
      const past = await node.drawFor(800);
      for (const answer of past) assertClockRefusal(answer);
      assert.ok(strictlyIncreasing(node.ids()));
    } finally {
      await node.stop();
    }
  });

  it('history: unique IDs inside the window, refused beyond it', async () => {
    const node = await SteppedServer.start('history', [
      '--rollback-policy',
      'history',
      '--rollback-history-ms',
      '5000',
    ]);
    try {
      await node.drawFor(500);
      const before = maxOf(node.ids());
      node.stepBack(1.5);
      const inside = await node.drawFor(700);
      assert.ok(
        inside.length >= 3 && inside.every((a) => a.status === 200),
        JSON.stringify(inside.map((a) => a.code ?? a.status)),
      );
      // The sequences of earlier milliseconds continue: IDs below the highest issued, none
      // repeated.
      assert.ok(
        inside.flatMap((a) => a.ids).some((id) => id < before),
        'history issued no ID below the earlier ones',
      );
      node.stepBack(8);
      const beyond = await node.drawFor(500);
      for (const answer of beyond) assertClockRefusal(answer);
    } finally {
      await node.stop();
    }
  });

  it('switch-worker: past maxBackwardMs moves to another worker ID', async () => {
    const dir = mkdtempSync(join(root, 'switch-registry-'));
    const node = await SteppedServer.start('switch', [
      '--rollback-policy',
      'switch-worker',
      '--worker-registry',
      `sqlite:${join(dir, 'workers.db')}`,
    ]);
    try {
      await node.drawFor(300);
      const firstWorker = node.answers[0]?.workerId;
      node.stepBack(3);
      const during = await node.drawFor(2000);
      const served = during.filter((a) => a.status === 200);
      for (const answer of during.filter((a) => a.status !== 200)) assertClockRefusal(answer);
      assert.ok(served.length > 0, 'no ID was issued after the switch');
      assert.ok(
        served.every((a) => a.workerId !== firstWorker),
        `still worker ${firstWorker} after the switch`,
      );
    } finally {
      await node.stop();
    }
  });

  it('monotonic: the step back is invisible, IDs keep increasing', async () => {
    assert.ok(faketime !== undefined, `IDMINT_REQUIRE_SERVICES=1 but ${noFaketime}`);
    const node = await SteppedServer.start('monotonic', ['--clock', 'monotonic']);
    try {
      await node.drawFor(300);
      node.stepBack(3);
      const during = await node.drawFor(1000);
      assert.ok(during.length >= 5 && during.every((a) => a.status === 200 && a.tookMs < 1500));
      assert.ok(strictlyIncreasing(node.ids()));
    } finally {
      await node.stop();
    }
  });
});
