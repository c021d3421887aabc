import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { it } from 'node:test';
import { configKeys } from '../src/config/schema.ts';

/** How docs/configuration.md writes a default. */
function docDefault(value: unknown): string {
  if (value === '' || (Array.isArray(value) && value.length === 0)) return '(none)';
  return `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``;
}

/** How docs/configuration.md writes a key's meaning: the schema's doc line and what it allows. */
function docMeaning(doc: string, allowed: string): string {
  return `${doc} Allowed: ${allowed}.`.replaceAll('|', '\\|');
}

// docs/configuration.md is what operators read: every key of the schema must be in its table with
// the right variable, flag, default, meaning and allowed values (all read from the schema), and the
// table must not list keys that do not exist.
it('docs/configuration.md lists every key: variable, flag, default, values', () => {
  const doc = readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8');
  const rows = new Map<string, string[]>();
  for (const match of doc.matchAll(
    /^\| `([a-zA-Z.]+)` +\| `(IDMINT_[A-Z0-9_]+)` +\| `(--[a-z-]+)` +\| ([^|]+) \| (.+?) *\|$/gm,
  )) {
    rows.set(match[1] ?? '', [
      match[2] ?? '',
      match[3] ?? '',
      (match[4] ?? '').trim(),
      (match[5] ?? '').trim(),
    ]);
  }
  for (const key of configKeys()) {
    assert.deepEqual(
      rows.get(key.key),
      [
        key.spec.env,
        `--${key.flag}`,
        docDefault(key.spec.default),
        docMeaning(key.spec.doc, key.spec.allowed),
      ],
      `docs/configuration.md row for ${key.key}`,
    );
  }
  const known = new Set(configKeys().map((k) => k.key));
  assert.deepEqual(
    [...rows.keys()].filter((key) => !known.has(key)),
    [],
    'documented keys that do not exist',
  );
});
