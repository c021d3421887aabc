// Runs every benchmark in bench/*.bench.ts, one after another, each in its own process so one
// benchmark's heap and JIT state cannot colour the next. Extra arguments are passed through
// (`npm run bench -- --write` updates docs/benchmarks.md; without it the working tree stays clean).
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('.', import.meta.url));
const benches = readdirSync(dir)
  .filter((name) => name.endsWith('.bench.ts'))
  .sort();
let failed = false;
for (const name of benches) {
  process.stderr.write(`\n== ${name}\n`);
  const result = spawnSync(
    process.execPath,
    [...process.execArgv, `${dir}${name}`, ...process.argv.slice(2)],
    { stdio: 'inherit' },
  );
  if (result.status !== 0) failed = true;
}
process.exitCode = failed ? 1 : 0;
