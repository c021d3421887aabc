// Every CLI command opens its store and registry through the one composition root
// (src/backends/open-configured.ts), so a command never reads the configuration its own way:
// `idmint decode` on a set of databases reads the set, as `idmint serve` does.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { openSegmentStores } from '../src/backends/open-segment-store.ts';
import { OpaqueCodec, parseOpaqueKeys } from '../src/core/opaque.ts';
import { runIdmint } from './support/cli.ts';

const KEY = '2b7e151628aed2a6abf7158809cf4f3c';

/** The environment without any IDMINT_ configuration the test runner itself may carry. */
function clean(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return { ...env, ...extra };
}

it('idmint decode reads the set segment.stores names, as idmint serve does', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-compose-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const urls = [`sqlite:${join(dir, 'a.db')}`, `sqlite:${join(dir, 'b.db')}`];
  const init = await runIdmint(['db', 'init', '--stores', urls.join(',')], {
    cwd: dir,
    env: clean(),
  });
  assert.equal(init.code, 0, init.stderr);
  const store = await openSegmentStores(urls);
  let dense: bigint;
  try {
    await store.createTag({ tag: 'orders', step: 10, opaque: true });
    dense = (await store.allocate('orders')).start;
  } finally {
    await store.close();
  }
  const id = new OpaqueCodec({ keys: parseOpaqueKeys(`1:${KEY}`) }).encode(dense, 'orders');
  // The working directory holds no ./data/idmint.db: a command reading segment.store instead of
  // the set would find no tag "orders" there.
  const decoded = await runIdmint(['decode', id, '--tag', 'orders', '--json'], {
    cwd: dir,
    env: clean({ IDMINT_SEGMENT_STORES: urls.join(','), IDMINT_OPAQUE_KEYS: `1:${KEY}` }),
  });
  assert.equal(decoded.code, 0, decoded.stderr);
  assert.deepEqual(JSON.parse(decoded.stdout), {
    format: 'opaque-segment',
    tag: 'orders',
    id,
    dense: String(dense),
    keyId: 1,
  });
});

it('no CLI command or service opens a store or registry but through the root', () => {
  const root = new URL('../src/', import.meta.url);
  const files = [
    ...readdirSync(new URL('cli/commands/', root)).map((name) => `cli/commands/${name}`),
    ...readdirSync(new URL('cli/', root))
      .filter((name) => name.endsWith('.ts'))
      .map((n) => `cli/${n}`),
    ...readdirSync(new URL('service/', root)).map((name) => `service/${name}`),
  ].filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts'));
  const wiring = /\b(openSegmentStores?|openWorkerRegistry|openParsedStore|openParsedRegistry)\(/;
  const offenders = files.filter((file) => wiring.test(readFileSync(new URL(file, root), 'utf8')));
  assert.deepEqual(offenders, []);
  assert.ok(files.includes('cli/commands/decode.ts') && files.includes('service/backends.ts'));
});
