import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { describeWithServices } from './support/services.ts';
import { drawProcess } from './support/draw-process.ts';
import type { NewTag } from '../src/ports/segment-store.ts';

// A periodic tag drawn by several OS processes at once on every store: the period's row is
// created on demand by whichever process comes first (the others find it, TAG_EXISTS), and the
// formatted IDs of all processes are distinct, each process's increasing, the period dense from 1.

const DRAW = fileURLToPath(new URL('./support/periodic-draw.ts', import.meta.url));
const PROCESSES = 3;
const COUNT = 1000;
const STEP = 20;
/** 2026-11-27 12:00 UTC: every process on this instant, inside day 20261127. */
const AT = Date.UTC(2026, 10, 27, 12);

function drawInProcess(url: string, table: string, tag: string) {
  const args = [url, table, tag, String(COUNT), String(STEP), String(AT)];
  const draw = drawProcess(DRAW, args);
  return { ready: draw.ready, go: () => draw.go(), ids: draw.lines };
}

/** Creates the periodic tag and draws it from {@link PROCESSES} processes started together. */
async function drawAtOnce(
  url: string,
  table: string,
  tag: string,
  store: { createTag: (tag: NewTag) => Promise<unknown> },
): Promise<string[][]> {
  await store.createTag({
    tag,
    step: STEP,
    periodic: { period: 'day', timeZone: 'UTC', template: '{yyyyMMdd}{seq:8}' },
  });
  const draws = Array.from({ length: PROCESSES }, () => drawInProcess(url, table, tag));
  await Promise.all(draws.map((draw) => draw.ready));
  for (const draw of draws) draw.go();
  return Promise.all(draws.map((draw) => draw.ids));
}

for (const backend of Object.values(SEGMENT_BACKENDS)) {
  await describeWithServices(
    `a periodic tag from ${PROCESSES} OS processes at once: ${backend.name}`,
    backend.services,
    () => {
      it(`${PROCESSES} processes x ${COUNT} formatted IDs, one row made on demand`, async (t) => {
        const fixture = await backend.open();
        t.after(() => fixture.dispose());
        // The draws must overlap for the test to mean anything; on a loaded machine one process
        // may finish its draw before another has started, so a draw that did not overlap is made
        // again on a new tag, up to three times.
        let overlapped = false;
        for (let attempt = 1; attempt <= 3 && !overlapped; attempt++) {
          const tag = `orders${attempt}`;
          const results = await drawAtOnce(fixture.url, fixture.table, tag, fixture.store);
          const all = new Set<string>();
          for (const ids of results) {
            assert.equal(ids.length, COUNT);
            for (let i = 0; i < ids.length; i++) {
              assert.match(ids[i] as string, /^20261127\d{8}$/);
              if (i > 0)
                assert.ok((ids[i] as string) > (ids[i - 1] as string), `not increasing at ${i}`);
              all.add(ids[i] as string);
            }
          }
          assert.equal(
            all.size,
            PROCESSES * COUNT,
            'formatted IDs from different processes collided',
          );
          assert.ok(all.has('2026112700000001'), 'the period starts at 1');
          const rows = (await fixture.store.listTags()).map((record) => record.tag);
          assert.deepEqual(
            rows.filter((name) => name.startsWith(`${tag}@`)),
            [`${tag}@20261127`],
          );
          // Proof the processes drew at once: another one's range fell inside a process's span.
          const seq = (id: string | undefined) => Number(id?.slice(8));
          overlapped = results.some((ids) => seq(ids.at(-1)) - seq(ids[0]) >= COUNT);
          if (!overlapped) t.diagnostic(`attempt ${attempt}: the processes did not overlap`);
        }
        assert.ok(overlapped, 'the processes did not overlap in three attempts');
      });
    },
  );
}
