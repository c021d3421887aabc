import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runIdmint } from './support/cli.ts';

const cwd = mkdtempSync(join(tmpdir(), 'idmint-configuration-cli-'));
after(() => rmSync(cwd, { recursive: true, force: true }));

/** The process environment without any configuration the test runner itself may carry. */
function clean(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_') && key !== 'PORT') env[key] = value;
  return { ...env, ...extra };
}

/** `idmint config check` as an operator runs it. */
const check = (args: readonly string[], env: Record<string, string> = {}) =>
  runIdmint(['config', 'check', ...args], { env: clean(env), cwd });

describe('the configuration from the command line (issues 8 and 9)', () => {
  it('port from PORT when IDMINT_PORT is unset; IDMINT_PORT and --port win', async () => {
    const fromPort = await check([], { PORT: '9300' });
    assert.equal(fromPort.code, 0, fromPort.stderr);
    assert.match(fromPort.stdout, /^port\s+9300\s+from PORT$/m);
    const both = await check([], { PORT: '9300', IDMINT_PORT: '9301' });
    assert.match(both.stdout, /^port\s+9301\s+from IDMINT_PORT$/m);
    const flag = await check(['--port', '9302'], { PORT: '9300' });
    assert.match(flag.stdout, /^port\s+9302\s+from --port$/m);
  });

  it('names the clock; refuses a rollback setting it makes idle (exit 2)', async () => {
    const system = await check([
      '--clock',
      'system',
      '--rollback-policy',
      'history',
      '--rollback-history-ms',
      '5000',
    ]);
    assert.equal(system.code, 0, system.stderr);
    assert.match(system.stdout, /^snowflake\.clock\s+"system"\s+from --clock$/m);
    assert.match(
      system.stdout,
      /^snowflake\.rollback\.historyMs\s+5000\s+from --rollback-history-ms$/m,
    );
    const monotonic = await check(['--rollback-policy', 'history']);
    assert.equal(monotonic.code, 2);
    assert.match(
      monotonic.stderr,
      new RegExp(
        '^idmint config: invalid configuration: snowflake\\.rollback\\.policy = "history" ' +
          '\\(from --rollback-policy\\): "history" never acts with snowflake\\.clock = ' +
          'monotonic',
      ),
    );
    const inert = await check(['--clock', 'system', '--rollback-policy', 'refuse'], {
      IDMINT_ROLLBACK_MAX_BACKWARD_MS: '20',
    });
    assert.equal(inert.code, 2);
    assert.match(
      inert.stderr,
      new RegExp(
        'snowflake\\.rollback\\.maxBackwardMs = 20 \\(from ' +
          'IDMINT_ROLLBACK_MAX_BACKWARD_MS\\): applies only to the wait and switch-worker ' +
          'policies',
      ),
    );
  });

  it('refuses a lease TTL the registries would refuse, before anything is opened', async () => {
    const result = await runIdmint(['serve', '--port', '0', '--lease-ttl-ms', '700000'], {
      env: clean(),
      cwd,
    });
    assert.equal(result.code, 2);
    assert.match(
      result.stderr,
      new RegExp(
        '^idmint serve: invalid configuration: snowflake\\.leaseTtlMs = "700000" \\(from ' +
          "--lease-ttl-ms\\): must be 0 \\(the registry's default: 10000; 3000 for static\\), " +
          'or an integer from 1000 to 600000\\n$',
      ),
    );
  });
});
