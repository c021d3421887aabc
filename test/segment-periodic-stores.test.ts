import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { describeWithServices } from './support/services.ts';
import { drawProcess } from './support/draw-process.ts';

// A periodic tag drawn by several OS processes at once on every store: the period's row is
// created on demand by whichever process comes first (the others find it, TAG_EXISTS), and the
// formatted IDs of all processes are distinct, each process's increasing, the period dense from 1.

const DRAW = fileURLToPath(new URL('./support/periodic-draw.ts', import.meta.url));
const PROCESSES = 3;
const COUNT = 1000;
const STEP = 20;
/** 2026-11-27 12:00 UTC: every process on this instant, inside day 20261127. */
const AT = Date.UTC(2026, 10, 27, 12);

function drawInProcess(url: string, table: string) {
  const args = [url, table, 'orders', String(COUNT), String(STEP), String(AT)];
  const draw = drawProcess(DRAW, args);
  return { ready: draw.ready, go: () => draw.go(), ids: draw.lines };
}

for (const backend of Object.values(SEGMENT_BACKENDS)) {
  await describeWithServices(
    `a periodic tag from ${PROCESSES} OS processes at once: ${backend.name}`,
    backend.services,
    () => {
      it(`${PROCESSES} processes x ${COUNT} formatted IDs, one row made on demand`, async (t) => {
        const fixture = await backend.open();
        t.after(() => fixture.dispose());
        await fixture.store.createTag({
          tag: 'orders',
          step: STEP,
          periodic: { period: 'day', timeZone: 'UTC', template: '{yyyyMMdd}{seq:8}' },
        });
        const draws = Array.from({ length: PROCESSES }, () =>
          drawInProcess(fixture.url, fixture.table),
        );
        await Promise.all(draws.map((draw) => draw.ready));
        for (const draw of draws) draw.go();
        const results = await Promise.all(draws.map((draw) => draw.ids));
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
        // Proof the processes drew at once: another one's range fell inside a process's span.
        const seq = (id: string | undefined) => Number(id?.slice(8));
        assert.ok(
          results.some((ids) => seq(ids.at(-1)) - seq(ids[0]) >= COUNT),
          'the processes did not overlap',
        );
        const rows = (await fixture.store.listTags()).map((record) => record.tag);
        assert.deepEqual(
          rows.filter((tag) => tag.startsWith('orders@')),
          ['orders@20261127'],
        );
      });
    },
  );
}
