import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { DRAIN_IDLE_GRACE_MS } from '../src/server/plugins/drain.ts';
import { testServer } from './support/server.ts';

// The image cannot be built here (no container engine), so what can be checked without one is:
// the Dockerfile names files that exist, runs node directly as a non-root user on every
// interface, and its health check works against a real server; the Kubernetes manifests in
// docs/operations.md parse and agree with the server (routes, port, timings).

const run = promisify(execFile);
const dockerfile = readFileSync(new URL('../Dockerfile', import.meta.url), 'utf8');
const operations = readFileSync(new URL('../docs/operations.md', import.meta.url), 'utf8');

interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

/**
 * The Dockerfile's instructions, continuation lines joined, comments dropped, split into stages.
 */
function stages(): Instruction[][] {
  const joined = dockerfile.replace(/\\\n/g, ' ');
  const result: Instruction[][] = [];
  for (const line of joined.split('\n')) {
    const match = /^\s*([A-Z]+)\s+(.*)$/.exec(line);
    if (match === null || line.trimStart().startsWith('#')) continue;
    const instruction = { keyword: match[1] ?? '', args: (match[2] ?? '').trim() };
    if (instruction.keyword === 'FROM') result.push([]);
    result.at(-1)?.push(instruction);
  }
  return result;
}

describe('Dockerfile', () => {
  const all = stages();
  const final = all.at(-1) ?? [];
  const find = (keyword: string) => final.filter((i) => i.keyword === keyword);

  it('is multi-stage, and every file it copies exists, not .dockerignored', () => {
    assert.ok(all.length >= 2, 'more than one stage');
    const ignored = readFileSync(new URL('../.dockerignore', import.meta.url), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    const sources = all
      .flat()
      .filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    assert.ok(sources.length > 0);
    for (const source of sources) {
      assert.ok(
        existsSync(new URL(`../${source}`, import.meta.url)),
        `COPY ${source}: no such file in the checkout`,
      );
      assert.ok(
        !ignored.some((pattern) => source === pattern || source.startsWith(`${pattern}/`)),
        `${source} is excluded by .dockerignore`,
      );
    }
    for (const mustIgnore of ['node_modules', '.git', 'data', '.env', 'dist'])
      assert.ok(ignored.includes(mustIgnore), `.dockerignore lists ${mustIgnore}`);
    // The build stage runs the package's own build script.
    assert.ok(all.flat().some((i) => i.keyword === 'RUN' && i.args === 'npm run build'));
    const build =
      (
        JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
          scripts: Record<string, string>;
        }
      ).scripts['build'] ?? '';
    assert.match(
      build,
      new RegExp(
        '^node scripts/clean-dist\\.mjs && tsc -p tsconfig\\.build\\.json && node ' +
          'scripts/build-dashboard\\.ts$',
      ),
    );
    // Every script the build runs is copied into the build stage.
    const copied = sources.flatMap((source) => (source.endsWith('/') ? [] : [source]));
    for (const script of build.match(/scripts\/[\w.-]+/g) ?? [])
      assert.ok(copied.includes(script), `the build stage does not COPY ${script}`);
  });

  it('runs as non-root on every interface, node as PID 1 (exec form)', () => {
    const users = find('USER');
    assert.equal(users.length, 1);
    assert.doesNotMatch(users[0]?.args ?? '', /^(root|0)(:|$)/);
    assert.match(
      find('ENV')
        .map((i) => i.args)
        .join(' '),
      /\bIDMINT_HOST=0\.0\.0\.0\b/,
    );
    const entrypoint = JSON.parse(find('ENTRYPOINT')[0]?.args ?? 'null') as string[];
    const command = JSON.parse(find('CMD')[0]?.args ?? 'null') as string[];
    // JSON arrays: no /bin/sh -c in between to swallow SIGTERM, and no npm.
    assert.deepEqual(entrypoint, ['node', 'bin/idmint.js']);
    assert.deepEqual(command, ['serve']);
    assert.ok(existsSync(new URL('../bin/idmint.js', import.meta.url)));
    assert.ok(find('EXPOSE').some((i) => i.args === '8080'));
    assert.equal(find('STOPSIGNAL').length, 0, 'SIGTERM, the default, is what idmint drains on');
  });

  it("its HEALTHCHECK asks /readyz on the server's port, fails without", async () => {
    const healthcheck = find('HEALTHCHECK')[0]?.args ?? '';
    const command = JSON.parse(healthcheck.slice(healthcheck.indexOf('CMD ') + 4)) as string[];
    assert.equal(command[0], 'node');
    assert.equal(command[1], '-e');
    const check = async (env: Record<string, string>) => {
      const clean: NodeJS.ProcessEnv = { PATH: process.env['PATH'] ?? '', ...env };
      return run(process.execPath, command.slice(1), { env: clean, timeout: 10_000 }).then(
        () => 0,
        (error: { code?: number }) => error.code ?? -1,
      );
    };
    const server = await testServer({ port: 0 });
    const port = new URL(await server.listen()).port;
    try {
      assert.equal(await check({ IDMINT_PORT: port }), 0);
      assert.equal(await check({ PORT: port }), 0, 'PORT, when IDMINT_PORT is unset');
      assert.equal(await check({ IDMINT_PORT: port, PORT: '1' }), 0, 'IDMINT_PORT first');
      // A port nobody listens on (the server's, once it is closed, below) fails the check.
    } finally {
      await server.close();
    }
    assert.equal(await check({ IDMINT_PORT: port }), 1);
  });
});

describe('the Kubernetes manifests in docs/operations.md', () => {
  const block = /## Containers and Kubernetes[\s\S]*?```yaml\n([\s\S]*?)```/.exec(operations)?.[1];
  // biome-ignore lint/suspicious/noExplicitAny: Kubernetes manifests, walked by the tests below
  const documents = parseAllDocuments(block ?? '').map((d) => d.toJS() as Record<string, any>);
  const byKind = (kind: string) => documents.find((d) => d['kind'] === kind);

  it('are a Deployment, a PodDisruptionBudget and a Service that select the same pods', () => {
    assert.deepEqual(
      documents.map((d) => d['kind']),
      ['Deployment', 'PodDisruptionBudget', 'Service'],
    );
    const labels = byKind('Deployment')?.['spec']['template']['metadata']['labels'];
    assert.deepEqual(byKind('Deployment')?.['spec']['selector']['matchLabels'], labels);
    assert.deepEqual(byKind('PodDisruptionBudget')?.['spec']['selector']['matchLabels'], labels);
    assert.deepEqual(byKind('Service')?.['spec']['selector'], labels);
  });

  it("probe the health routes on the server's port, with time to drain", async () => {
    const pod = byKind('Deployment')?.['spec']['template']['spec'];
    const container = pod['containers'][0];
    const portName = container['ports'][0]['name'];
    const containerPort = container['ports'][0]['containerPort'];
    const env = Object.fromEntries(
      (container['env'] as { name: string; value?: string }[]).map((e) => [e.name, e.value]),
    );
    assert.equal(Number(env['PORT'] ?? env['IDMINT_PORT']), containerPort);
    assert.equal(container['readinessProbe']['httpGet']['path'], '/readyz');
    assert.equal(container['livenessProbe']['httpGet']['path'], '/healthz');
    for (const probe of ['readinessProbe', 'livenessProbe', 'startupProbe'])
      assert.equal(container[probe]['httpGet']['port'], portName, probe);
    // The probed routes exist and answer without a token, even with auth on.
    const server = await testServer({ auth: { adminToken: 'admin-Jm4kT9qXv2Lp8Rn6' } });
    try {
      for (const path of ['/readyz', '/healthz'])
        assert.equal((await server.app.inject(path)).statusCode, 200, path);
    } finally {
      await server.close();
    }
    // preStop sleep, then the drain (at most the shutdown timeout), inside the grace period.
    const [sleep, seconds] = container['lifecycle']['preStop']['exec']['command'] as string[];
    assert.equal(sleep, 'sleep');
    const drainSeconds = Number(env['IDMINT_SHUTDOWN_TIMEOUT_MS']) / 1000;
    assert.ok(
      pod['terminationGracePeriodSeconds'] >= Number(seconds) + drainSeconds + 5,
      'grace period covers preStop, drain and release',
    );
    assert.equal(pod['securityContext']['runAsNonRoot'], true);
    assert.notEqual(pod['securityContext']['runAsUser'], 0);
    assert.equal(container['volumeMounts'][0]['mountPath'], '/app/data');
  });

  it('and the drain they allow for is the one the server does', () => {
    assert.match(
      operations,
      new RegExp(`sends nothing for the first ${DRAIN_IDLE_GRACE_MS / 1000} s of the\\s+drain`),
    );
  });
});
