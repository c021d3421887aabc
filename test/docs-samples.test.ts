import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { DatabaseSync } from 'node:sqlite';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../src/config/load.ts';
import { configKeys } from '../src/config/schema.ts';
import { ERROR_CODES } from '../src/core/errors.ts';
import { IDMINT_BIN } from './support/cli.ts';
import {
  type DocBlock,
  docBlocks,
  docPages,
  mismatch,
  paragraphNotes,
  quotedErrors,
  SERIALIZE_SOURCE,
  type Stated,
  shapeOf,
  statedIn,
} from './support/doc-samples.ts';
import { startServe, type ServeProcess } from './support/serve-process.ts';
import { REQUIRE_SERVICES, reachable, SERVICES, uniqueName } from './support/services.ts';

// Every code block of README.md and docs/*.md is run or checked here, as written, and what its
// comments say it shows is compared with what it does (the notation: test/support/doc-samples.ts).
// Each page gets a directory and, when it talks to one, an `idmint serve` of its own; its blocks
// run in page order, as a newcomer would follow it. New blocks are picked up by their language.

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Blocks that are not run, by page and a text they contain, each with why. Keep it short. */
const NOT_RUN: readonly { file: string; contains: string; why: string }[] = [
  {
    file: 'docs/workers.md',
    contains: 'is in use on this host by pid',
    why: 'pids, hosts and times of another process (test/registries/ checks these messages)',
  },
  {
    file: 'docs/segments.md',
    contains: '--replace 2',
    why: 'needs a set of three databases, one lost (test/segment-set-members.test.ts)',
  },
  {
    file: 'docs/operations.md',
    contains: '$ idmint db history',
    why: 'a database after a promotion and two fences (test/segment-failover.test.ts makes one)',
  },
  {
    file: 'docs/backends.md',
    contains: 'postgres at 127.0.0.1:5433: connection refused',
    why: 'four failing backends (test/backend-failures.test.ts produces each of these lines)',
  },
  {
    file: 'docs/api.md',
    contains: 'idmint db import --from-tinyid',
    why: "needs TinyId's own database (test/tinyid-import.test.ts loads db.sql into MariaDB, PG)",
  },
  {
    file: 'docs/dashboard.md',
    contains: '"idsPerSecond"',
    why: 'rates are null until the status sampler ticks (1 s); server-status.test.ts checks them',
  },
];

/** Shell commands that are not run, by how they start (and page), with why. */
const COMMANDS_NOT_RUN: readonly { start: RegExp; why: string; file?: string }[] = [
  {
    file: 'README.md',
    start: /^(npx )?idmint next\b/,
    why: 'test/readme.test.ts runs these, alone and beside a server, and decodes their IDs',
  },
  { start: /^git clone\b/, why: 'fetches the repository this test runs in' },
  { start: /^npm (install|ci)\b/, why: 'installs what this test already runs on' },
  { start: /^npm test\b/, why: 'runs this test' },
  { start: /^docker\b/, why: 'needs Docker (test/server-container.test.ts builds the image)' },
  {
    start: /idmint decode <opaque id>/,
    why: "an opaque ID of the tag is the reader's (test/cli-families.test.ts decodes one)",
  },
  {
    start: /^(\S+=\S+\s+)*(npx )?idmint serve\b|^npm start\b/,
    why: "a server that runs until stopped: the page's own `idmint serve` stands for it",
  },
];

/**
 * The one place where samples are changed before they run: hosts and ports of the docs'
 * examples become this test's server and the loopback services (each page with names of its
 * own), and placeholders get real values.
 */
function rewrite(code: string, page: Page): string {
  return placeholders(code)
    .replace(/https?:\/\/(localhost|127\.0\.0\.1|idmint-[ab]):8080/g, () => page.url())
    .replace(/\b(localhost|127\.0\.0\.1):8080\b/g, () => new URL(page.url()).host)
    .replace(/postgres:\/\/[^\s'",]+/g, SERVICES.postgres.url)
    .replace(/mysql:\/\/[^\s'",]+/g, SERVICES.mysql.url)
    .replace(/rediss?:\/\/[^\s'",]+/g, SERVICES.redis.url)
    .replace(/etcd:\/\/[^\s'",]+/g, `etcd://127.0.0.1:2379/${page.name}`)
    .replace(
      /zookeeper:\/\/[^\s'"/]+\/[\w.-]+/g,
      `zookeeper://${SERVICES.zookeeper.url}/${page.name}`,
    );
}

const KEY = '00112233445566778899aabbccddeeff';
/** Opaque keys 1 and 2, for the samples that read IDMINT_OPAQUE_KEYS. */
const OPAQUE_KEYS = `1:${KEY},2:ffeeddccbbaa99887766554433221100`;

/** Placeholders the docs leave to the reader, given values. */
function placeholders(code: string): string {
  return code.replaceAll('<32 hex>', KEY).replaceAll('<hex>', KEY);
}

/** The services a sample reaches once rewritten, by the URLs it names. */
function servicesOf(code: string): (keyof typeof SERVICES)[] {
  const names = ['postgres', 'mysql', 'redis', 'etcd', 'zookeeper'] as const;
  return names.filter((name) => new RegExp(`\\b${name}://`).test(code));
}

/** Where the package's entry points are in the sources: `idmint/client` -> src/client/client.ts. */
const ENTRIES = (() => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    exports: Record<string, { default?: string } | string>;
  };
  const entries = new Map<string, string>();
  for (const [path, target] of Object.entries(pkg.exports)) {
    const file = typeof target === 'string' ? target : target.default;
    if (file === undefined || !file.startsWith('./dist/')) continue;
    const source = join(ROOT, 'src', file.slice('./dist/'.length).replace(/\.js$/, '.ts'));
    entries.set(path === '.' ? 'idmint' : `idmint/${path.slice(2)}`, pathToFileURL(source).href);
  }
  return entries;
})();

/**
 * What a sample uses without declaring it (it continues an earlier one, or leaves it to the
 * reader): declared before it runs, only when it uses the name and does not declare it.
 */
const GIVEN: Record<string, string> = {
  generator: 'const generator = new __idmint.SnowflakeGenerator({ workerId: 1 });',
  url: 'const url = `${__server}/v1/segment/order?count=3`;',
  key: 'const key = new Uint8Array(16).fill(7);',
  tweak: 'const tweak = new Uint8Array(0);',
  numerals: 'const numerals = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];',
  myPgPool:
    `const { default: pg } = await import('${import.meta.resolve('pg')}');\n` +
    `const myPgPool = new pg.Pool({ connectionString: '${SERVICES.postgres.url}' });`,
  IdMintClient: `const { IdMintClient } = await import('${ENTRIES.get('idmint/client')}');`,
};

/**
 * What every page's server has beyond a newcomer's zero configuration: opaque keys, which the
 * docs' opaque samples assume.
 */
const SERVER_ENV = { IDMINT_OPAQUE_KEYS: OPAQUE_KEYS };

/** A page's directory, its server (started on first use) and its environment. */
class Page {
  readonly dir: string;
  readonly name: string;
  readonly env: Record<string, string> = {};
  readonly file: string;
  readonly #servers = new Map<string, Promise<ServeProcess>>();
  #url: string | undefined;

  constructor(file: string) {
    this.file = file;
    this.dir = mkdtempSync(join(tmpdir(), 'idmint-docs-'));
    // Short: it names tables (63 characters at most), and `_workers` is added to it.
    this.name = uniqueName(`docs_${file.replace(/^docs\//, '').replace(/\W/g, '_')}`).toLowerCase();
    for (const sub of ['code', 'cli', 'locks']) mkdirSync(join(this.dir, sub));
  }

  /** The environment a newcomer's shell would have: none of the test run's IDMINT_* settings. */
  processEnv(exported = true): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const [key, value] of Object.entries(process.env))
      if (!key.startsWith('IDMINT_')) env[key] = value;
    // Tables, keys and worker IDs of this page's own in the shared services (the segment table
    // is also the Redis store's key prefix), and worker-ID locks of its own.
    env['IDMINT_SEGMENT_TABLE'] = this.name;
    env['IDMINT_WORKER_TABLE'] = `${this.name}_workers`;
    env['IDMINT_WORKER_CLUSTER'] = this.name;
    env['IDMINT_WORKER_LOCK_DIR'] = join(this.dir, 'locks');
    return exported ? { ...env, ...this.env } : env;
  }

  /**
   * The page's server, started on first use. Answers shown as examples (JSON blocks under a
   * request note) come from a second one, so that they do not move the walkthrough's IDs.
   */
  async server(role = 'walkthrough', settings: Record<string, string> = {}): Promise<ServeProcess> {
    const key = [role, ...Object.entries(settings).map(([name, value]) => `${name}=${value}`)];
    let server = this.#servers.get(key.join(' '));
    if (server === undefined) {
      // Each server in a directory and with worker-ID locks of its own: each is worker 0.
      const cwd = join(this.dir, `${role}-${this.#servers.size}`);
      mkdirSync(join(cwd, 'locks'), { recursive: true });
      const env = {
        // What the page exported is for its walkthrough; an answer's settings are in its note.
        ...this.processEnv(role === 'walkthrough'),
        ...SERVER_ENV,
        ...settings,
        IDMINT_WORKER_LOCK_DIR: join(cwd, 'locks'),
      };
      server = startServe([], { cwd, env, timeoutMs: 120_000 });
      this.#servers.set(key.join(' '), server);
      if (role === 'walkthrough') this.walkthroughDir = cwd;
    }
    const started = await server;
    if (role === 'walkthrough') this.#url = started.url;
    return started;
  }

  url(): string {
    if (this.#url === undefined) throw new Error('the server is not started');
    return this.#url;
  }

  /** The walkthrough server's directory, once started. */
  walkthroughDir = '';

  /** Services the page's samples reached, whose data it removes when done. */
  readonly used = new Set<keyof typeof SERVICES>();

  async close(): Promise<void> {
    for (const server of this.#servers.values()) await (await server).stop();
    rmSync(this.dir, { recursive: true, force: true });
    if (this.used.has('postgres')) {
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: SERVICES.postgres.url });
      await client.connect();
      try {
        await client.query(`DROP TABLE IF EXISTS ${this.name}`);
      } finally {
        await client.end();
      }
    }
  }
}

/** True when a block talks to an idmint server. */
function needsServer(block: DocBlock): boolean {
  const code = /^(ts|js)/.test(block.lang) ? block.code.replace(/(^|\s)\/\/.*$/gm, '') : block.code;
  return /(localhost|127\.0\.0\.1|idmint-[ab]):8080|npm start|\bfetch\(url\b/.test(code);
}

const skippedServices = new Map<string, Promise<string | undefined>>();
/** Why a sample that needs `services` cannot run here, or undefined; throws under REQUIRE. */
async function servicesMissing(services: readonly (keyof typeof SERVICES)[]) {
  for (const name of services) {
    let probe = skippedServices.get(name);
    if (probe === undefined) {
      probe = reachable(name).then((ok) => (ok ? undefined : `${name} is unreachable`));
      skippedServices.set(name, probe);
    }
    const reason = await probe;
    if (reason === undefined) continue;
    if (REQUIRE_SERVICES) throw new Error(`IDMINT_REQUIRE_SERVICES=1 but ${reason}`);
    process.stderr.write(`\n!!! SKIPPING a docs sample: ${reason}\n`);
    return reason;
  }
  return undefined;
}

// ---- TypeScript and JavaScript samples ------------------------------------------------------

interface Shown {
  readonly line: number;
  readonly source: string;
  readonly stated: Stated;
}

/**
 * A sample as a module: imports of the package point at the sources, each statement whose comment
 * states a value reports it (`__show`), and what the sample uses undeclared is given first.
 */
function instrument(block: DocBlock, page: Page): { code: string; shown: Shown[] } {
  const lines = rewrite(block.code, page).split('\n');
  const shown: Shown[] = [];
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const at = block.line + 1 + i;
    let comment: string | undefined;
    let statement = line;
    const inline = /^(\s*)(\S.*?;)\s*\/\/(.*)$/.exec(line);
    if (inline !== null) {
      statement = `${inline[1]}${inline[2]}`;
      comment = inline[3] ?? '';
    } else if (/;\s*$/.test(line) && /^\s*\/\/ /.test(lines[i + 1] ?? '')) {
      // Comment lines right under a statement say what it shows.
      comment = '';
      while (/^\s*\/\/ /.test(lines[i + 1] ?? '')) {
        comment += ` ${(lines[i + 1] ?? '').replace(/^\s*\/\//, '').trim()}`;
        i++;
      }
    }
    if (comment === undefined) {
      out.push(line);
      continue;
    }
    const stated = statedIn(comment);
    const body = /^\s*(?:const|let)\s+(\w+)\s*=/.exec(statement);
    if (stated === undefined || /^\s*(import|export|})/.test(statement)) {
      out.push(line);
      continue;
    }
    const n = shown.length;
    shown.push({ line: at, source: statement.trim(), stated });
    out.push(
      body === null
        ? statement.replace(/^(\s*)(.*);$/, `$1__show(${n}, ($2));`)
        : `${statement} __show(${n}, ${body[1]});`,
    );
  }
  let code = out.join('\n');
  for (const [name, target] of ENTRIES)
    code = code.replaceAll(`from '${name}'`, `from '${target}'`);
  code = code.replace(
    /openWorkerRegistry\('(static:[0-9]+)'\)/g,
    `openWorkerRegistry('$1', { lockDir: ${JSON.stringify(join(page.dir, 'locks'))} })`,
  );
  const given = Object.entries(GIVEN)
    .filter(([name]) => new RegExp(`\\b${name}\\b`).test(code))
    .filter(
      ([name]) =>
        !new RegExp(`(const|let|var)\\s+${name}\\b|import\\s*\\{[^}]*\\b${name}\\b`).test(code),
    )
    .map(([, declaration]) => declaration);
  const prelude = [
    `import * as __idmint from '${ENTRIES.get('idmint')}';`,
    `const __server = ${JSON.stringify(needsServer(block) ? page.url() : '')};`,
    `const __serialize = ${SERIALIZE_SOURCE};`,
    'const __show = (n, v) => console.log(`@@${n} ${__serialize(v)}`);',
    ...given,
  ];
  // A sample is a fragment of a program: it ends here, whatever it left open.
  return { code: `${prelude.join('\n')}\n${code}\nprocess.exit(0);\n`, shown };
}

/** Runs a sample; resolves with why it was skipped, if it was (a service it needs is down). */
async function runTypeScript(block: DocBlock, page: Page): Promise<string | undefined> {
  const missing = await servicesMissing(servicesOf(block.code));
  if (missing !== undefined) return missing;
  if (needsServer(block)) await page.server();
  const { code, shown } = instrument(block, page);
  const file = join(page.dir, 'code', `sample-${block.line}.ts`);
  writeFileSync(file, code);
  let stdout: string;
  try {
    ({ stdout } = await run(process.execPath, ['--disable-warning=ExperimentalWarning', file], {
      cwd: join(page.dir, 'code'),
      env: { ...page.processEnv(), IDMINT_OPAQUE_KEYS: OPAQUE_KEYS },
      timeout: 60_000,
    }));
  } catch (error) {
    const { stderr = '', stdout: out = '' } = error as { stderr?: string; stdout?: string };
    assert.fail(`${block.file}:${block.line} failed:\n${stderr}${out}\n--- as run:\n${code}`);
  }
  const values = new Map<number, unknown>();
  for (const line of stdout.split('\n')) {
    const match = /^@@(\d+) (.*)$/.exec(line);
    if (match !== null) values.set(Number(match[1]), JSON.parse(match[2] ?? 'null'));
  }
  const problems: string[] = [];
  for (const [n, { line, source, stated }] of shown.entries()) {
    if (!values.has(n)) problems.push(`${block.file}:${line} ${source} showed nothing`);
    const problem = mismatch(values.get(n), stated);
    if (problem !== undefined)
      problems.push(`${block.file}:${line} ${source} // ${stated.text}: ${problem}`);
  }
  assert.deepEqual(problems, [], problems.join('\n'));
  return undefined;
}

// ---- Shell samples --------------------------------------------------------------------------

interface Command {
  readonly line: number;
  readonly command: string;
  readonly stated: Stated | undefined;
  /** The output lines shown under it (`$ command` blocks, or `# ` lines). */
  readonly output: string[] | undefined;
}

/** A shell block's commands, continuation lines joined, with what each is shown to print. */
function commandsOf(block: DocBlock): Command[] {
  const lines = block.code.split('\n');
  const prompt = lines.some((line) => line.startsWith('$ '));
  const commands: Command[] = [];
  for (let i = 0; i < lines.length; i++) {
    let text = lines[i] ?? '';
    const line = block.line + 1 + i;
    if (prompt && !text.startsWith('$ ')) continue;
    if (prompt) text = text.slice(2);
    if (text.trim() === '' || text.trimStart().startsWith('#')) continue;
    while (text.endsWith('\\')) text = `${text.slice(0, -1)} ${(lines[++i] ?? '').trim()}`;
    const hash = text.search(/\s# /);
    const comment = hash < 0 ? undefined : text.slice(hash).replace(/^\s*# /, '');
    const command = (hash < 0 ? text : text.slice(0, hash)).trim();
    const output: string[] = [];
    while (i + 1 < lines.length) {
      const next = lines[i + 1] ?? '';
      if (prompt ? next.startsWith('$ ') : !/^#\s/.test(next)) break;
      output.push(prompt ? next : next.replace(/^#\s/, ''));
      i++;
    }
    commands.push({
      line,
      command,
      stated: comment === undefined ? undefined : statedIn(comment),
      output: output.length > 0 ? output : undefined,
    });
  }
  return commands;
}

/** The output's value: JSON when it is JSON, the text otherwise (digits stay text: IDs). */
function outputValue(stdout: string): unknown {
  const text = stdout.trim();
  if (/^\d+$/.test(text)) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Why a command's output is not what its comment states, or undefined. */
function outputMismatch(stdout: string, stated: Stated): string | undefined {
  const value = outputValue(stdout);
  if (stated.value.t === 'num' && typeof value === 'string') {
    const text = stated.text;
    const ok = stated.like ? shapeOf(text).test(value) : value === text;
    return ok ? undefined : `${stated.like ? 'like ' : ''}${text}, got ${JSON.stringify(value)}`;
  }
  return mismatch(value, stated);
}

async function runShell(block: DocBlock, page: Page): Promise<void> {
  const problems: string[] = [];
  for (const { line, command, stated, output } of commandsOf(block)) {
    const exported = /^export (\w+)=(.*)$/.exec(command);
    if (exported !== null) {
      page.env[exported[1] ?? ''] = rewrite(exported[2] ?? '', page).replace(/^'(.*)'$/, '$1');
      continue;
    }
    const notRun = COMMANDS_NOT_RUN.find(
      ({ start, file }) => start.test(command) && (file === undefined || file === block.file),
    );
    if (notRun !== undefined) {
      if (/npm start|idmint serve/.test(command) && needsServer(block)) await page.server();
      continue;
    }
    // A CLI command in a block that then asks the server works on the server's store, so the
    // server must be up first (see sharedStore below).
    if (/localhost|127\.0\.0\.1/.test(command) || (/idmint /.test(command) && needsServer(block)))
      await page.server();
    const services = servicesOf(command);
    const missing = await servicesMissing(services);
    if (missing !== undefined) continue;
    for (const service of services) page.used.add(service);
    const bin = `"${process.execPath}" "${IDMINT_BIN}"`;
    const shell = rewrite(command, page).replace(/(^|\s)(npx )?idmint /, `$1${bin} `);
    let stdout: string;
    try {
      // The CLI runs beside the server, in a directory and with worker-ID locks of its own (as
      // after the quick start's server is stopped): the server keeps static:0. Its tags are the
      // server's, as they are for a reader running both in one directory: `idmint tags create`
      // then `curl` serves the tag just made.
      const cli = /idmint /.test(command);
      const env = page.processEnv();
      const sharedStore =
        cli && page.walkthroughDir !== '' && env['IDMINT_SEGMENT_STORE'] === undefined
          ? { IDMINT_SEGMENT_STORE: `sqlite:${join(page.walkthroughDir, 'data', 'idmint.db')}` }
          : {};
      ({ stdout } = await run('sh', ['-c', shell], {
        cwd: cli ? join(page.dir, 'cli') : page.dir,
        env: {
          ...env,
          ...sharedStore,
          ...(cli ? { IDMINT_WORKER_LOCK_DIR: join(page.dir, 'cli', 'locks') } : {}),
        },
        timeout: 60_000,
      }));
    } catch (error) {
      const { stderr = '' } = error as { stderr?: string };
      problems.push(`${block.file}:${line} ${command} failed: ${stderr.trim()}`);
      continue;
    }
    const where = `${block.file}:${line} ${command}`;
    if (stated !== undefined) {
      const problem = outputMismatch(stdout, stated);
      if (problem !== undefined) problems.push(`${where} # ${stated.text}: ${problem}`);
    }
    if (output !== undefined) {
      const expected = output.join('\n').trim();
      if (stdout.trim() !== expected) problems.push(`${where}:\n${stdout}\nshown:\n${expected}`);
    }
  }
  assert.deepEqual(problems, [], problems.join('\n'));
}

// ---- Configuration samples ------------------------------------------------------------------

const CONFIG_VARIABLES = new Set(
  configKeys().flatMap(({ spec }) => [spec.env, spec.fallbackEnv ?? spec.env]),
);

/** A YAML block: parsed; one shaped like idmint's configuration goes through the real loader. */
function checkYaml(block: DocBlock): void {
  const documents = parseAllDocuments(block.code);
  for (const document of documents) {
    assert.deepEqual(document.errors, [], `${block.file}:${block.line} is not valid YAML`);
    const value = document.toJS() as Record<string, unknown> | null;
    if (value === null || typeof value !== 'object') continue;
    if ('apiVersion' in value || 'groups' in value) {
      // Kubernetes manifests: the variables they give idmint are ones it reads.
      const names = [...block.code.matchAll(/name: (\w+)/g)].map((m) => m[1] ?? '');
      for (const name of names.filter((n) => /^(IDMINT_|PORT$)/.test(n)))
        assert.ok(
          CONFIG_VARIABLES.has(name),
          `${block.file}:${block.line}: idmint reads no ${name}`,
        );
      continue;
    }
    assert.doesNotThrow(
      () => loadConfig({ values: value }),
      `${block.file}:${block.line}: the configuration loader refuses it`,
    );
  }
}

/** `export IDMINT_...=` lines: each a variable idmint reads, with a value its loader accepts. */
function checkExports(block: DocBlock): void {
  const env: Record<string, string> = {};
  for (const match of placeholders(block.code).matchAll(
    /^(?:export\s+)?(IDMINT_\w+)=('[^']*'|\S+)/gm,
  )) {
    const name = match[1] ?? '';
    assert.ok(CONFIG_VARIABLES.has(name), `${block.file}:${block.line}: idmint reads no ${name}`);
    env[name] = (match[2] ?? '').replace(/^'(.*)'$/, '$1');
  }
  loadConfig({ env });
}

/** A note that sets up or asks for something: HTTP requests, or SQL for the server's store. */
const REQUEST = /^(IDMINT_\w+=\S+\s+)*((GET|POST|PATCH|PUT|DELETE|HEAD) \/|SQL )/;
/** A paragraph with a note, as a block with no code. */
const BARE: DocBlock = { file: '', line: 0, lang: 'paragraph', code: '', note: undefined };

// ---- The pages ------------------------------------------------------------------------------

/** Blocks that are read, not run, by language, and why. */
const FIGURES: Record<string, string> = {
  '': 'a figure: bit layouts, key paths (a command or its output is checked: see kindOf)',
  mermaid: 'a diagram',
  sql: "a table's columns, as Leaf's docs give them (test/segment-leaf.test.ts uses the table)",
};

/** What the test does with a block of each language. */
function kindOf(block: DocBlock): string {
  if (NOT_RUN.some(({ file, contains }) => file === block.file && block.code.includes(contains)))
    return 'not run';
  if (['ts', 'js', 'typescript', 'javascript'].includes(block.lang)) return 'code';
  if (['sh', 'bash', 'console', 'shell'].includes(block.lang)) return 'shell';
  if (['yaml', 'yml'].includes(block.lang)) return 'yaml';
  if (block.lang === 'json') return 'json';
  if (block.lang === '' && block.note?.startsWith('$ ')) return 'output';
  // A command or what one prints is checked; figures, diagrams and schemas are not.
  if (block.lang === '' && /^(\$ )?(npx )?idmint /.test(block.code)) return 'command';
  return FIGURES[block.lang] === undefined ? 'unknown' : 'figure';
}

const pages = docPages().map((file) => new Page(file));
after(() => Promise.all(pages.map((page) => page.close())));

describe('docs samples', { concurrency: 3 }, () => {
  for (const page of pages) {
    describe(page.file, { concurrency: 1 }, () => {
      for (const block of docBlocks(page.file)) {
        const kind = kindOf(block);
        const title = `${block.file}:${block.line} (${block.lang || 'text'}) ${kind}`;
        const why =
          kind === 'figure'
            ? FIGURES[block.lang]
            : NOT_RUN.find(
                ({ file, contains }) => file === block.file && block.code.includes(contains),
              )?.why;
        // A block not run (a figure, or listed in NOT_RUN) is named with its reason, not skipped:
        // under IDMINT_REQUIRE_SERVICES=1 a skipped test fails the run.
        if (why !== undefined) {
          it(`${title}: not run, ${why}`, () => {
            assert.ok(why.length > 0);
          });
          continue;
        }
        it(title, async (t) => {
          const answer = await sendRequests(block, page);
          if (kind === 'json' && answer !== undefined) checkAnswer(block, answer);
          if (kind === 'code') {
            const skipped = await runTypeScript(block, page);
            if (skipped !== undefined) t.skip(skipped);
          }
          if (kind === 'shell') {
            checkExports(block);
            await runShell(block, page);
          }
          if (kind === 'yaml') checkYaml(block);
          if (kind === 'json' && answer === undefined) await checkJson(block, page);
          if (kind === 'output') await checkOutput(block, page);
          assert.notEqual(
            kind,
            'unknown',
            `${title}: run it (a kind above), or say why not (FIGURES)`,
          );
          assert.notEqual(
            kind,
            'command',
            `${block.file}:${block.line}: a command or its output: put the command in a note ` +
              'above it (<!-- $ idmint ... -->), or list the block in NOT_RUN with why',
          );
        });
      }
      const notes = paragraphNotes(page.file).filter(({ note }) => REQUEST.test(note));
      for (const { line, note, paragraph } of notes) {
        it(`${page.file}:${line} the error the paragraph quotes`, async () => {
          const answer = await sendRequests({ ...BARE, file: page.file, line, note }, page);
          const error = (answer as { error?: { code: string; message: string } }).error;
          assert.ok(error !== undefined, `${page.file}:${line}: ${note} answered no error`);
          const forms = [
            `\`${error.code}: ${error.message}\``,
            JSON.stringify(error.message),
            `"${error.message}"`,
          ];
          assert.ok(
            forms.some((form) => paragraph.includes(form)),
            `${page.file}:${line}: the paragraph does not quote ${error.code}: ${error.message}`,
          );
        });
      }
      it(`${page.file}: every error message it quotes is checked`, () => {
        const noted = notes.map(({ paragraph }) => paragraph).join('\n');
        const unchecked = quotedErrors(page.file, new Set(Object.keys(ERROR_CODES))).filter(
          ({ quote }) => !noted.includes(quote),
        );
        assert.deepEqual(
          unchecked,
          [],
          'put a note naming the request that answers it above the paragraph (<!-- GET /... -->)',
        );
      });
    });
  }
});

/**
 * The requests of a block's note (`<!-- GET /v1/tags/order -->`, several separated by `; `, a
 * JSON body after the path), sent to the page's server before the block runs: they set up what
 * the block presumes. Resolves with the last one's answer, which a JSON block shows.
 */
async function sendRequests(block: DocBlock, page: Page): Promise<unknown> {
  // Settings first (`IDMINT_LAYOUT=js-safe GET /...`): the answer of a server started with them.
  const settings: Record<string, string> = {};
  let note = block.note ?? '';
  for (let match = /^(IDMINT_\w+)=(\S+)\s+/.exec(note); match !== null; ) {
    settings[match[1] ?? ''] = match[2] ?? '';
    note = note.slice(match[0].length);
    match = /^(IDMINT_\w+)=(\S+)\s+/.exec(note);
  }
  if (!REQUEST.test(note)) return undefined;
  // Answers shown as examples come from the page's second server.
  const role = block.lang === 'json' || block.lang === 'paragraph' ? 'answers' : 'walkthrough';
  const server = await page.server(role, settings);
  let answer: unknown;
  for (const request of note.split(/;\s+(?=[A-Z]+ \/|SQL )/)) {
    if (request.startsWith('SQL ')) {
      // A row written straight into the server's SQLite table, as a tag moved from Leaf is.
      const file = join(role === 'walkthrough' ? page.walkthroughDir : '', 'data', 'idmint.db');
      assert.equal(role, 'walkthrough', 'SQL notes are for the walkthrough server');
      const database = new DatabaseSync(file, {
        timeout: 10_000,
      });
      try {
        database.exec(request.slice(4).replaceAll('leaf_alloc', page.name));
      } finally {
        database.close();
      }
      continue;
    }
    const [, method = 'GET', path = '/', body] = /^([A-Z]+) (\S+)\s*(.*)$/s.exec(request) ?? [];
    const response = await fetch(`${server.url}${path}`, {
      method,
      ...(body === undefined || body === ''
        ? {}
        : { body, headers: { 'content-type': 'application/json' } }),
    });
    const text = await response.text();
    answer = /^application\/json/.test(response.headers.get('content-type') ?? '')
      ? JSON.parse(text)
      : text;
  }
  return answer;
}

/**
 * A block of output under a `<!-- $ command -->` note: the command, run as the page's CLI commands
 * are, prints exactly it (stdout and stderr), whatever its exit status.
 */
async function checkOutput(block: DocBlock, page: Page): Promise<void> {
  const command = (block.note ?? '').slice(2);
  const shell = rewrite(command, page).replace(
    /(^|\s)(npx )?idmint /,
    `$1"${process.execPath}" "${IDMINT_BIN}" `,
  );
  const result = await run('sh', ['-c', `${shell} 2>&1`], {
    cwd: join(page.dir, 'cli'),
    env: { ...page.processEnv(), IDMINT_WORKER_LOCK_DIR: join(page.dir, 'cli', 'locks') },
    timeout: 60_000,
  }).then(
    ({ stdout }) => stdout,
    (error: { stdout?: string }) => error.stdout ?? '',
  );
  assert.equal(result.trim(), block.code.trim(), `${block.file}:${block.line} $ ${command}`);
}

/** A JSON block under a request: the answer has its fields, and values of the same shape. */
function checkAnswer(block: DocBlock, answer: unknown): void {
  const stated = statedIn(`like ${block.code.trim().replace(/\s*\n\s*/g, ' ')}`);
  assert.ok(stated !== undefined, `${block.file}:${block.line}: the block does not parse`);
  const problem = mismatch(answer, stated);
  assert.equal(problem, undefined, `${block.file}:${block.line}: ${problem}`);
}

/** A JSON block: valid JSON (one document, or one per line as a log is). */
async function checkJson(block: DocBlock, page: Page): Promise<void> {
  const text = block.code.trim();
  try {
    JSON.parse(text);
    return;
  } catch {
    for (const line of text.split('\n'))
      assert.doesNotThrow(() => JSON.parse(line), `${block.file}:${block.line}: ${line}`);
  }
  // Log lines: each one the server writes at start-up has the fields it shows.
  const lines = text.split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  if (!lines.some((line) => 'level' in line && 'msg' in line)) return;
  const server = await page.server('answers');
  for (const [i, line] of lines.entries()) {
    const found = server.logs.find((log) => log['msg'] === line['msg']);
    if (found === undefined) continue;
    // The docs' port, where this server has one of its own.
    const host = new URL(server.url).host;
    const written: unknown = JSON.parse(JSON.stringify(found).replaceAll(host, '127.0.0.1:8080'));
    const stated = statedIn(`like ${block.code.trim().split('\n')[i] ?? ''}`);
    assert.ok(stated !== undefined);
    const problem = mismatch(written, stated);
    assert.equal(problem, undefined, `${block.file}:${block.line + 1 + i}: ${problem}`);
  }
}
