import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { promisify } from 'node:util';
import { startServe } from './support/serve-process.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'idmint-readme-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The shell lines of the README's quick start that talk to the server, with their `# expected` comments. */
function quickStart(): { command: string; expected: string | undefined }[] {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('\n## ', readme.indexOf('## Quick start') + 1));
  return section
    .split('\n')
    .filter((line) => line.startsWith('curl '))
    .map((line) => {
      const hash = line.indexOf('  # ');
      const comment = hash < 0 ? undefined : line.slice(hash + 4).trim();
      // A comment is an exact expected answer unless it describes one ("a ... like ...").
      return { command: hash < 0 ? line : line.slice(0, hash).trimEnd(), expected: comment !== undefined && !/ like /.test(comment) ? comment : undefined };
    });
}

// The README is what a newcomer pastes; this runs its quick start, as written, against a server
// started with zero configuration in an empty directory (port 8080 swapped for a free one).
it('the README quick start works as written: create a tag, IDs from both modes, decode, restart', async () => {
  const steps = quickStart();
  assert.ok(steps.length >= 5, 'quick start commands found');
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('IDMINT_')) env[key] = value;
  const server = await startServe([], { cwd: dir, env });
  const host = new URL(server.url).host;
  const sh = async (command: string) => (await run('sh', ['-c', command.replaceAll('localhost:8080', host)], { cwd: dir })).stdout;
  try {
    const outputs: string[] = [];
    for (const { command, expected } of steps) {
      const output = await sh(command);
      outputs.push(output);
      if (expected !== undefined) assert.equal(output, expected, command);
      assert.doesNotMatch(output, /"error"/, command);
    }
    assert.match(outputs[3] ?? '', /^[1-9][0-9]{15,18}$/);
    const decoded = JSON.parse(outputs.at(-1) ?? '') as { workerId: number; layout: string };
    assert.equal(decoded.workerId, 0);
    assert.equal(decoded.layout, 'idmint');
  } finally {
    assert.equal(await server.stop('SIGINT'), 0);
  }
  // "Stop it with Ctrl-C: ... the next start continues at 5."
  const again = await startServe([], { cwd: dir, env });
  try {
    assert.equal(await sh(`curl -s ${again.url}/api/segment/get/order`), '5');
  } finally {
    await again.stop();
  }
});
