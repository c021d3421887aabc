// A client OS process in local mode: draws IDs of one tag from the servers given until told to
// stop on stdin, then prints every ID it got (one per line) on stdout and a summary on stderr.
// Usage: node local-draw.ts <url,url,...> <tag>
// A RANGES_EXHAUSTED (every server down, nothing held) is waited out and counted: the claim under
// test is that IDs never repeat and increase per client, whatever the servers do.
import { IdMintClient } from '../../src/client/client.ts';
import { isIdMintError } from '../../src/core/errors.ts';

const [urls = '', tag = 'shared'] = process.argv.slice(2);
const client = new IdMintClient({
  urls: urls.split(','),
  timeoutMs: 1000,
  local: {
    initialSize: 50,
    minSize: 20,
    maxSize: 200,
    rangeDurationMs: 200,
    backoffMs: 50,
    maxBackoffMs: 200,
  },
});
const ids: bigint[] = [];
let stop = false;
let exhausted = 0;
process.stdin.on('data', () => {
  stop = true;
});
process.stderr.write('ready\n');
while (!stop) {
  try {
    for (let i = 0; i < 100; i++) ids.push(client.nextIdSync(tag) ?? (await client.nextId(tag)));
  } catch (error) {
    if (!isIdMintError(error, 'RANGES_EXHAUSTED')) throw error;
    exhausted++;
  }
  // A caller does other work between IDs: this keeps a draw going for as long as the test runs.
  await new Promise((resolve) => setTimeout(resolve, 1));
}
process.stdout.write(`${ids.join('\n')}\n`);
process.stderr.write(
  `done ${ids.length} exhausted ${exhausted} ${JSON.stringify(client.localStats().tags)}\n`,
);
process.stdin.destroy();
