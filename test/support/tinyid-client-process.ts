// One application process using TinyId's client (a port of it: tinyid-client.ts), as the issue's
// runs used it: `threads` tasks drawing from one generator until `count` IDs are drawn. A failed
// draw (a server restarting) is retried, as an application calling nextId again would. Prints
// "half" once half are drawn, then writes the IDs, one per line, to `out`, and a summary.
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { CachedIdGenerator, HttpSegmentIdService } from './tinyid-client.ts';

const { server, token, bizType, count, threads, out } = JSON.parse(process.argv[2] ?? '{}') as {
  server: string;
  token: string;
  bizType: string;
  count: number;
  threads: number;
  out: string;
};
const service = new HttpSegmentIdService({ server, token });
const generator = new CachedIdGenerator(bizType, service);
const ids: bigint[] = [];
let failures = 0;
let firstFailure = '';
let halfSaid = false;
await Promise.all(
  Array.from({ length: threads }, async () => {
    while (ids.length < count) {
      try {
        ids.push(await generator.nextId());
      } catch (error) {
        failures++;
        firstFailure ||= error instanceof Error ? error.message : String(error);
        // An application's retry; not a timing assertion.
        await sleep(20);
      }
      if (!halfSaid && ids.length >= count / 2) {
        halfSaid = true;
        process.stdout.write('half\n');
      }
    }
  }),
);
service.close();
writeFileSync(out, ids.join('\n'));
process.stdout.write(`${JSON.stringify({ ids: ids.length, failures, firstFailure })}\n`);
