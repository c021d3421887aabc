import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, it } from 'node:test';
import { promisify } from 'node:util';
import { startServe } from './support/serve-process.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'idmint-readme-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The shell lines of the README's quick start that talk to the server, with their `# expected` comments. */
function quickStart(): { command: string; expected: string | undefined }[] {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('\n## ', readme.indexOf('## Quick start') + 1));
  return section
    .split('\n')
    .filter((line) => line.startsWith('curl '))
    .map((line) => {
      const hash = line.indexOf('  # ');
      const comment = hash < 0 ? undefined : line.slice(hash + 4).trim();
      // A comment is an exact expected answer unless it describes one ("a ... like ...").
      return { command: hash < 0 ? line : line.slice(0, hash).trimEnd(), expected: comment !== undefined && !/ like /.test(comment) ? comment : undefined };
    });
}

// The README is what a newcomer pastes; this runs its quick start, as written, against a server
// started with zero configuration in an empty directory (port 8080 swapped for a free one).
it('the README quick start works as written: create a tag, IDs from both modes, decode, restart', async () => {
  const steps = quickStart();
  assert.ok(steps.length >= 5, 'quick start commands found');
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('IDMINT_')) env[key] = value;
  const server = await startServe([], { cwd: dir, env });
  const host = new URL(server.url).host;
  const sh = async (command: string) => (await run('sh', ['-c', command.replaceAll('localhost:8080', host)], { cwd: dir })).stdout;
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

/** Install-time lifecycle scripts: npm runs them (or, for `prepare`, flags them) when installing a package. */
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
  assert.deepEqual(INSTALL_SCRIPTS.filter((name) => scripts[name] !== undefined), []);
  assert.equal(scripts['prepack'], 'npm run build');
  assert.match(scripts['start'] ?? '', /^npm run build --silent && /);
});

/** The system's own Node and npx, as a newcomer's shell finds them (not this repository's Node 24). */
const SYSTEM_PATH = '/usr/local/bin:/usr/bin:/bin';
const systemEnv = { ...process.env, PATH: SYSTEM_PATH };
const systemNode = spawnSync('node', ['--version'], { encoding: 'utf8', env: systemEnv });
const systemNpx = spawnSync('npx', ['--version'], { encoding: 'utf8', env: systemEnv });
const found = systemNode.status === 0 && systemNpx.status === 0;
const noSystemNpx = found ? undefined : `no system node and npx on ${SYSTEM_PATH}`;
if (noSystemNpx !== undefined) process.stderr.write(`\n!!! SKIPPING the npx EBADENGINE check: ${noSystemNpx}\n`);

// The README's install section says where npm's EBADENGINE warning appears on an older system
// Node. npx, run in the clone, links it into its cache (a fresh one here) on first use and checks
// the link and its target: two blocks, then none on later runs. On a supported system Node, none.
const EBADENGINE_TITLE = "npx idmint prints npm's EBADENGINE warning as the README says: twice at first, then never";
it(EBADENGINE_TITLE, { skip: noSystemNpx ?? false, timeout: 120_000 }, async () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  const install = readme.slice(readme.indexOf('## Install'), readme.indexOf('## Quick start')).replace(/\s+/g, ' ');
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
    assert.equal(blocks(first.stderr), older ? 2 : 0, `first npx idmint, system Node ${node}:\n${first.stderr}`);
    assert.equal(blocks(second.stderr), 0, `second npx idmint:\n${second.stderr}`);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});
