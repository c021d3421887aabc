import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { it } from 'node:test';
import { MIN_NODE_VERSION, isSupportedNode, unsupportedNodeMessage } from './node-version.ts';

it('compares Node versions numerically against the minimum', () => {
  assert.equal(MIN_NODE_VERSION, '22.13.0');
  for (const ok of ['22.13.0', '22.13.1', '22.20.0', '23.0.0', '24.21.0', '100.0.0'])
    assert.equal(isSupportedNode(ok), true, ok);
  for (const old of ['22.12.9', '22.9.0', '20.20.2', '18.0.0', '4.13.0'])
    assert.equal(isSupportedNode(old), false, old);
  assert.equal(
    unsupportedNodeMessage('20.20.2'),
    'idmint needs Node.js 22.13.0 or later (Node 24 LTS recommended); this is Node.js 20.20.2',
  );
});

it('the executable checks the same minimum before it loads anything', () => {
  // bin/idmint.js runs before any TypeScript can load, so it carries its own copy of the number.
  const bin = readFileSync(new URL('../../bin/idmint.js', import.meta.url), 'utf8');
  const [, major, minor] = /const MIN_NODE = \[(\d+), (\d+)\];/.exec(bin) ?? [];
  assert.equal(`${major}.${minor}.0`, MIN_NODE_VERSION);
  assert.match(
    bin,
    /needs Node\.js \$\{MIN_NODE\.join\('\.'\)\}\.0 or later \(Node 24 LTS recommended\); this/,
  );
});
