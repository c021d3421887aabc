import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { describeWithServices } from './support/services.ts';
import { drawProcess } from './support/draw-process.ts';

const DRAW = fileURLToPath(new URL('./support/segment-draw.ts', import.meta.url));
const PROCESSES = 4;
const COUNT = 5000;
const STEP = 50;

/**
 * Starts segment-draw.ts as a separate OS process: `ready` resolves once it has opened its store,
 * `go()` lets it draw, `ids` resolves to the IDs it printed.
 */
function drawInProcess(
  url: string,
  table: string,
  tag: string,
): { ready: Promise<void>; go(): void; ids: Promise<bigint[]> } {
  const draw = drawProcess(DRAW, [url, table, tag, String(COUNT), String(STEP)]);
  return { ...draw, ids: draw.lines.then((lines) => lines.map((line) => BigInt(line))) };
}

// Uniqueness across processes is the claim that matters most, and async tasks in one process
// cannot prove it: each process here has its own connection pool, buffers and shutdown.
for (const backend of [
  SEGMENT_BACKENDS.postgres,
  SEGMENT_BACKENDS.mariadb,
  SEGMENT_BACKENDS.sqlite,
]) {
  await describeWithServices(
    `segment IDs from ${PROCESSES} OS processes at once: ${backend.name}`,
    backend.services,
    () => {
      it(`${PROCESSES} processes x ${COUNT} IDs of one tag, twice: all distinct`, async (t) => {
        const fixture = await backend.open();
        t.after(() => fixture.dispose());
        await fixture.store.createTag({ tag: 'shared', step: STEP });
        const all = new Set<bigint>();
        let issued = 0;
        // The second round starts after the first shut down (and gave its tails back): a restart.
        // On a loaded machine one process may finish before another starts, so a round whose
        // processes did not overlap is drawn again (every attempt's IDs still count as issued).
        for (let round = 0; round < 2; round++) {
          let overlapped = false;
          for (let attempt = 1; attempt <= 3 && !overlapped; attempt++) {
            const draws = Array.from({ length: PROCESSES }, () =>
              drawInProcess(fixture.url, fixture.table, 'shared'),
            );
            await Promise.all(draws.map((draw) => draw.ready));
            for (const draw of draws) draw.go();
            const results = await Promise.all(draws.map((draw) => draw.ids));
            for (const ids of results) {
              assert.equal(ids.length, COUNT);
              for (let i = 1; i < ids.length; i++)
                assert.ok(
                  (ids[i] as bigint) > (ids[i - 1] as bigint),
                  `not increasing at ${i}: ${ids[i - 1]} then ${ids[i]}`,
                );
              for (const id of ids) all.add(id);
            }
            issued += PROCESSES * COUNT;
            assert.equal(all.size, issued, 'IDs from different processes collided');
            // Proof the processes ran at once: someone else allocated inside a process's span.
            overlapped = results.some(
              (ids) => (ids.at(-1) as bigint) - (ids[0] as bigint) >= BigInt(COUNT),
            );
            if (!overlapped) t.diagnostic(`round ${round} attempt ${attempt}: no overlap`);
          }
          assert.ok(overlapped, `round ${round}: the processes did not overlap in three attempts`);
        }
        const highest = [...all].reduce((a, b) => (a > b ? a : b));
        assert.ok(
          ((await fixture.store.getTag('shared'))?.maxId ?? 0n) > highest,
          'max_id is past every ID issued',
        );
      });
    },
  );
}
