// A child process for the multi-process tests: draws IDs for one tag through its own store
// connection and SegmentService, prints them one per line, then shuts down gracefully.
//
//   node segment-draw.ts <store-url> <table> <tag> <count> <step>
import { MonotonicClock } from '../../src/clocks/monotonic-clock.ts';
import { SegmentService } from '../../src/service/segment-service.ts';
import { openSegmentStore } from '../../src/backends/open-segment-store.ts';

const [url = '', table = '', tag = '', count = '0', step = '0'] = process.argv.slice(2);
const store = await openSegmentStore(url, { table, init: false });
// A fixed small step (maxStep = step) keeps every process going back to the database, so their
// allocations interleave instead of one process taking a huge range and finishing alone.
const service = new SegmentService({
  store,
  clock: new MonotonicClock(),
  step: { maxStep: Number(step) },
  tagRefreshMs: 0,
  waitTimeoutMs: 30_000,
});
await service.start();
// Draw only on the parent's go (a line on stdin), so every process draws at the same moment
// however long each took to start on a busy machine.
process.stderr.write('ready\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
process.stdin.destroy();
const ids: bigint[] = [];
for (let i = 0; i < Number(count); i++) {
  ids.push(service.nextSync(tag) ?? (await service.next(tag)));
  // Yield now and then, so a process cannot finish its whole draw within one time slice.
  if (i % 50 === 49) await new Promise((resolve) => setImmediate(resolve));
}
await service.close();
await store.close();
process.stdout.write(`${ids.join('\n')}\n`);
