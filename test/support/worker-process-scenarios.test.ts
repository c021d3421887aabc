import assert from 'node:assert/strict';
import { it } from 'node:test';
import { composeId, defineLayout, type LayoutSpec } from '../../src/core/layout.ts';
import { killFigures, type PrintedId } from './worker-process-scenarios.ts';

// The SIGKILL scenario's figures are computed over every ID the processes printed: at 200 IDs
// per ms asked for 1.5 s and more, a fast machine prints several hundred thousand of them.
const spec: LayoutSpec = {
  name: 'leading',
  timeBits: 48,
  workerBits: 0,
  sequenceBits: 5,
  totalBits: 53,
  epoch: '2026-01-01T00:00:00Z',
};
const layout = defineLayout(spec);
const T0 = Date.UTC(2026, 5, 1);

/** `count` IDs, 32 per ms from `from`, printed at wall time `from + printedLag`. */
function printed(count: number, from: number, printedLag: number): PrintedId[] {
  return Array.from({ length: count }, (_, i) => {
    const timestamp = from + Math.floor(i / 32);
    return {
      at: from + printedLag,
      id: composeId(layout, { timestamp, workerId: 0, sequence: i % 32 }),
    };
  });
}

it('killFigures handles the 200,000+ IDs a fast machine prints in the SIGKILL scenario', () => {
  const dead = printed(200_000, T0, 0); // 6,250 ms of IDs, all printed at T0: up to 6,249 ms ahead
  const next = printed(200_000, T0 + 7000, 0);
  assert.deepEqual(killFigures(dead, next, spec), {
    lead: 6249,
    deadMax: T0 + 6249,
    nextMin: T0 + 7000,
  });
});
