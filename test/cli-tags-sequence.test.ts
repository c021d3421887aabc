// `idmint tags create/set --delta --remainder`: TinyId's sequence from the command line, stored so
// that the tag issues only its class, and refused with the reason when the pair cannot be one.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { openSegmentStore } from '../src/backends/open-segment-store.ts';
import { runIdmint } from './support/cli.ts';

function clean(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return env;
}

it('creates and changes a tag with --delta and --remainder, and refuses a bad pair', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-cli-sequence-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const url = `sqlite:${join(dir, 'ids.db')}`;
  const idmint = (...args: string[]) =>
    runIdmint(['tags', ...args, '--store', url], { env: clean(), cwd: dir });

  const created = await idmint(
    'create',
    'odd',
    '--step',
    '3',
    '--delta',
    '2',
    '--remainder',
    '1',
    '--json',
  );
  assert.equal(created.code, 0, created.stderr);
  const record = JSON.parse(created.stdout) as { delta: number; remainder: number };
  assert.deepEqual([record.delta, record.remainder], [2, 1]);

  const store = await openSegmentStore(url);
  t.after(() => store.close());
  const first = await store.allocate('odd');
  assert.deepEqual([first.start, first.end, first.stride], [1n, 7n, 2]);

  const changed = await idmint('set', 'odd', '--delta', '3', '--remainder', '2', '--json');
  assert.equal(changed.code, 0, changed.stderr);
  assert.match(changed.stdout, /"delta":3,"remainder":2/);
  const next = await store.allocate('odd');
  assert.equal(next.start % 3n, 2n);
  assert.equal(next.stride, 3);

  for (const [args, message] of [
    [
      ['set', 'odd', '--delta', '2', '--remainder', '2'],
      /--remainder must be an integer from 0 to 1/,
    ],
    [['set', 'odd', '--remainder', '1'], /--remainder needs --delta/],
    [['create', 'x', '--step', '3', '--delta', '65'], /--delta must be an integer from 1 to 64/],
    [['set', 'odd'], /nothing to set/],
    [['set-step', 'odd', '4', '--delta', '2'], /belong to "idmint tags create" and/],
  ] as const) {
    const refused = await idmint(...args);
    assert.equal(refused.code, 2, `${args.join(' ')}: ${refused.stderr}`);
    assert.match(refused.stderr, message);
  }
  assert.equal((await store.getTag('odd'))?.delta, 3, 'a refused change changes nothing');
});
