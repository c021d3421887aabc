// The claim of a set of segment databases, proven with OS processes on real services: two
// PostgreSQL databases and one MariaDB database, each behind a TCP proxy; several processes draw
// at once while one database is cut for seconds and then restored. The service never stops, no ID
// repeats, each ID comes from its own database's class, and the database cut serves again once
// back.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import type { SetMemberStore } from '../src/stores/multi/multi-segment-store.ts';
import { openSegmentStore, openSegmentStores } from '../src/backends/open-segment-store.ts';
import { SET_URLS, dropSet, proxied } from './support/segment-sets.ts';
import { describeWithServices, uniqueName } from './support/services.ts';

const DRAW = fileURLToPath(new URL('./support/segment-set-draw.ts', import.meta.url));
const PROCESSES = 4;
const STEP = 50;
const CUT = 1; // the second PostgreSQL database

interface Drawn {
  readonly ids: bigint[];
  readonly errors: number;
  readonly codes: string[];
}

function drawInProcess(urls: readonly string[], table: string, tag: string) {
  const child = spawn(
    process.execPath,
    ['--disable-warning=ExperimentalWarning', DRAW, urls.join(','), table, tag, String(STEP)],
    { stdio: ['pipe', 'pipe', 'pipe'], timeout: 120_000 },
  );
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let ready!: () => void;
  const readiness = new Promise<void>((resolve) => (ready = resolve));
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => {
    err.push(chunk);
    if (Buffer.concat(err).toString().includes('ready\n')) ready();
  });
  const drawn = new Promise<Drawn>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0)
        return reject(
          new Error(`segment-set-draw exited ${code}: ${Buffer.concat(err).toString()}`),
        );
      const line = JSON.parse(Buffer.concat(out).toString()) as {
        ids: string;
        errors: number;
        codes: string[];
      };
      resolve({
        ids: line.ids === '' ? [] : line.ids.split(' ').map((id) => BigInt(id)),
        errors: line.errors,
        codes: line.codes,
      });
    });
  });
  return {
    ready: Promise.race([readiness, drawn.then(() => undefined)]),
    go: () => child.stdin.write('go\n'),
    stop: () => child.stdin.end('stop\n'),
    drawn,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

await describeWithServices(
  'a set of segment databases under OS processes, one database cut and restored',
  ['postgres', 'mysql'],
  () => {
    it(`${PROCESSES} processes, database ${CUT} cut: no failed request, no ID twice`, async (t) => {
      const direct = [SET_URLS.postgresA, SET_URLS.postgresB, SET_URLS.mariadb];
      const table = uniqueName('setp');
      const through = await proxied(direct);
      t.after(async () => {
        await through.close();
        await dropSet(direct, table);
      });
      const admin = await openSegmentStores(through.urls, { table, verify: false });
      await admin.join();
      await admin.createTag({ tag: 'shared', step: STEP });
      await admin.close();
      const rowOf = async (index: number) => {
        const store = (await openSegmentStore(direct[index] as string, {
          table,
          residue: { offset: index, increment: 3 },
        })) as SetMemberStore;
        try {
          return await store.getTag('shared');
        } finally {
          await store.close();
        }
      };

      const draws = Array.from({ length: PROCESSES }, () =>
        drawInProcess(through.urls, table, 'shared'),
      );
      await Promise.all(draws.map((draw) => draw.ready));
      for (const draw of draws) draw.go();
      await sleep(1500);
      through.proxies[CUT]?.cut();
      await sleep(300); // an allocation in flight at the cut has failed by now
      const atCut = (await rowOf(CUT))?.maxId as bigint;
      await sleep(2500);
      assert.equal(
        (await rowOf(CUT))?.maxId,
        atCut,
        'nothing was allocated from the database while it was cut',
      );
      through.proxies[CUT]?.restore();
      await sleep(2500);
      for (const draw of draws) draw.stop();
      const results = await Promise.all(draws.map((draw) => draw.drawn));

      for (const [p, result] of results.entries()) {
        assert.equal(
          result.errors,
          0,
          `process ${p}: ${result.errors} requests failed (${result.codes.join(', ')}): the ` +
            `service stopped`,
        );
        assert.ok(result.ids.length > 5000, `process ${p} drew ${result.ids.length} IDs`);
        for (let r = 0n; r < 3n; r++) {
          const mine = result.ids.filter((id) => id % 3n === r);
          for (let i = 1; i < mine.length; i++)
            assert.ok(
              (mine[i] as bigint) > (mine[i - 1] as bigint),
              `process ${p}, class ${r}: ${mine[i - 1]} then ${mine[i]}`,
            );
        }
      }
      const all = results.flatMap((result) => result.ids);
      assert.equal(new Set(all).size, all.length, 'an ID was issued twice');
      // Each ID is in its database's class and below that database's max_id; the database cut
      // served again after the restore (IDs of its class above where it stood while cut).
      for (let index = 0; index < 3; index++) {
        const row = await rowOf(index);
        assert.deepEqual(row?.residue, { offset: index, increment: 3 });
        const mine = all.filter((id) => id % 3n === BigInt(index));
        assert.ok(mine.length > 0, `database ${index} served`);
        assert.ok(
          mine.every((id) => id < (row?.maxId as bigint)),
          `database ${index}: every ID of its class is below its max_id ${row?.maxId}`,
        );
      }
      assert.ok(
        all.some((id) => id % 3n === BigInt(CUT) && id >= atCut),
        'the database cut serves again once restored',
      );
    });
  },
);
