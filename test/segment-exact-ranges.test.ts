// Exact-size ranges (SegmentService.exactRange, the range route's source) from several OS
// processes on one real store at once: every answer holds exactly the IDs asked, and no ID is in
// two answers, whether it came from a buffered range or from an allocation of its own.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { describeWithServices } from './support/services.ts';
import { drawProcess } from './support/draw-process.ts';

const DRAW = fileURLToPath(new URL('./support/segment-range-draw.ts', import.meta.url));
const PROCESSES = 3;
const CALLERS = 4;
const ROUNDS = 12;
const STEP = 40;
/** Below, at and above the step, and above the buffer's two ranges: both sources are exercised. */
const SIZES = [1, 7, 39, 40, 41, 95, 130, 3];
/** maxStep, so the largest size is allowed and the dynamic step stays near the stored one. */
const MAX_STEP = 160;

interface Answer {
  readonly asked: number;
  readonly start: bigint;
  readonly end: bigint;
  readonly stride: bigint;
  readonly count: number;
}

function drawInProcess(url: string, table: string, tag: string) {
  const args = [String(CALLERS), String(ROUNDS), SIZES.join(','), String(MAX_STEP)];
  const draw = drawProcess(DRAW, [url, table, tag, ...args]);
  const answers = draw.lines.then((lines) =>
    lines.map((line): Answer => {
      const [asked, start, end, stride, count] = line.split(' ');
      return {
        asked: Number(asked),
        start: BigInt(start ?? ''),
        end: BigInt(end ?? ''),
        stride: BigInt(stride ?? ''),
        count: Number(count),
      };
    }),
  );
  return { ready: draw.ready, go: () => draw.go(), answers };
}

for (const backend of Object.values(SEGMENT_BACKENDS)) {
  await describeWithServices(
    `exact ranges from ${PROCESSES} OS processes at once: ${backend.name}`,
    backend.services,
    () => {
      const title =
        `${PROCESSES} processes x ${CALLERS} callers x ${ROUNDS} ranges of ` +
        `${SIZES.join('/')} (step ${STEP}): each exact, none overlapping`;
      it(title, async (t) => {
        const fixture = await backend.open();
        t.after(() => fixture.dispose());
        await fixture.store.createTag({ tag: 'blocks', step: STEP });
        const draws = Array.from({ length: PROCESSES }, () =>
          drawInProcess(fixture.url, fixture.table, 'blocks'),
        );
        await Promise.all(draws.map((draw) => draw.ready));
        for (const draw of draws) draw.go();
        const results = await Promise.all(draws.map((draw) => draw.answers));
        const seen = new Set<bigint>();
        let larger = 0;
        for (const answers of results) {
          assert.equal(answers.length, CALLERS * ROUNDS);
          for (const answer of answers) {
            assert.equal(answer.count, answer.asked, 'a range of the size asked');
            assert.equal(answer.end - answer.start, BigInt(answer.count) * answer.stride);
            if (answer.asked > STEP) larger++;
            for (let id = answer.start; id < answer.end; id += answer.stride) {
              assert.ok(!seen.has(id), `ID ${id} is in two ranges`);
              seen.add(id);
            }
          }
        }
        assert.ok(larger > 0, 'some ranges were larger than a stored range');
        const highest = [...seen].reduce((a, b) => (a > b ? a : b));
        assert.ok(
          ((await fixture.store.getTag('blocks'))?.maxId ?? 0n) > highest,
          'max_id is past every ID reserved',
        );
      });
    },
  );
}
