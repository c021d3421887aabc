// The line limit Biome's formatter cannot keep: it wraps code at 100 columns but never breaks a
// string literal or a comment, so a paragraph-long error message or comment passes `biome check`.
// `npm run lint` runs this after Biome. It lists each line over the limit as file:line:length and
// exits 1. Error messages stay one sentence; their explanation goes to docs/errors.md.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Biome's `lineWidth` (biome.json): the formatter and this check share one limit. */
export const MAX_LINE_LENGTH = 100;

/** The folders checked and the file types checked in them. */
export const CHECKED_FOLDERS = ['src', 'test', 'bench', 'scripts'];
export const CHECKED_EXTENSIONS = ['.ts', '.tsx', '.mjs', '.js', '.css'];

/**
 * Lines that may be longer because they cannot be split, each with the reason. A line is exempt
 * when, trimmed, it matches one of these; nothing else is, and no file is exempt as a whole.
 */
export const EXEMPTIONS: ReadonlyArray<{ pattern: RegExp; reason: string }> = [
  {
    // A URL broken over two lines no longer opens or greps as one.
    pattern: /^(\/\/|\*) *(\S+ )?<?https?:\/\/\S+>?\.?$/,
    reason: 'a comment that is a single URL (with at most one word before it)',
  },
];

export interface LongLine {
  file: string;
  line: number;
  length: number;
}

/** Returns the lines of `text` over the limit that no exemption covers. */
export function longLines(file: string, text: string, max: number = MAX_LINE_LENGTH): LongLine[] {
  const found: LongLine[] = [];
  const lines = text.split('\n');
  for (const [index, line] of lines.entries()) {
    // Characters, not UTF-16 code units: what an editor's column shows.
    const length = [...line.replace(/\r$/, '')].length;
    if (length <= max) continue;
    const trimmed = line.trim();
    if (EXEMPTIONS.some((exemption) => exemption.pattern.test(trimmed))) continue;
    found.push({ file, line: index + 1, length });
  }
  return found;
}

/** Whether `file` (a path relative to the repository root) is one this check covers. */
export function isChecked(file: string): boolean {
  return (
    CHECKED_FOLDERS.some((folder) => file.startsWith(`${folder}/`)) &&
    CHECKED_EXTENSIONS.some((extension) => file.endsWith(extension))
  );
}

/** Checks `files` (relative to `root`); returns every long line found, in file order. */
export function checkFiles(root: string, files: readonly string[]): LongLine[] {
  return files.flatMap((file) => longLines(file, readFileSync(new URL(file, root), 'utf8')));
}

function main(): void {
  const root = new URL('../', import.meta.url);
  // The files git knows (tracked, and new ones not ignored): dist/ and node_modules/ never count.
  const listed = execFileSync(
    'git',
    ['ls-files', '--cached', '--others', '--exclude-standard', '--', ...CHECKED_FOLDERS],
    { cwd: fileURLToPath(root), encoding: 'utf8' },
  );
  const files = listed
    .split('\n')
    .filter((file) => file !== '' && isChecked(file) && existsSync(new URL(file, root)));
  const found = checkFiles(root.href, files);
  for (const { file, line, length } of found) {
    console.error(`${file}:${line}: ${length} characters (limit ${MAX_LINE_LENGTH})`);
  }
  if (found.length > 0) {
    console.error(
      `check-line-length: ${found.length} line(s) over ${MAX_LINE_LENGTH} characters; ` +
        'split them (long error explanations belong in docs/errors.md)',
    );
    process.exitCode = 1;
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
