import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { testServer } from './support/server.ts';

const run = promisify(execFile);
const root = mkdtempSync(join(tmpdir(), 'idmint-openapi-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** Redocly's CLI from devDependencies, run by this Node (it needs no network: telemetry off). */
const REDOCLY = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js');

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: { ruleId: string; message: string; location?: { pointer?: string }[] }[];
}

/** Lints the document with Redocly's `recommended` rules and returns its JSON report. */
async function lint(name: string, document: string): Promise<LintReport> {
  const dir = mkdtempSync(join(root, `${name}-`));
  writeFileSync(join(dir, 'openapi.json'), document);
  // An explicit configuration, so no redocly.yaml found elsewhere changes the rules.
  writeFileSync(join(dir, 'redocly.yaml'), 'extends:\n  - recommended\n');
  const result = await run(
    process.execPath,
    [REDOCLY, 'lint', 'openapi.json', '--config', 'redocly.yaml', '--format', 'json'],
    {
      cwd: dir,
      env: {
        ...process.env,
        REDOCLY_TELEMETRY: 'off',
        REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
        NO_COLOR: '1',
      },
      timeout: 60_000,
    },
  ).catch((error: { stdout?: string; stderr?: string }) => ({
    stdout: error.stdout ?? '',
    stderr: error.stderr ?? '',
  }));
  return JSON.parse(result.stdout) as LintReport;
}

// The OpenAPI document is what integrators generate clients from: it must pass a standard
// linter's recommended rules (operationIds, servers, declared security, response descriptions),
// with auth off and on, since security is declared only when it is on.
describe('the OpenAPI document passes `redocly lint` (recommended rules)', () => {
  for (const [name, values] of [
    ['auth off', {}],
    [
      'auth on',
      { auth: { tokens: ['user-Qm7vN4pL9sXy8Rk2'], adminToken: 'admin-Jm4kT9qXv2Lp8Rn6' } },
    ],
  ] as const) {
    it(name, { timeout: 90_000 }, async () => {
      const server = await testServer(values);
      let document: string;
      try {
        document = (await server.app.inject('/openapi.json')).body;
      } finally {
        await server.close();
      }
      const report = await lint(name.replace(' ', '-'), document);
      const problems = report.problems.map(
        (p) => `${p.ruleId}: ${p.message} ${p.location?.[0]?.pointer ?? ''}`,
      );
      assert.deepEqual(problems, []);
      assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 });
      const doc = JSON.parse(document) as { components: { securitySchemes?: unknown } };
      assert.equal(
        doc.components.securitySchemes === undefined,
        name === 'auth off',
        'security schemes are declared only when auth is on',
      );
    });
  }
});
