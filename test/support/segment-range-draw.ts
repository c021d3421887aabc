// A child process for the exact-range test: reserves ranges of given sizes for one tag through its
// own store connection and SegmentService, several callers at once, and prints each range as
// `asked start end stride count`, one per line, then shuts down gracefully.
//
//   node segment-range-draw.ts <store-url> <table> <tag> <callers> <rounds> <sizes,...> <maxStep>
import { MonotonicClock } from '../../src/clocks/monotonic-clock.ts';
import { SegmentService } from '../../src/service/segment-service.ts';
import { openSegmentStore } from '../../src/backends/open-segment-store.ts';

const [url = '', table = '', tag = '', callers = '1', rounds = '1', list = '', maxStep = '1'] =
  process.argv.slice(2);
const sizes = list.split(',').map(Number);
const store = await openSegmentStore(url, { table, init: false });
const service = new SegmentService({
  store,
  clock: new MonotonicClock(),
  step: { maxStep: Number(maxStep) },
  tagRefreshMs: 0,
  waitTimeoutMs: 30_000,
  loadTimeoutMs: 30_000,
});
await service.start();
// Draw only on the parent's go (a line on stdin), so every process draws at the same moment.
process.stderr.write('ready\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
process.stdin.destroy();
const lines: string[] = [];
await Promise.all(
  Array.from({ length: Number(callers) }, async (_, caller) => {
    for (let round = 0; round < Number(rounds); round++) {
      const asked = sizes[(caller + round) % sizes.length] as number;
      const run = await service.exactRange(tag, asked);
      lines.push(`${asked} ${run.start} ${run.end} ${run.stride} ${run.count}`);
      // Single IDs between the ranges keep the buffer moving (loads, prefetches, switches).
      service.nextSync(tag) ?? (await service.next(tag));
    }
  }),
);
await service.close();
await store.close();
process.stdout.write(`${lines.join('\n')}\n`);
