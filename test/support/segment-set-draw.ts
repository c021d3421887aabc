// A child process for the multi-process set test: opens the set of segment databases at the URLs
// given (checked at start-up like `idmint serve`), draws IDs of one tag at a steady pace until told
// to stop, counting every failed request, then shuts down gracefully and prints one JSON line:
// { ids: "<id> <id> ...", errors: n, codes: [...] }.
//
//   node segment-set-draw.ts <url,url,...> <table> <tag> <step>
import { MonotonicClock } from '../../src/clocks/monotonic-clock.ts';
import { SegmentService } from '../../src/service/segment-service.ts';
import { openSegmentStores } from '../../src/backends/open-segment-store.ts';

const [urls = '', table = '', tag = '', step = '0'] = process.argv.slice(2);
const store = await openSegmentStores(urls.split(','), { table, timeoutMs: 2000 });
// A fixed small step keeps every process going back to the databases many times a second, so a
// database cut for seconds is met by hundreds of allocations.
const service = new SegmentService({
  store,
  clock: new MonotonicClock(),
  step: { maxStep: Number(step) },
  tagRefreshMs: 0,
  waitTimeoutMs: 10_000,
  retryAfterMs: 200,
});
await service.start();
process.stderr.write('ready\n');
let stopping = false;
// The first line on stdin is the go, the second (or the end of stdin) the stop.
let lines = 0;
let go!: () => void;
const started = new Promise<void>((resolve) => (go = resolve));
process.stdin.on('data', (chunk: Buffer) => {
  lines += chunk.toString().split('\n').length - 1;
  if (lines >= 1) go();
  if (lines >= 2) stopping = true;
});
process.stdin.on('end', () => {
  go();
  stopping = true;
});
await started;
const ids: bigint[] = [];
const codes = new Set<string>();
let errors = 0;
while (!stopping) {
  // About 2,000 IDs a second: ten every 5 ms.
  for (let i = 0; i < 10; i++) {
    try {
      ids.push(service.nextSync(tag) ?? (await service.next(tag)));
    } catch (error) {
      errors++;
      codes.add((error as { code?: string }).code ?? String(error));
    }
  }
  await new Promise((resolve) => setTimeout(resolve, 5));
}
const report = await service.close();
await store.close();
const released = report.releasedIds;
process.stdout.write(
  `${JSON.stringify({ ids: ids.join(' '), errors, codes: [...codes], released })}\n`,
);
process.exit(0);
