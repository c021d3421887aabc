import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { RawConnection, type RawResponse } from './support/raw-http.ts';
import { startServe } from './support/serve-process.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-drain-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** The environment without any IDMINT_ configuration the test runner may carry. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return env;
}

// docs/operations.md, Shutdown: after SIGTERM, requests that arrive on connections already open
// are served, each with `Connection: close`, and each connection closes after its response. A
// real `idmint serve` process, raw keep-alive connections that see every reset, and requests
// sent through the first second after the signal, both by clients that keep sending and by
// clients that were idle when the signal came.
describe('draining on SIGTERM (idmint serve, raw keep-alive connections)', () => {
  it('serves every request sent in the first second, resets none, exits 0', {
    timeout: 60_000,
  }, async () => {
    const cwd = mkdtempSync(join(root, 'serve-'));
    const server = await startServe([], { cwd, env: cleanEnv() });
    const BUSY = 8;
    const IDLE = 8;
    const connections: RawConnection[] = [];
    const responses: { response: RawResponse; sentAt: number }[] = [];
    const failures: string[] = [];
    let signalAt = 0;
    try {
      for (let i = 0; i < BUSY + IDLE; i++) connections.push(await RawConnection.open(server.url));
      // Each connection has served a request and is now an idle keep-alive connection.
      for (const connection of connections)
        assert.equal((await connection.get('/api/snowflake/get/drain')).statusCode, 200);

      const when = (sentAt: number) =>
        signalAt === 0 ? 'before the signal' : `${sentAt - signalAt} ms after the signal`;
      const send = async (connection: RawConnection): Promise<RawResponse | undefined> => {
        const sentAt = Date.now();
        try {
          const response = await connection.get('/api/snowflake/get/drain');
          responses.push({ response, sentAt });
          return response;
        } catch (error) {
          failures.push(`request sent ${when(sentAt)}: ${(error as Error).message}`);
          return undefined;
        }
      };
      // Busy clients send back to back until told `Connection: close` (bounded in count).
      const busy = connections.slice(0, BUSY).map(async (connection) => {
        for (let i = 0; i < 20_000; i++) {
          const response = await send(connection);
          if (response === undefined || response.headers['connection'] === 'close') return;
        }
        failures.push('a busy connection was never told Connection: close');
      });
      await sleep(200);
      signalAt = Date.now();
      const exited = server.stop('SIGTERM');
      // Idle clients send their next request at moments spread over the first second.
      const idle = connections.slice(BUSY).map(async (connection, i) => {
        await sleep(50 + i * Math.floor(900 / IDLE));
        const response = await send(connection);
        if (response !== undefined && response.headers['connection'] !== 'close')
          failures.push('a response during the drain without Connection: close');
      });
      await Promise.all([...busy, ...idle]);
      await Promise.all(connections.map((connection) => connection.closed()));
      assert.equal(await exited, 0, server.stderr());
    } finally {
      await server.stop('SIGKILL');
    }
    assert.deepEqual(failures, []);
    assert.deepEqual(
      connections.flatMap((connection) => connection.errors),
      [],
      'connections reset',
    );
    // Every response is complete and an ID; none repeats.
    const ids = responses.map(({ response }) => {
      assert.equal(response.statusCode, 200, response.body);
      assert.match(response.body, /^[1-9][0-9]*$/);
      return response.body;
    });
    assert.equal(new Set(ids).size, ids.length, 'an ID was issued twice');
    const afterSignal = responses.filter(({ sentAt }) => sentAt >= signalAt);
    assert.ok(
      afterSignal.length >= IDLE,
      `only ${afterSignal.length} requests were sent after the signal`,
    );
    assert.ok(
      afterSignal.some(({ sentAt }) => sentAt - signalAt >= 700),
      'no request was sent late in the first second',
    );
    // A clean stop: no warning (no shutdown timeout), and the process got to its last line.
    const afterSignalLogs = server.logs.slice(
      server.logs.findIndex((line) => line['msg'] === 'signal received'),
    );
    assert.deepEqual(
      afterSignalLogs.filter((line) => Number(line['level']) >= 40),
      [],
    );
    assert.equal(afterSignalLogs.at(-1)?.['msg'], 'idmint stopped');
  });
});
