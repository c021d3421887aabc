import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { startServe, type ServeProcess } from './support/serve-process.ts';
import { REQUIRE_SERVICES } from './support/services.ts';
import { findLibfaketime } from './support/worker-processes.ts';

/**
 * A periodic tag's day boundary across two `idmint serve` processes whose wall clocks are set
 * apart by libfaketime (issue 24): node A runs DAY_AHEAD_S seconds ahead of the real time, node B
 * one second more. Both draw from one SQLite file through the boundary. Every answer is placed on
 * each node's clock by the real times the test sent and received it (this process is not faked):
 * no ID of the new day may come back before the slowest clock passed midnight, and none of the old
 * day may be asked for after the fastest clock passed midnight plus the allowed skew.
 */

const faketime = findLibfaketime();
const noFaketime = 'libfaketime not found (apt-get install faketime, or scripts/services.sh up)';
if (faketime === undefined && !REQUIRE_SERVICES)
  process.stderr.write(`\n!!! SKIPPING the periodic boundary tests: ${noFaketime}\n`);
const skip = faketime === undefined && !REQUIRE_SERVICES ? noFaketime : false;

/** Node B's clock runs this far ahead of node A's: within the allowed skew. */
const APART_MS = 1000;
const SKEW_MS = 2000;
/** How long before midnight (node A's clock) the draws start. */
const LEAD_MS = 4000;

interface Answer {
  readonly node: 'A' | 'B';
  readonly sentAt: number;
  readonly receivedAt: number;
  readonly status: number;
  readonly period?: string;
  readonly ids: readonly string[];
  readonly code?: string;
}

describe('a periodic tag across a day boundary, two servers with clocks apart (libfaketime)', {
  skip,
}, () => {
  const root = mkdtempSync(join(tmpdir(), 'idmint-periodic-'));
  const servers: ServeProcess[] = [];
  after(async () => {
    for (const server of servers) await server.stop('SIGTERM');
    rmSync(root, { recursive: true, force: true });
  });

  const start = async (name: string, offsetFile: string): Promise<ServeProcess> => {
    assert.ok(faketime !== undefined, `IDMINT_REQUIRE_SERVICES=1 but ${noFaketime}`);
    writeFileSync(offsetFile, '+0\n');
    const env: NodeJS.ProcessEnv = {
      LD_PRELOAD: faketime,
      FAKETIME_TIMESTAMP_FILE: offsetFile,
      FAKETIME_NO_CACHE: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
      IDMINT_SNOWFLAKE_ENABLED: 'false',
      IDMINT_SEGMENT_STORE: `sqlite:${join(root, 'ids.db')}`,
      IDMINT_SEGMENT_PERIOD_SKEW_MS: String(SKEW_MS),
    };
    for (const key of Object.keys(process.env))
      if (key.startsWith('IDMINT_') && !(key in env)) env[key] = '';
    const server = await startServe([], { cwd: mkdtempSync(join(root, `${name}-`)), env });
    servers.push(server);
    return server;
  };

  /**
   * Moves a node's wall clock `seconds` ahead of the real time (libfaketime reads the file on each
   * read).
   */
  const setOffset = (file: string, seconds: number) => {
    writeFileSync(`${file}.tmp`, `+${seconds}\n`);
    renameSync(`${file}.tmp`, file);
  };

  it('no new-day ID before midnight by any clock, no old-day ID past midnight + skew', async () => {
    const fileA = join(root, 'a.rc');
    const fileB = join(root, 'b.rc');
    const a = await start('a', fileA);
    const b = await start('b', fileB);
    const created = await fetch(`${a.url}/v1/tags`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        tag: 'orders',
        step: 20,
        periodic: { period: 'day', timeZone: 'UTC', template: '{yyyyMMdd}{seq:8}' },
      }),
    });
    assert.equal(created.status, 201, await created.text());

    // A midnight at least a day away, so neither clock's real day matters: node A's clock is
    // set LEAD_MS before it, node B's APART_MS further on.
    const now = Date.now();
    const midnight = (Math.floor(now / 86_400_000) + 2) * 86_400_000;
    const offsetS = Math.round((midnight - LEAD_MS - now) / 1000);
    const offsetA = offsetS * 1000;
    const offsetB = offsetA + APART_MS;
    setOffset(fileA, offsetS);
    setOffset(fileB, offsetS + APART_MS / 1000);
    // Each server's clock follows a forward step of the wall clock at its next re-sync (1 s).
    await delay(1500);

    const answers: Answer[] = [];
    const draw = async (node: 'A' | 'B', server: ServeProcess) => {
      // Until the slowest clock is well past midnight plus the skew: real time, not the node's.
      while (Date.now() + offsetA < midnight + SKEW_MS + APART_MS + 1000) {
        const sentAt = Date.now();
        const response = await fetch(`${server.url}/v1/segment/orders?count=3`);
        const receivedAt = Date.now();
        const body = (await response.json()) as {
          period?: string;
          ids?: string[];
          error?: { code: string };
        };
        answers.push({
          node,
          sentAt,
          receivedAt,
          status: response.status,
          ids: body.ids ?? [],
          ...(body.period === undefined ? {} : { period: body.period }),
          ...(body.error === undefined ? {} : { code: body.error.code }),
        });
        await delay(5);
      }
    };
    await Promise.all([draw('A', a), draw('B', b)]);

    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');
    const oldDay = day(midnight - 1);
    const newDay = day(midnight);
    for (const answer of answers) {
      const show = JSON.stringify(answer);
      if (answer.status !== 200) {
        // The pause after the boundary, and nothing else.
        assert.equal(answer.code, 'PERIOD_SWITCHING', show);
        continue;
      }
      assert.ok(answer.period === oldDay || answer.period === newDay, show);
      for (const id of answer.ids) assert.ok(id.startsWith(answer.period ?? '?'), show);
      if (answer.period === newDay)
        // The slowest clock (A's) had passed midnight by the time the answer arrived.
        assert.ok(answer.receivedAt + offsetA >= midnight, `new-day ID too early: ${show}`);
      // Asked for before the fastest clock (B's) passed midnight plus the skew.
      else assert.ok(answer.sentAt + offsetB < midnight + SKEW_MS, `old-day ID too late: ${show}`);
    }
    // The run crossed the boundary on both nodes: each answered both days.
    for (const node of ['A', 'B'] as const)
      for (const period of [oldDay, newDay])
        assert.ok(
          answers.some((x) => x.node === node && x.period === period),
          `node ${node} answered no ID of ${period}`,
        );
    const ids = answers.flatMap((x) => x.ids);
    assert.equal(new Set(ids).size, ids.length, 'an ID was answered twice');
    // Each day's sequence starts at 1 (whichever node drew first).
    const seqs = ids.filter((id) => id.startsWith(newDay)).map((id) => Number(id.slice(8)));
    assert.equal(Math.min(...seqs), 1);
  });
});
