// A child process for the periodic multi-process tests: draws formatted IDs of one periodic tag
// through its own store connection, SegmentService and PeriodicSegments, all processes on one
// fixed instant (a manual clock: the period is not the subject here, the rows created on demand
// by several processes at once are), prints them one per line, then shuts down gracefully.
//
//   node periodic-draw.ts <store-url> <table> <tag> <count> <step> <clock-ms>
import { ManualClock } from '../../src/clocks/manual-clock.ts';
import { PeriodicSegments } from '../../src/service/periodic-segments.ts';
import { SegmentService } from '../../src/service/segment-service.ts';
import { openSegmentStore } from '../../src/backends/open-segment-store.ts';

const [url = '', table = '', tag = '', count = '0', step = '0', at = '0'] = process.argv.slice(2);
const store = await openSegmentStore(url, { table, init: false });
const clock = new ManualClock(Number(at));
const service = new SegmentService({
  store,
  clock,
  step: { maxStep: Number(step) },
  tagRefreshMs: 0,
  waitTimeoutMs: 30_000,
});
const periodic = new PeriodicSegments({
  service,
  store,
  clock,
  skewMs: 0,
  waitTimeoutMs: 0,
  loadTimeoutMs: 30_000,
});
await service.start();
process.stderr.write('ready\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
process.stdin.destroy();
const ids: string[] = [];
for (let i = 0; i < Number(count); i++) {
  ids.push(periodic.nextSync(tag) ?? (await periodic.next(tag)));
  if (i % 50 === 49) await new Promise((resolve) => setImmediate(resolve));
}
await periodic.settled();
await service.close();
await store.close();
process.stdout.write(`${ids.join('\n')}\n`);
