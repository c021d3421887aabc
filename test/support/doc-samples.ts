import { readdirSync, readFileSync } from 'node:fs';

/**
 * The code samples of README.md and docs/*.md, and the notation that lets a test compare what a
 * sample shows with what the code does (test/docs-samples.test.ts runs them).
 *
 * The notation, kept light so the docs stay readable:
 *
 * - In a ts/js sample, `expression; // VALUE` or `const x = expression; // VALUE` states the
 *   value. VALUE is a JavaScript literal (`1n`, `'5'`, `{ workerId: 7 }`, `['1002', ...]`),
 *   optionally followed by prose after `, `, `: `, `; `, ` (` or two spaces. Lines of `// ...`
 *   right under a statement continue its comment. A comment that does not start with a literal
 *   is prose, and only the statement is run.
 * - In a shell sample, `command  # VALUE` states the command's output the same way, and
 *   `# ` lines right under a command (or the lines under a `$ command`) are its output.
 * - `like VALUE` (anywhere in the comment) states a value that varies from run to run (IDs,
 *   times): it is compared by shape. Strings by length and character classes (strings with a
 *   space, messages, exactly), numbers by type, objects by their keys, arrays item by item
 *   (records in a list by their keys and types; a list may hold fewer items than the example's,
 *   as a list of recent rates does).
 * - A note on the line above a block (`<!-- ... -->`, unseen on the rendered page) sets up what
 *   the block presumes: requests to the page's server (`GET /v1/tags/order`, several separated by
 *   `; `, a JSON body after the path) or SQL on its SQLite store (`SQL INSERT INTO leaf_alloc`).
 *   A JSON block under requests shows the last one's answer (by shape); settings before them
 *   (`IDMINT_LAYOUT=js-safe GET ...`) are those of the server that answers.
 * - The same note above a paragraph: the paragraph quotes the error message the answer carries.
 *   Every `CODE: message` a page quotes needs one (`CODE: ...` is an abbreviation, not a quote).
 * - A plain block under `<!-- $ command -->` is exactly what the command prints.
 * - JSON log lines: each line the server writes at start-up has the fields the doc shows.
 * - Inside VALUE: `...` as an array item allows more items; as an object entry, more keys; as a
 *   string (`'...'`), any string. A bare key (`{ timestamp, date }`) is a key with any value.
 *   An unquoted ISO time (`2025-10-20T01:00:25.051Z`) is a Date.
 */

/** A fenced code block of a Markdown page. */
export interface DocBlock {
  /** The page, relative to the repository (`README.md`, `docs/api.md`). */
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  /** The info string's first word, lowercased (`ts`, `sh`), or '' for none. */
  readonly lang: string;
  readonly code: string;
  /** The `<!-- ... -->` comment on the line just above the fence, if any (its inside, trimmed). */
  readonly note: string | undefined;
}

const ROOT = new URL('../../', import.meta.url);

/** README.md and every docs/*.md, in a stable order. */
export function docPages(): string[] {
  const docs = readdirSync(new URL('docs/', ROOT))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

export function readPage(file: string): string {
  return readFileSync(new URL(file, ROOT), 'utf8');
}

/** The fenced code blocks of a page (``` fences, any indentation), in order. */
export function docBlocks(file: string, text = readPage(file)): DocBlock[] {
  const lines = text.split('\n');
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,})\s*([\w-]*)/.exec(lines[i] ?? '');
    if (open === null) continue;
    const fence = open[2] ?? '```';
    const indent = (open[1] ?? '').length;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !(lines[j] ?? '').trim().startsWith(fence)) {
      body.push((lines[j] ?? '').slice(indent));
      j++;
    }
    const above = (lines[i - 1] ?? '').trim();
    const note = /^<!--\s*([\s\S]*?)\s*-->$/.exec(above)?.[1];
    blocks.push({
      file,
      line: i + 1,
      lang: (open[3] ?? '').toLowerCase(),
      code: body.join('\n'),
      note,
    });
    i = j;
  }
  return blocks;
}

/** A value stated in a sample's comment, parsed into something to compare with. */
export type Shown =
  | { readonly t: 'str'; readonly v: string }
  | { readonly t: 'num'; readonly v: number }
  | { readonly t: 'big'; readonly v: bigint }
  | { readonly t: 'lit'; readonly v: boolean | null | undefined }
  | { readonly t: 'date'; readonly v: string }
  | { readonly t: 'any' }
  | { readonly t: 'arr'; readonly items: readonly Shown[]; readonly rest: boolean }
  | {
      readonly t: 'obj';
      readonly entries: readonly (readonly [string, Shown])[];
      readonly rest: boolean;
    };

/** What a comment states: a value, compared exactly or by shape (`like`), or nothing (prose). */
export interface Stated {
  readonly value: Shown;
  readonly like: boolean;
  /** The value's text as written. */
  readonly text: string;
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/;

/** Parses a literal at `pos`; returns it and the position after it, or undefined. */
function parseAt(s: string, pos: number): { value: Shown; end: number } | undefined {
  const ws = (p: number) => {
    while (p < s.length && /\s/.test(s[p] ?? '')) p++;
    return p;
  };
  const value = (p: number): { value: Shown; end: number } | undefined => {
    p = ws(p);
    const rest = s.slice(p);
    const c = s[p];
    if (c === "'" || c === '"') {
      let out = '';
      let q = p + 1;
      while (q < s.length && s[q] !== c) {
        if (s[q] === '\\') {
          const next = s[q + 1] ?? '';
          out += next === 'n' ? '\n' : next;
          q += 2;
        } else out += s[q++];
      }
      if (q >= s.length) return undefined;
      return { value: out === '...' ? { t: 'any' } : { t: 'str', v: out }, end: q + 1 };
    }
    if (rest.startsWith('...')) return { value: { t: 'any' }, end: p + 3 };
    const iso = ISO.exec(rest);
    if (iso !== null) return { value: { t: 'date', v: iso[0] }, end: p + iso[0].length };
    const num = /^-?\d+(\.\d+)?(e[+-]?\d+)?(n)?(?![\w.,]\d|\w)/.exec(rest);
    if (num !== null) {
      const text = num[0];
      const parsed: Shown =
        num[3] === 'n' ? { t: 'big', v: BigInt(text.slice(0, -1)) } : { t: 'num', v: Number(text) };
      return { value: parsed, end: p + text.length };
    }
    const word = /^(true|false|null|undefined)\b/.exec(rest);
    if (word !== null) {
      const v =
        word[1] === 'true'
          ? true
          : word[1] === 'false'
            ? false
            : word[1] === 'null'
              ? null
              : undefined;
      return { value: { t: 'lit', v }, end: p + (word[1] ?? '').length };
    }
    if (c === '[') {
      const items: Shown[] = [];
      let rest2 = false;
      let q = ws(p + 1);
      if (s[q] === ']') return { value: { t: 'arr', items, rest: false }, end: q + 1 };
      for (;;) {
        const item = value(q);
        if (item === undefined) return undefined;
        if (item.value.t === 'any' && s.slice(ws(q), ws(q) + 3) === '...') rest2 = true;
        else items.push(item.value);
        q = ws(item.end);
        if (s[q] === ',') q = ws(q + 1);
        if (s[q] === ']') return { value: { t: 'arr', items, rest: rest2 }, end: q + 1 };
        if (q >= s.length) return undefined;
      }
    }
    if (c === '{') {
      const entries: [string, Shown][] = [];
      let more = false;
      let q = ws(p + 1);
      if (s[q] === '}') return { value: { t: 'obj', entries, rest: false }, end: q + 1 };
      for (;;) {
        if (s.startsWith('...', q)) {
          more = true;
          q = ws(q + 3);
        } else {
          const key = /^(?:'([^']*)'|"([^"]*)"|([A-Za-z_$][\w$]*))/.exec(s.slice(q));
          if (key === null) return undefined;
          const name = key[1] ?? key[2] ?? key[3] ?? '';
          q = ws(q + key[0].length);
          if (s[q] === ':') {
            const item = value(q + 1);
            if (item === undefined) return undefined;
            entries.push([name, item.value]);
            q = ws(item.end);
          } else entries.push([name, { t: 'any' }]);
        }
        if (s[q] === ',') q = ws(q + 1);
        if (s[q] === '}') return { value: { t: 'obj', entries, rest: more }, end: q + 1 };
        if (q >= s.length || !/[A-Za-z_$'".]/.test(s[q] ?? '')) return undefined;
      }
    }
    return undefined;
  };
  return value(pos);
}

/** A literal at the start of `text`, if prose does not follow it without a separator. */
function literalAt(text: string): { value: Shown; text: string } | undefined {
  const parsed = parseAt(text, 0);
  if (parsed === undefined) return undefined;
  const after = text.slice(parsed.end);
  if (after.trim() !== '' && !/^(, |: |; | \(|\s{2}|[,.;:]?$)/.test(after)) return undefined;
  return { value: parsed.value, text: text.slice(0, parsed.end).trim() };
}

/** What a sample's comment states, or undefined when it is prose. */
export function statedIn(comment: string): Stated | undefined {
  const text = comment.trim();
  const like = /(?:^|\s)like (.*)$/s.exec(text);
  if (like !== null) {
    const found = literalAt(like[1] ?? '');
    if (found !== undefined) return { value: found.value, like: true, text: found.text };
  }
  const found = literalAt(text);
  return found === undefined ? undefined : { value: found.value, like: false, text: found.text };
}

/**
 * A sample's result as a JSON-safe tree: bigints, Dates, bytes and undefined tagged so that they
 * survive the trip from the process that ran the sample.
 */
export const SERIALIZE_SOURCE = `(value) => JSON.stringify(value, function (key, x) {
  const raw = this[key];
  if (typeof raw === 'bigint') return { $bigint: raw.toString() };
  if (raw instanceof Date) return { $date: raw.toISOString() };
  if (raw instanceof Uint8Array) return { $bytes: raw.length };
  if (raw === undefined) return { $undefined: true };
  return x;
})`;

/** Why `actual` (serialized by SERIALIZE_SOURCE, then parsed) differs from what was stated. */
export function mismatch(actual: unknown, stated: Stated): string | undefined {
  return compare(actual, stated.value, stated.like, '$');
}

function tagged(x: unknown, tag: string): string | undefined {
  if (typeof x !== 'object' || x === null || !(tag in x)) return undefined;
  return String((x as Record<string, unknown>)[tag]);
}

/** A pattern a string of the same shape as `example` matches. */
export function shapeOf(example: string): RegExp {
  const letters = /[A-Za-z]/.test(example);
  let source = '';
  for (const c of example) {
    if (/[0-9]/.test(c)) source += letters ? '[0-9A-Za-z]' : '[0-9]';
    else if (/[a-z]/.test(c)) source += '[0-9a-z]';
    else if (/[A-Z]/.test(c)) source += '[0-9A-Z]';
    else source += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return new RegExp(`^${source}$`);
}

function show(x: unknown): string {
  return JSON.stringify(x) ?? String(x);
}

function compare(actual: unknown, shown: Shown, like: boolean, path: string): string | undefined {
  const fail = (what: string) => `${path}: ${what}, got ${show(actual)}`;
  switch (shown.t) {
    case 'any':
      return undefined;
    case 'str':
      if (typeof actual !== 'string') return fail(`a string ${show(shown.v)}`);
      // Prose (a message) is never an example: it is compared exactly.
      if (like && !shown.v.includes(' '))
        return shapeOf(shown.v).test(actual) ? undefined : fail(`like ${show(shown.v)}`);
      return actual === shown.v ? undefined : fail(show(shown.v));
    case 'num':
      if (typeof actual !== 'number') return fail(`the number ${shown.v}`);
      return like || actual === shown.v ? undefined : fail(String(shown.v));
    case 'big': {
      const big = tagged(actual, '$bigint');
      if (big === undefined) return fail(`the bigint ${shown.v}n`);
      if (like) return shapeOf(String(shown.v)).test(big) ? undefined : fail(`like ${shown.v}n`);
      return big === String(shown.v) ? undefined : fail(`${shown.v}n`);
    }
    case 'date': {
      const date = tagged(actual, '$date') ?? (typeof actual === 'string' ? actual : undefined);
      if (date === undefined) return fail(`the date ${shown.v}`);
      if (like) return ISO.test(date) ? undefined : fail(`a date like ${shown.v}`);
      return date === shown.v ? undefined : fail(shown.v);
    }
    case 'lit': {
      const value = tagged(actual, '$undefined') !== undefined ? undefined : actual;
      return value === shown.v ? undefined : fail(String(shown.v));
    }
    case 'arr': {
      if (!Array.isArray(actual)) return fail('an array');
      if (!shown.rest && !like && actual.length !== shown.items.length)
        return fail(`${shown.items.length} items`);
      if (!like && actual.length < shown.items.length)
        return fail(`at least ${shown.items.length} items`);
      for (const [i, item] of actual.entries()) {
        // Items past the example's are like its last. Records in a list (routes, tags) are
        // examples of their structure (keys, types), in whatever order they come.
        const example = shown.items[i] ?? (like ? shown.items.at(-1) : undefined);
        if (example === undefined) continue;
        const pattern =
          like && (example.t === 'obj' || i >= shown.items.length) ? loosen(example) : example;
        const problem = compare(item, pattern, like, `${path}[${i}]`);
        if (problem !== undefined) return problem;
      }
      return undefined;
    }
    case 'obj': {
      if (typeof actual !== 'object' || actual === null || Array.isArray(actual))
        return fail('an object');
      const record = actual as Record<string, unknown>;
      const keys = shown.entries.map(([key]) => key);
      const missing = keys.filter((key) => !(key in record));
      if (missing.length > 0) return fail(`keys ${missing.join(', ')}`);
      const extra = Object.keys(record).filter((key) => !keys.includes(key));
      if (!shown.rest && extra.length > 0) return fail(`no keys ${extra.join(', ')}`);
      for (const [key, pattern] of shown.entries) {
        const problem = compare(record[key], pattern, like, `${path}.${key}`);
        if (problem !== undefined) return problem;
      }
      return undefined;
    }
  }
}

/** A pattern with its strings any string: the structure of an example, not its text. */
function loosen(shown: Shown): Shown {
  if (shown.t === 'str') return { t: 'any' };
  if (shown.t === 'arr') return { ...shown, items: shown.items.map(loosen) };
  if (shown.t === 'obj')
    return {
      ...shown,
      entries: shown.entries.map(([key, value]) => [key, loosen(value)] as const),
    };
  return shown;
}

/** A `<!-- ... -->` note on its own line above a paragraph (not a code block), and its text. */
export interface ParagraphNote {
  readonly file: string;
  readonly line: number;
  readonly note: string;
  /** The paragraph's text, its lines joined by spaces. */
  readonly paragraph: string;
}

/** The notes above paragraphs of a page. */
export function paragraphNotes(file: string, text = readPage(file)): ParagraphNote[] {
  const lines = text.split('\n');
  const notes: ParagraphNote[] = [];
  let fenced = false;
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] ?? '').trim();
    if (line.startsWith('```')) fenced = !fenced;
    const note = fenced ? null : /^<!--\s*([\s\S]*?)\s*-->$/.exec(line);
    if (note === null || (lines[i + 1] ?? '').trim().startsWith('```')) continue;
    const paragraph: string[] = [];
    for (let j = i + 1; j < lines.length && (lines[j] ?? '').trim() !== ''; j++)
      paragraph.push((lines[j] ?? '').trim());
    notes.push({ file, line: i + 1, note: note[1] ?? '', paragraph: paragraph.join(' ') });
  }
  return notes;
}

/**
 * The error messages a page quotes in code spans, `CODE: message` with a known code, outside
 * code blocks; quotes that end in `...` are abbreviations, not quotes.
 */
export function quotedErrors(
  file: string,
  codes: ReadonlySet<string>,
  text = readPage(file),
): { line: number; quote: string }[] {
  const found: { line: number; quote: string }[] = [];
  let fenced = false;
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim().startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    for (const match of line.matchAll(/`([A-Z][A-Z_]+): ([^`]+)`/g)) {
      const quote = `${match[1]}: ${match[2]}`;
      if (codes.has(match[1] ?? '') && !quote.endsWith('...')) found.push({ line: i + 1, quote });
    }
  }
  return found;
}
