// TinyId's own client (ported line for line: support/tinyid-client.ts) against `idmint serve`, as a
// TinyId deployment switches: its requests byte for byte (a POST of an empty form with Java's
// headers to nextSegmentIdSimple), its parsing, its segment arithmetic. Several client processes
// draw from two servers on one PostgreSQL table, one server is restarted (SIGTERM) in the middle,
// and no ID comes twice; TinyId's odd-only example tag (delta 2, remainder 1) gives odd IDs only.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, it } from 'node:test';
import { SEGMENT_BACKENDS } from './support/segment-backends.ts';
import { startServe, type ServeProcess } from './support/serve-process.ts';
import { describeWithServices } from './support/services.ts';
import { TcpProxy } from './support/tcp-proxy.ts';
import { CachedIdGenerator, HttpSegmentIdService, tinyIdPost } from './support/tinyid-client.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-tinyid-client-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** TinyId's own example token (tinyid-server/db.sql), allowed `test` and `test_odd` there. */
const TOKEN = '0f673adf80504e2eaa552f5d791b644c';
const ADMIN = 'admin-token-0123456789';
const CLIENT_PROCESS = fileURLToPath(
  new URL('./support/tinyid-client-process.ts', import.meta.url),
);

function clean(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return env;
}

/** A client process (support/tinyid-client-process.ts): resolves with its IDs and failures. */
function clientProcess(
  options: { server: string; bizType: string; count: number; threads: number },
  onHalf: () => void,
): Promise<{ ids: bigint[]; failures: number }> {
  const out = join(root, `ids-${Math.random().toString(36).slice(2)}.txt`);
  const child = spawn(
    process.execPath,
    [
      '--disable-warning=ExperimentalWarning',
      CLIENT_PROCESS,
      JSON.stringify({ ...options, token: TOKEN, out }),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    const before = stdout.includes('half');
    stdout += chunk.toString('utf8');
    if (!before && stdout.includes('half')) onHalf();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  return new Promise((resolve, reject) => {
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`client exited ${code}: ${stderr}`));
      const summary = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as { failures: number };
      const text = readFileSync(out, 'utf8');
      resolve({ ids: text === '' ? [] : text.split('\n').map(BigInt), failures: summary.failures });
    });
  });
}

await describeWithServices('TinyId client against idmint serve', ['postgres'], () => {
  it('client processes, two servers, a restart: no duplicate, odd-only stays odd', async (t) => {
    const fixture = await SEGMENT_BACKENDS.postgres.open();
    const servers: ServeProcess[] = [];
    const proxies: TcpProxy[] = [];
    t.after(async () => {
      for (const server of servers) await server.stop('SIGTERM').catch(() => undefined);
      for (const proxy of proxies) await proxy.close();
      await fixture.dispose();
    });
    const serve = () =>
      startServe(
        [
          '--no-snowflake-enabled',
          '--segment-store',
          fixture.url,
          '--segment-table',
          fixture.table,
        ],
        {
          env: { ...clean(), IDMINT_TOKENS: `${TOKEN}:test|test_odd`, IDMINT_ADMIN_TOKEN: ADMIN },
          cwd: root,
        },
      );
    const first = await serve();
    const second = await serve();
    servers.push(first, second);
    // TinyId's two example tags (tinyid-server/db.sql), created through idmint's API; a small
    // step so that the run loads many segments.
    for (const tag of [
      { tag: 'test', step: 500 },
      { tag: 'test_odd', step: 500, delta: 2, remainder: 1 },
    ]) {
      const created = await fetch(`${first.url}/v1/tags`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` },
        body: JSON.stringify(tag),
      });
      const text = await created.text();
      assert.equal(created.status, 201, text);
      const body = JSON.parse(text) as { delta: number; remainder: number };
      assert.deepEqual([body.delta, body.remainder], [tag.delta ?? 1, tag.remainder ?? 0]);
    }
    // The clients' `tinyid.server` names two addresses; each stays the same across the restart,
    // as a host:port does (the proxy follows the restarted server to its new port).
    for (const server of servers) {
      const { port } = new URL(server.url);
      proxies.push(await TcpProxy.start({ host: '127.0.0.1', port: Number(port) }));
    }
    const server = proxies.map((proxy) => proxy.address).join(',');

    const clients = 3;
    let halves = 0;
    let restarted: Promise<void> | undefined;
    const onHalf = () => {
      halves++;
      // Once every client is half way: SIGTERM the first server, start it again, and point its
      // address at it; clients meanwhile fail over to the other address or retry.
      if (halves === clients) {
        restarted = (async () => {
          assert.equal(await first.stop('SIGTERM'), 0, first.stderr());
          const again = await serve();
          servers[0] = again;
          proxies[0]?.retarget({ host: '127.0.0.1', port: Number(new URL(again.url).port) });
        })();
      }
    };
    const runs = await Promise.all(
      Array.from({ length: clients }, (_, i) =>
        clientProcess(
          { server, bizType: i === 0 ? 'test_odd' : 'test', count: 6000, threads: 4 },
          onHalf,
        ),
      ),
    );
    await restarted;
    assert.ok(restarted !== undefined, 'the restart ran');

    const odd = runs[0]?.ids ?? [];
    // Each of 4 tasks may finish one draw past the count.
    assert.ok(odd.length >= 6000, String(odd.length));
    assert.deepEqual(
      odd.filter((id) => id % 2n !== 1n),
      [],
      'test_odd issues odd IDs only',
    );
    const plain = runs.slice(1).flatMap((run) => run.ids);
    assert.ok(plain.length >= 12000, String(plain.length));
    assert.equal(new Set(plain).size, plain.length, 'no ID of test twice');
    assert.equal(new Set(odd).size, odd.length, 'no ID of test_odd twice');
    // A client started after the restart gets a new odd ID (servers hand out ranges they hold,
    // so not necessarily above every issued one; never one already issued).
    const later = new HttpSegmentIdService({ server, token: TOKEN });
    const next = await new CachedIdGenerator('test_odd', later).nextId();
    later.close();
    assert.ok(!new Set(odd).has(next), String(next));
    assert.equal(next % 2n, 1n);
  });

  it('answers exactly what TinyId answers: a segment, a wrong token, an unknown tag', async (t) => {
    const fixture = await SEGMENT_BACKENDS.postgres.open();
    await fixture.store.createTag({ tag: 'test_odd', step: 100000, delta: 2, remainder: 1 });
    const server = await startServe(
      ['--no-snowflake-enabled', '--segment-store', fixture.url, '--segment-table', fixture.table],
      { env: { ...clean(), IDMINT_TOKENS: `${TOKEN}:test|test_odd` }, cwd: root },
    );
    const agent = new Agent({ keepAlive: true });
    t.after(async () => {
      agent.destroy();
      await server.stop('SIGTERM');
      await fixture.dispose();
    });
    const base = `${server.url}/tinyid/id/nextSegmentIdSimple`;
    // TinyId's own first segment of test_odd (begin_id 1, step 100000): (1, 100001], odd IDs,
    // the first 3... idmint's tag starts at 1, so its first segment holds 1 itself.
    const segment = await tinyIdPost(`${base}?token=${TOKEN}&bizType=test_odd`, agent);
    assert.equal(segment, '-1,39999,199999,2,1');
    // A wrong token, and a tag the token may not draw: TinyId's Simple routes answer empty.
    assert.equal(
      await tinyIdPost(`${base}?token=wrong-token-0000000000&bizType=test_odd`, agent),
      '',
    );
    assert.equal(await tinyIdPost(`${base}?token=${TOKEN}&bizType=other`, agent), '');
    // TinyId's client turns an empty answer into its own exception.
    const client = new CachedIdGenerator(
      'test_odd',
      new HttpSegmentIdService({
        server: new URL(server.url).host,
        token: 'wrong-token-0000000000',
      }),
    );
    await assert.rejects(client.nextId(), /^Error: error query segmentId: null$/);
  });
});
