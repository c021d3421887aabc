import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isChecked, longLines, MAX_LINE_LENGTH } from '../scripts/check-line-length.ts';

const SCRIPT = fileURLToPath(new URL('../scripts/check-line-length.ts', import.meta.url));
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

it('flags a line of 101 characters and passes one of 100', () => {
  const text = `${'a'.repeat(MAX_LINE_LENGTH)}\n${'b'.repeat(MAX_LINE_LENGTH + 1)}\n`;
  assert.deepEqual(longLines('x.ts', text), [{ file: 'x.ts', line: 2, length: 101 }]);
});

it('counts characters, not UTF-16 units, and ignores a CR before the newline', () => {
  assert.deepEqual(longLines('x.ts', `${'≡'.repeat(100)}\r\n${'😀'.repeat(60)}\n`), []);
});

it('exempts a comment that is one URL, and not a long comment with a URL in it', () => {
  const url = `https://example.com/${'p'.repeat(100)}`;
  assert.deepEqual(longLines('x.ts', `  // See ${url}\n`), []);
  assert.deepEqual(longLines('x.ts', `   * ${url}\n`), []);
  const prose = `  // ${'word '.repeat(10)}${url}\n`;
  assert.equal(longLines('x.ts', prose).length, 1);
  assert.equal(longLines('x.ts', `const u = '${url}';\n`).length, 1);
});

it('covers the source folders and file types, not docs or JSON', () => {
  assert.equal(isChecked('src/core/snowflake.ts'), true);
  assert.equal(isChecked('src/dashboard/app.css'), true);
  assert.equal(isChecked('scripts/clean-dist.mjs'), true);
  assert.equal(isChecked('docs/errors.md'), false);
  assert.equal(isChecked('src/contract/openapi.json'), false);
  assert.equal(isChecked('node_modules/x/index.js'), false);
});

it('exits 1 and lists file:line:length for each long line of a repository', () => {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-line-length-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'scripts'));
  mkdirSync(join(dir, 'src'));
  copyFileSync(SCRIPT, join(dir, 'scripts/check-line-length.ts'));
  writeFileSync(join(dir, 'src/ok.ts'), 'export const a = 1;\n');
  writeFileSync(join(dir, 'src/long.ts'), `// short\nthrow new Error('${'x'.repeat(120)}');\n`);
  writeFileSync(join(dir, 'notes.ts'), `${'y'.repeat(200)}\n`);
  execFileSync('git', ['init', '-q'], { cwd: dir });
  const run = () =>
    spawnSync(process.execPath, [join(dir, 'scripts/check-line-length.ts')], {
      cwd: dir,
      encoding: 'utf8',
    });
  const failed = run();
  assert.equal(failed.status, 1, failed.stderr);
  assert.match(failed.stderr, /^src\/long\.ts:2: 140 characters \(limit 100\)$/m);
  assert.doesNotMatch(failed.stderr, /notes\.ts|ok\.ts/);
  writeFileSync(join(dir, 'src/long.ts'), '// short\n');
  const passed = run();
  assert.equal(passed.status, 0, passed.stderr);
  assert.equal(passed.stderr, '');
});
