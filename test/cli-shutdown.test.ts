// The shutdown result is in the log: the IDs given back and the IDs wasted, one info line; a
// give-back that fails (the store is down at shutdown) is a warning naming the tag.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { deleteRedisPrefix } from './support/segment-backends.ts';
import { startServe } from './support/serve-process.ts';
import { SERVICES, describeWithServices, hostPort, uniqueName } from './support/services.ts';
import { TcpProxy } from './support/tcp-proxy.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-cli-shutdown-'));
after(() => rmSync(root, { recursive: true, force: true }));

function clean(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return env;
}

await describeWithServices('idmint serve logs its shutdown result', ['redis'], () => {
  it('store down at shutdown: warns per tag not given back, counts waste', async (t) => {
    const proxy = await TcpProxy.start(hostPort(SERVICES.redis.url));
    const prefix = uniqueName('shut');
    t.after(async () => {
      await proxy.close();
      await deleteRedisPrefix(SERVICES.redis.url, prefix);
    });
    const server = await startServe(
      [
        '--no-snowflake-enabled',
        '--segment-store',
        `redis://${proxy.address}/0`,
        '--segment-table',
        prefix,
        '--segment-timeout-ms',
        '1000',
      ],
      { env: clean(), cwd: root },
    );
    let stopped: number | null = null;
    try {
      for (const tag of ['order', 'invoice']) {
        const created = await fetch(`${server.url}/v1/tags`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ tag, step: 100 }),
        });
        assert.equal(created.status, 201);
        assert.equal(await (await fetch(`${server.url}/api/segment/get/${tag}`)).text(), '1');
      }
      proxy.cut(); // the store goes down: the give-back at shutdown cannot reach it
    } finally {
      stopped = await server.stop('SIGTERM');
    }
    assert.equal(stopped, 0, server.stderr());
    const warnings = server.logs.filter(
      (line) =>
        line['level'] === 40 &&
        typeof line['tag'] === 'string' &&
        String(line['msg']).startsWith('could not give'),
    );
    assert.deepEqual(
      warnings.map((line) => [line['tag'], line['ids'], line['code'], line['msg']]).sort(),
      [
        [
          'invoice',
          99,
          'STORE_UNAVAILABLE',
          'could not give tag "invoice"\'s unissued IDs back to the store',
        ],
        [
          'order',
          99,
          'STORE_UNAVAILABLE',
          'could not give tag "order"\'s unissued IDs back to the store',
        ],
      ],
    );
    const result = server.logs.filter(
      (line) => line['msg'] === 'segment IDs given back to the store at shutdown',
    );
    assert.deepEqual(
      result.map((line) => [line['level'], line['releasedIds'], line['wastedIds']]),
      [[30, 0, 198]],
    );
    assert.equal(server.logs.at(-1)?.['msg'], 'idmint stopped');
  });

  it('with the store up: the info line counts the IDs given back, and no warning', async (t) => {
    const prefix = uniqueName('shut');
    t.after(() => deleteRedisPrefix(SERVICES.redis.url, prefix));
    const server = await startServe(
      ['--no-snowflake-enabled', '--segment-store', SERVICES.redis.url, '--segment-table', prefix],
      { env: clean(), cwd: root },
    );
    try {
      const created = await fetch(`${server.url}/v1/tags`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ tag: 'order', step: 100 }),
      });
      assert.equal(created.status, 201);
      for (let i = 1; i <= 3; i++)
        assert.equal(await (await fetch(`${server.url}/api/segment/get/order`)).text(), String(i));
    } finally {
      assert.equal(await server.stop('SIGTERM'), 0, server.stderr());
    }
    const result = server.logs.filter(
      (line) => line['msg'] === 'segment IDs given back to the store at shutdown',
    );
    assert.deepEqual(
      result.map((line) => [line['level'], line['releasedIds'], line['wastedIds']]),
      [[30, 97, 0]],
    );
    assert.ok(!server.logs.some((line) => line['level'] === 40), JSON.stringify(server.logs));
  });
});
