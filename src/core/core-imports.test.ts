import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { it } from 'node:test';

// DESIGN.md: core imports no driver, no server, no `node:` I/O module. The one exception is
// node:crypto in ff1.ts: FF1 needs AES synchronously, which Web Crypto does not offer (CPU work,
// not I/O; see the comment at the top of ff1.ts and docs/formats.md).
const ALLOWED: Readonly<Record<string, readonly string[]>> = { 'ff1.ts': ['node:crypto'] };

it('core modules import only core and ports modules (and node:crypto in ff1.ts)', () => {
  const dir = new URL('./', import.meta.url);
  const offenders: string[] = [];
  for (const file of readdirSync(dir).filter(
    (name) => name.endsWith('.ts') && !name.endsWith('.test.ts'),
  )) {
    const source = readFileSync(new URL(file, dir), 'utf8');
    for (const match of source.matchAll(/^(?:import|export)[^'"]*from\s+'([^']+)'/gm)) {
      const specifier = match[1] ?? '';
      const relative = specifier.startsWith('./') || specifier.startsWith('../ports/');
      if (!relative && !(ALLOWED[file] ?? []).includes(specifier))
        offenders.push(`${file}: ${specifier}`);
    }
  }
  assert.deepEqual(offenders, []);
});
