import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { decomposeId } from '../src/core/layout.ts';
import { startServe } from './support/serve-process.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'idmint-readme-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * The shell lines of the README's quick start that talk to the server, with their `# expected`
 * comments.
 */
function quickStart(): { command: string; expected: string | undefined }[] {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const section = readme.slice(
    readme.indexOf('## Quick start'),
    readme.indexOf('\n## ', readme.indexOf('## Quick start') + 1),
  );
  return section
    .split('\n')
    .filter((line) => line.startsWith('curl '))
    .map((line) => {
      const hash = line.indexOf('  # ');
      const comment = hash < 0 ? undefined : line.slice(hash + 4).trim();
      // A comment is an exact expected answer unless it describes one ("a ... like ...").
      return {
        command: hash < 0 ? line : line.slice(0, hash).trimEnd(),
        expected: comment !== undefined && !/ like /.test(comment) ? comment : undefined,
      };
    });
}

// The README is what a newcomer pastes; this runs its quick start, as written, against a server
// started with zero configuration in an empty directory (port 8080 swapped for a free one).
it('the README quick start works as written', async () => {
  const steps = quickStart();
  assert.ok(steps.length >= 5, 'quick start commands found');
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  const server = await startServe([], { cwd: dir, env });
  const host = new URL(server.url).host;
  const sh = async (command: string) =>
    (await run('sh', ['-c', command.replaceAll('localhost:8080', host)], { cwd: dir })).stdout;
  try {
    const outputs: string[] = [];
    for (const { command, expected } of steps) {
      const output = await sh(command);
      outputs.push(output);
      if (expected !== undefined) assert.equal(output, expected, command);
      assert.doesNotMatch(output, /"error"/, command);
    }
    assert.match(outputs[3] ?? '', /^[1-9][0-9]{15,18}$/);
    const decoded = JSON.parse(outputs.at(-1) ?? '') as { workerId: number; layout: string };
    assert.equal(decoded.workerId, 0);
    assert.equal(decoded.layout, 'idmint');
  } finally {
    assert.equal(await server.stop('SIGINT'), 0);
  }
  // "Stop it with Ctrl-C: ... the next start continues at 5."
  const again = await startServe([], { cwd: dir, env });
  try {
    assert.equal(await sh(`curl -s ${again.url}/api/segment/get/order`), '5');
  } finally {
    await again.stop();
  }
});

/**
 * Install-time lifecycle scripts: npm runs them (or, for `prepare`, flags them) when installing a
 * package.
 */
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall', 'prepare'];
const PACKAGE = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
  scripts: Record<string, string>;
};

// "runs no install script (the package ships built)"; "`npm install` builds nothing: `npm start`
// builds". npm pack and publish use this package.json as it is, so no script here reaches a
// consumer (scripts/check-package.sh checks the packed tarball's too).
it('the package has no install-time script; packing builds it, and so does npm start', () => {
  const { scripts } = PACKAGE;
  assert.deepEqual(
    INSTALL_SCRIPTS.filter((name) => scripts[name] !== undefined),
    [],
  );
  assert.equal(scripts['prepack'], 'npm run build');
  assert.match(scripts['start'] ?? '', /^npm run build --silent && /);
});

/**
 * The system's own Node and npx, as a newcomer's shell finds them (not this repository's Node 24).
 */
const SYSTEM_PATH = '/usr/local/bin:/usr/bin:/bin';
const systemEnv = { ...process.env, PATH: SYSTEM_PATH };
const systemNode = spawnSync('node', ['--version'], { encoding: 'utf8', env: systemEnv });
const systemNpx = spawnSync('npx', ['--version'], { encoding: 'utf8', env: systemEnv });
const found = systemNode.status === 0 && systemNpx.status === 0;
const noSystemNpx = found ? undefined : `no system node and npx on ${SYSTEM_PATH}`;
if (noSystemNpx !== undefined)
  process.stderr.write(`\n!!! SKIPPING the npx EBADENGINE check: ${noSystemNpx}\n`);

// The README's install section says where npm's EBADENGINE warning appears on an older system
// Node. npx, run in the clone, links it into its cache (a fresh one here) on first use and checks
// the link and its target: two blocks, then none on later runs. On a supported system Node, none.
const EBADENGINE_TITLE =
  "npx idmint prints npm's EBADENGINE warning as the README says: twice at first, then never";
it(EBADENGINE_TITLE, { skip: noSystemNpx ?? false, timeout: 120_000 }, async () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const install = readme
    .slice(readme.indexOf('## Install'), readme.indexOf('## Quick start'))
    .replace(/\s+/g, ' ');
  assert.match(install, /once more, printed twice, the first time `npx idmint` runs in the clone/);
  assert.match(install, /Later `npx idmint` runs print nothing/);
  const [major = 0, minor = 0] = systemNode.stdout.trim().slice(1).split('.').map(Number);
  const older = major < 22 || (major === 22 && minor < 13);
  const cache = mkdtempSync(join(tmpdir(), 'idmint-npx-cache-'));
  try {
    // Only what npx needs: none of the npm_* variables `npm test` sets for its scripts.
    const env = { PATH: SYSTEM_PATH, HOME: process.env['HOME'], npm_config_cache: cache };
    const root = fileURLToPath(new URL('..', import.meta.url));
    const npx = () => run('npx', ['idmint', '--version'], { cwd: root, env });
    const blocks = (stderr: string) => stderr.match(/EBADENGINE\s+package: 'idmint@/g)?.length ?? 0;
    const first = await npx();
    const second = await npx();
    assert.equal(first.stdout.trim(), PACKAGE.version);
    assert.equal(second.stdout.trim(), PACKAGE.version);
    const node = systemNode.stdout.trim();
    assert.equal(
      blocks(first.stderr),
      older ? 2 : 0,
      `first npx idmint, system Node ${node}:\n${first.stderr}`,
    );
    assert.equal(blocks(second.stderr), 0, `second npx idmint:\n${second.stderr}`);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The ```ts blocks of a README section. */
function codeBlocks(heading: string): string[] {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf(`## ${heading}`);
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  return [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] ?? '');
}

const INDEX = pathToFileURL(fileURLToPath(new URL('../src/index.ts', import.meta.url))).href;

/**
 * Runs a README sample as a module in `cwd`, importing the package from src/index.ts. Each line
 * `expression; // what it shows` is wrapped so its value is printed; resolves to those values by
 * the line's source text. Placeholders in the sample (`<32 hex>`) are given real values, and a
 * static registry a lock directory under `cwd`.
 */
async function runSample(code: string, cwd: string): Promise<Map<string, unknown>> {
  const lines = code
    .replaceAll("from 'idmint'", `from '${INDEX}'`)
    .replaceAll('<32 hex>', '00112233445566778899aabbccddeeff')
    // The host-wide lock of a static worker ID in the sample's own directory, not the machine's.
    .replace(
      /openWorkerRegistry\('(static:[0-9]+)'\)/g,
      "openWorkerRegistry('$1', { lockDir: './locks' })",
    )
    .split('\n');
  const shown: string[] = [];
  const instrumented = lines.map((line) => {
    const match = /^(\s*)(.+?);\s*\/\/.*$/.exec(line);
    const statement = match?.[2] ?? '';
    if (
      match === null ||
      /^(const|let|import|export)\b/.test(statement) ||
      statement.startsWith('}')
    )
      return line;
    shown.push((match[2] ?? '').trim());
    return `${match[1]}__show(${shown.length - 1}, ${match[2]});`;
  });
  const show =
    'const __show = (n, v) => console.log(JSON.stringify([n, v], (_k, x) => ' +
    '(typeof x === "bigint" ? `${x}n` : x instanceof Uint8Array ? { bytes: x.length } : x)));';
  const file = join(cwd, `sample-${shown.length}-${Math.random().toString(36).slice(2)}.ts`);
  writeFileSync(file, `${show}\n${instrumented.join('\n')}\n`);
  const { stdout } = await run(process.execPath, ['--disable-warning=ExperimentalWarning', file], {
    cwd,
  });
  const values = new Map<string, unknown>();
  for (const line of stdout.trim().split('\n').filter(Boolean)) {
    const [n, value] = JSON.parse(line) as [number, unknown];
    values.set(shown[n] ?? '', value);
  }
  return values;
}

// The library tour, run as written: the worker ID it promises (7) is the one decoded; the
// one-liners need no clock; the segment sample counts from 1.
it('the README library tour runs as written, and shows what its comments say', async () => {
  const blocks = codeBlocks('Library tour').filter((block) => block.includes("from 'idmint'"));
  const cwd = mkdtempSync(join(tmpdir(), 'idmint-readme-library-'));
  try {
    const [snowflake, worker, segments, families] = await Promise.all(
      blocks.map((block) => runSample(block, cwd)),
    );
    assert.equal(blocks.length, 4);
    assert.match(String(snowflake?.get('generator.nextString()')), /^[1-9][0-9]{15,18}$/);
    assert.equal((snowflake!.get('generator.nextBatch(1000)') as unknown[]).length, 1000);
    const parts = snowflake?.get('decomposeId(id)') as {
      workerId: number;
      timestamp: number;
      sequence: number;
    };
    assert.equal(parts.workerId, 7);
    assert.ok(Math.abs(parts.timestamp - Date.now()) < 60_000, `timestamp ${parts.timestamp}`);
    assert.match(String(worker?.get('worker.next()')), /^[1-9][0-9]{15,18}n$/);
    assert.equal(
      segments?.get("segments.nextSync('orders') ?? (await segments.next('orders'))"),
      '1n',
    );
    assert.match(String(families?.get('uuidv7()')), UUID7);
    assert.match(String(families?.get('uuidv4()')), UUID4);
    assert.match(String(families?.get('ulid()')), /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/);
    assert.match(String(families?.get('objectId()')), /^[0-9a-f]{24}$/);
    assert.deepEqual(families?.get('new UuidV7Generator().next()'), { bytes: 16 });
    assert.match(String(families?.get("opaque.encode(1234n, 'orders')")), /^[0-9]{19}$/);
    assert.equal(
      (families!.get("decodeAny('01K7ZJ3F2V0Q8X3N6W1T5R9B4M')") as { format: string }).format,
      'ulid',
    );
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
});

/** The `idmint next` lines of the README's CLI tour, with their comments. */
function tourNextLines(): { command: string; comment: string }[] {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const start = readme.indexOf('## CLI tour');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  return section
    .split('\n')
    .filter((line) => / npx idmint next |^npx idmint next /.test(line))
    .map((line) => {
      const hash = line.indexOf('  # ');
      return { command: line.slice(0, hash).trim(), comment: line.slice(hash + 4).trim() };
    });
}

/**
 * What a tour line's IDs must look like: the worker it names, the layout's bound, a family's form.
 */
function checkTourOutput(command: string, stdout: string): void {
  const lines = stdout.trim().split('\n');
  assert.equal(lines.length, Number(/--count (\d+)/.exec(command)?.[1] ?? 1), command);
  const format = /--format (\w+)/.exec(command)?.[1] ?? 'snowflake';
  const shapes: Record<string, RegExp> = {
    snowflake: /^[1-9][0-9]{14,18}$/,
    uuid7: UUID7,
    uuid4: UUID4,
    ulid: /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/,
    objectid: /^[0-9a-f]{24}$/,
    opaque: /^[0-9]{25}$/,
  };
  for (const line of lines) assert.match(line, shapes[format] ?? /^$/, command);
  if (format !== 'snowflake') return;
  const layout = /--layout ([\w-]+)/.exec(command)?.[1] ?? 'idmint';
  const worker = Number(/--worker (\d+)/.exec(command)?.[1] ?? 0);
  for (const line of lines) assert.equal(decomposeId(line, layout).workerId, worker, command);
  if (layout === 'js-safe')
    assert.ok(
      lines.every((line) => BigInt(line) < 2n ** 53n),
      command,
    );
}

// "idmint next takes its worker ID the way the server does ... beside a running server that holds
// it, next refuses": the tour's lines as written, in a fresh directory, then beside the quick
// start's server in that directory.
const tourTitle =
  "the README CLI tour's `idmint next` lines run as written, alone and beside a server";
it(tourTitle, { timeout: 180_000 }, async () => {
  const lines = tourNextLines();
  assert.ok(lines.length >= 7, 'tour lines found');
  const cwd = mkdtempSync(join(tmpdir(), 'idmint-readme-tour-'));
  const binJs = fileURLToPath(new URL('../bin/idmint.js', import.meta.url));
  const bin = `"${process.execPath}" "${binJs}"`;
  const KEY = '00112233445566778899aabbccddeeff';
  const sh = (command: string) =>
    run('sh', ['-c', command.replace('npx idmint', bin).replace('<32 hex>', KEY)], { cwd }).then(
      ({ stdout }) => ({ code: 0, stdout, stderr: '' }),
      ({ code, stdout, stderr }: { code: number; stdout: string; stderr: string }) => ({
        code,
        stdout,
        stderr,
      }),
    );
  try {
    for (const { command } of lines) {
      const result = await sh(command);
      assert.equal(result.code, 0, `${command}: ${result.stderr}`);
      checkTourOutput(command, result.stdout);
    }
    const server = await startServe([], { cwd });
    try {
      for (const { command } of lines) {
        const result = await sh(command);
        const needsWorker = /--format (uuid7|uuid4|ulid|objectid)/.test(command) === false;
        if (needsWorker && !command.includes('--worker')) {
          assert.equal(result.code, 1, `${command} beside the server: ${result.stdout}`);
          const pid = server.child.pid;
          const inUse = `worker 0 of cluster idmint is in use on this host by pid ${pid}\\b`;
          assert.match(result.stderr, new RegExp(`^idmint next: .*${inUse}.*--worker`), command);
        } else {
          assert.equal(result.code, 0, `${command} beside the server: ${result.stderr}`);
          checkTourOutput(command, result.stdout);
        }
      }
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
});
