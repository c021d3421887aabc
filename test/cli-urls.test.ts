// Every URL form the docs list works end to end, through the CLI a user runs; passwords never
// show; a Redis database idmint cannot use is a configuration error, not database 0.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { after, describe, it } from 'node:test';
import { runIdmint } from './support/cli.ts';
import { SEGMENT_BACKENDS, deleteRedisPrefix } from './support/segment-backends.ts';
import { startServe } from './support/serve-process.ts';
import { SERVICES, describeWithServices, hostPort, uniqueName } from './support/services.ts';

const root = mkdtempSync(join(tmpdir(), 'idmint-cli-urls-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** An environment without any IDMINT_ configuration the test runner itself may carry. */
function clean(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env))
    if (!key.startsWith('IDMINT_')) env[key] = value;
  return { ...env, ...extra };
}

describe('URLs in the configuration', () => {
  it('config check never prints a password, whatever the password holds', async () => {
    for (const password of [
      's3cret-pw',
      'p@ss/w0rd@',
      'a:b?c#d',
      encodeURIComponent('p@ss/w0rd'),
    ]) {
      const env = clean({
        IDMINT_SEGMENT_STORE: `postgres://idmint:${password}@db.internal:5432/ids?sslmode=require`,
        IDMINT_WORKER_REGISTRY: `rediss://default:${password}@cache.internal:6380/2`,
      });
      const table = await runIdmint(['config', 'check'], { env, cwd: root });
      assert.equal(table.code, 0, table.stderr);
      assert.match(
        table.stdout,
        new RegExp(
          '^segment\\.store\\s+"postgres://idmint:\\*\\*\\*@db\\.internal:5432/ids\\?sslmode=' +
            'require"\\s+from IDMINT_SEGMENT_STORE$',
          'm',
        ),
      );
      assert.match(
        table.stdout,
        new RegExp(
          '^snowflake\\.registry\\s+"rediss://default:\\*\\*\\*@cache\\.internal:6380/2"\\s+f' +
            'rom IDMINT_WORKER_REGISTRY$',
          'm',
        ),
      );
      const json = await runIdmint(['config', 'check', '--json'], { env, cwd: root });
      assert.equal(json.code, 0, json.stderr);
      const keys = (JSON.parse(json.stdout) as { keys: Record<string, { value: unknown }> }).keys;
      assert.equal(
        keys['segment.store']?.value,
        'postgres://idmint:***@db.internal:5432/ids?sslmode=require',
      );
      // A URL the configuration refuses is shown in its error, password hidden too.
      const bad = await runIdmint(
        ['config', 'check', '--segment-store', `postgres://idmint:${password}@db.internal:5432`],
        { env, cwd: root },
      );
      assert.equal(bad.code, 2);
      assert.match(
        bad.stderr,
        new RegExp(
          '^idmint config: invalid configuration: segment\\.store = ' +
            '"postgres://idmint:\\*\\*\\*@db\\.internal:5432" \\(from --segment-store\\): ' +
            'names no database',
        ),
      );
      for (const output of [table.stdout, json.stdout, bad.stderr]) {
        assert.ok(!output.includes(password), `password shown: ${output}`);
        assert.ok(!output.includes(decodeURIComponent(password)), `password shown: ${output}`);
      }
    }
  });

  it('a Redis database out of 0..15 is a configuration error, exit 2', async () => {
    for (const [command, flag] of [
      [['serve'], '--segment-store'],
      [['serve', '--no-segment-enabled'], '--worker-registry'],
      [['config', 'check'], '--segment-store'],
      [['tags', 'list'], '--segment-store'],
    ] as const) {
      for (const db of ['99', 'abc']) {
        const result = await runIdmint([...command, flag, `redis://127.0.0.1:6379/${db}`], {
          env: clean(),
          cwd: root,
        });
        assert.equal(result.code, 2, `${command.join(' ')} ${db}: ${result.stderr}`);
        assert.match(
          result.stderr,
          new RegExp(
            `^idmint ${command[0]}: invalid configuration: ` +
              `(segment\\.store|snowflake\\.registry) = "redis://127\\.0\\.0\\.1:6379/${db}" ` +
              `\\(from ${flag}\\): the Redis database must be a number from 0 to 15, got ` +
              `"${db}"`,
          ),
        );
        assert.equal(result.stderr.split('\n').length, 2, result.stderr);
      }
    }
  });
});

await describeWithServices(
  'every documented URL form, against the real services',
  ['postgres', 'mysql', 'redis'],
  () => {
    it('mariadb:// works for the segment store and the worker registry', async (t) => {
      const table = uniqueName('maria');
      const workers = uniqueName('maria_w');
      const url = SERVICES.mysql.url.replace(/^mysql:/, 'mariadb:');
      t.after(() =>
        SEGMENT_BACKENDS.mariadb.sql?.(
          SERVICES.mysql.url,
          `DROP TABLE IF EXISTS ${table}, ${workers}`,
        ),
      );
      const init = await runIdmint(['db', 'init', '--store', url, '--table', table], {
        env: clean(),
        cwd: root,
      });
      assert.equal(init.code, 0, init.stderr);
      assert.equal(init.stdout.split('\n')[0], `table ${table} is ready in ${url}`);
      assert.match(init.stdout, /\nhistory: mysql server_id \d+ \(recorded; no fence so far\)\n$/);
      const created = await runIdmint(
        ['tags', 'create', 'order', '--step', '10', '--store', url, '--table', table],
        { env: clean(), cwd: root },
      );
      assert.equal(created.code, 0, created.stderr);
      const server = await startServe(
        [
          '--segment-store',
          url,
          '--segment-table',
          table,
          '--worker-registry',
          url,
          '--worker-table',
          workers,
          '--worker-cluster',
          uniqueName('c'),
        ],
        { env: clean(), cwd: root },
      );
      try {
        const listening = server.logs.find((line) => line['msg'] === 'idmint listening');
        assert.deepEqual(
          [
            listening?.['segment'],
            (listening?.['snowflake'] as { registry?: string } | undefined)?.registry,
          ],
          [{ store: 'mysql' }, 'mysql'],
        );
        assert.equal(await (await fetch(`${server.url}/api/segment/get/order`)).text(), '1');
        assert.match(
          await (await fetch(`${server.url}/api/snowflake/get/x`)).text(),
          /^[1-9][0-9]*$/,
        );
      } finally {
        assert.equal(await server.stop(), 0, server.stderr());
      }
    });

    it('a raw password with @ and / in it reaches PostgreSQL as written', async (t) => {
      const table = uniqueName('rawpw');
      t.after(() =>
        SEGMENT_BACKENDS.postgres.sql?.(SERVICES.postgres.url, `DROP TABLE IF EXISTS ${table}`),
      );
      // The test database trusts local connections, so any password is accepted: what this shows is
      // that user, host, port and database are read right around a password pasted as is.
      const { host, port } = hostPort(SERVICES.postgres.url);
      const database = new URL(SERVICES.postgres.url).pathname.slice(1);
      const url = `postgres://postgres:p@ss/w0rd@${host}:${port}/${database}`;
      const init = await runIdmint(['db', 'init', '--store', url, '--table', table], {
        env: clean(),
        cwd: root,
      });
      assert.equal(init.code, 0, init.stderr);
      const ready =
        `table ${table} is ready in ` + `postgres://postgres:***@${host}:${port}/${database}`;
      assert.equal(init.stdout.split('\n')[0], ready);
      assert.match(
        init.stdout,
        /\nhistory: postgres system \d+ timeline \d+ \(recorded; no fence so far\)\n$/,
      );
      const created = await runIdmint(['tags', 'create', 'order', '--step', '5', '--json'], {
        env: clean({ IDMINT_SEGMENT_STORE: url, IDMINT_SEGMENT_TABLE: table }),
        cwd: root,
      });
      assert.equal(created.code, 0, created.stderr);
      assert.equal((JSON.parse(created.stdout) as { tag: string }).tag, 'order');
    });

    it('rediss:// connects over TLS, for the segment store and the worker registry', async (t) => {
      const tls = await startTlsProxy(hostPort(SERVICES.redis.url));
      const prefix = uniqueName('tls');
      t.after(async () => {
        await new Promise((resolve) => tls.server.close(resolve));
        await deleteRedisPrefix(SERVICES.redis.url, prefix);
      });
      // The proxy's certificate is self-signed: the idmint process trusts it as a CA.
      const env = clean({ NODE_EXTRA_CA_CERTS: tls.certFile });
      const url = `rediss://127.0.0.1:${tls.port}/0`;
      const created = await runIdmint(
        ['tags', 'create', 'order', '--step', '10', '--store', url, '--table', prefix],
        { env, cwd: root },
      );
      assert.equal(created.code, 0, created.stderr);
      assert.ok(tls.handshakes > 0, 'the store went through the TLS proxy');
      const server = await startServe(
        [
          '--segment-store',
          url,
          '--segment-table',
          prefix,
          '--worker-registry',
          url,
          '--worker-cluster',
          prefix,
        ],
        { env, cwd: root },
      );
      try {
        assert.equal(await (await fetch(`${server.url}/api/segment/get/order`)).text(), '1');
        assert.match(
          await (await fetch(`${server.url}/api/snowflake/get/x`)).text(),
          /^[1-9][0-9]*$/,
        );
      } finally {
        assert.equal(await server.stop(), 0, server.stderr());
      }
      // Without trusting the certificate, TLS refuses it: the connection really is TLS.
      const untrusted = await runIdmint(
        ['tags', 'list', '--store', url, '--table', prefix, '--segment-timeout-ms', '2000'],
        { env: clean(), cwd: root },
      );
      assert.equal(untrusted.code, 1);
      assert.match(
        untrusted.stderr,
        new RegExp(
          '^idmint tags: segment store \\(--store\\): redis at 127\\.0\\.0\\.1:\\d+: ' +
            'TLS handshake failed: self-signed certificate',
        ),
      );
    });
  },
);

/**
 * A TLS server on 127.0.0.1 that forwards to `target`, with a self-signed certificate for
 * 127.0.0.1.
 */
async function startTlsProxy(target: {
  host: string;
  port: number;
}): Promise<{ server: TlsServer; port: number; certFile: string; handshakes: number }> {
  const dir = mkdtempSync(join(root, 'tls-'));
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  const proxy = { server: undefined as unknown as TlsServer, port: 0, certFile, handshakes: 0 };
  proxy.server = createTlsServer(
    { key: readFileSync(keyFile), cert: readFileSync(certFile) },
    (client) => {
      proxy.handshakes++;
      const upstream = connect(target);
      client.pipe(upstream).pipe(client);
      const close = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
    },
  );
  await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
  const address = proxy.server.address();
  proxy.port = typeof address === 'object' && address !== null ? address.port : 0;
  return proxy;
}
