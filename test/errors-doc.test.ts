import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { it } from 'node:test';
import { ERROR_CODES } from '../src/core/errors.ts';

// docs/errors.md is the contract clients code against: each registered code must be in its table
// with the same status and retryability, and the table must not list codes that do not exist.
// Columns may be padded (Biome aligns the table).
it('every error code is documented in docs/errors.md with its status and retryability', () => {
  const doc = readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8');
  const rows = new Map<string, { status: number; retryable: boolean }>();
  for (const match of doc.matchAll(/^\| `([A-Z_]+)` +\| (\d{3}) +\| (yes|no) +\|/gm)) {
    rows.set(match[1] ?? '', { status: Number(match[2]), retryable: match[3] === 'yes' });
  }
  for (const [code, info] of Object.entries(ERROR_CODES)) {
    assert.deepEqual(
      rows.get(code),
      { status: info.status, retryable: info.retryable },
      `docs/errors.md row for ${code}`,
    );
  }
  assert.deepEqual(
    [...rows.keys()].filter((code) => !(code in ERROR_CODES)),
    [],
    'documented codes that do not exist',
  );
});
