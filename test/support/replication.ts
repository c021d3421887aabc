// A primary and an asynchronous replica of PostgreSQL, MariaDB or Redis, started by a test for
// itself in a temporary directory on free loopback ports (never the shared services), with the
// replication link running through a TcpProxy so the test can hold it back. What a failover test
// needs: lag, a dead primary, a promoted replica.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chownSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  appendFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, type SuiteContext } from 'node:test';
import { REQUIRE_SERVICES } from './services.ts';
import { TcpProxy } from './tcp-proxy.ts';

export type ReplicatedBackend = 'postgres' | 'mariadb' | 'redis';

/** A primary, a replica following it through a proxy, and the steps of a failover. */
export interface ReplicaPair {
  readonly backend: ReplicatedBackend;
  readonly primary: { readonly host: string; readonly port: number };
  readonly replica: { readonly host: string; readonly port: number };
  /**
   * A store URL for a server of the pair reached on `port` (its own, or a proxy's in front of it).
   */
  url(port: number): string;
  /** Resolves once the replica has applied everything the primary has committed. */
  caughtUp(): Promise<void>;
  /**
   * Stops replication: the link hangs, the primary goes on committing, the replica falls behind.
   */
  holdReplication(): void;
  /** Kills the primary at once, as a crash would (no shutdown, nothing flushed to the replica). */
  killPrimary(): Promise<void>;
  /** Promotes the replica to a primary that takes writes. */
  promote(): Promise<void>;
  /** Stops what is still running (by the PIDs started here) and removes the directory. */
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const ROOT = process.getuid?.() === 0;

/** Ports nobody listens on right now (bound to port 0, then released). */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve) => {
          const server = createServer();
          server.listen(0, HOST, () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((server) => (server.address() as { port: number }).port);
  await Promise.all(
    servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
  );
  return ports;
}

/** The newest PostgreSQL server's bin directory (Debian's layout), or undefined. */
function postgresBin(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base).filter((v) =>
    existsSync(join(base, v, 'bin', 'pg_basebackup')),
  );
  versions.sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(base, versions[0], 'bin');
}

function onPath(command: string): string | undefined {
  const path = (process.env['PATH'] ?? '').split(':');
  for (const dir of ['/usr/sbin', '/usr/bin', '/usr/local/bin', '/usr/local/sbin', ...path]) {
    if (dir !== '' && existsSync(join(dir, command))) return join(dir, command);
  }
  return undefined;
}

/** What is missing to run a pair of `backend` here, or undefined when everything is installed. */
export function replicationMissing(backend: ReplicatedBackend): string | undefined {
  switch (backend) {
    case 'postgres':
      if (postgresBin() === undefined) {
        return (
          'initdb, pg_ctl and pg_basebackup in /usr/lib/postgresql/*/bin (Debian package ' +
          'postgresql)'
        );
      }
      if (!ROOT || spawnSync('id', ['-u', 'postgres']).status === 0) return undefined;
      return 'an OS user "postgres" (PostgreSQL refuses to run as root)';
    case 'mariadb':
      if (onPath('mariadbd') !== undefined && onPath('mariadb-install-db') !== undefined)
        return undefined;
      return 'mariadbd and mariadb-install-db (Debian package mariadb-server)';
    case 'redis':
      return onPath('redis-server') !== undefined
        ? undefined
        : 'redis-server (Debian package redis-server)';
  }
}

/**
 * `describe` for a suite that starts its own replicas: skipped loudly when the binaries are not
 * installed, failed under IDMINT_REQUIRE_SERVICES=1 (scripts/services.sh up installs them).
 */
export async function describeWithReplication(
  title: string,
  backend: ReplicatedBackend,
  body: (context: SuiteContext) => void | Promise<void>,
): Promise<void> {
  const missing = replicationMissing(backend);
  if (missing !== undefined) {
    const reason = `${backend} replication needs ${missing} (run scripts/services.sh up)`;
    if (REQUIRE_SERVICES) throw new Error(`IDMINT_REQUIRE_SERVICES=1 but ${reason}`);
    process.stderr.write(`\n!!! SKIPPING: ${reason}\n`);
  }
  await describe(title, { skip: missing ?? false }, body);
}

/** Starts a primary and a replica of `backend`. */
export function startReplicaPair(backend: ReplicatedBackend): Promise<ReplicaPair> {
  switch (backend) {
    case 'postgres':
      return startPostgresPair();
    case 'mariadb':
      return startMariadbPair();
    case 'redis':
      return startRedisPair();
  }
}

/**
 * Runs a command to its end; rejects with its output when it fails. Asynchronous: the replication
 * link is a proxy in this process, which must keep forwarding while the command runs.
 */
function run(argv: readonly string[]): Promise<string> {
  const [file, ...args] = argv;
  return new Promise((resolve, reject) => {
    const child = spawn(file as string, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${argv.join(' ')} failed (${code ?? signal}): ${out}`));
    });
  });
}

/** Runs a command to its end, whatever its outcome (stopping what may have stopped already). */
function attempt(argv: readonly string[]): Promise<void> {
  return run(argv).then(
    () => undefined,
    () => undefined,
  );
}

/** Polls `check` every 100 ms until it resolves true, for at most `ms`. */
async function waitFor(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const until = performance.now() + ms;
  let last: unknown;
  while (performance.now() < until) {
    try {
      if (await check()) return;
    } catch (error) {
      last = error;
    }
    await sleep(100);
  }
  throw new Error(
    `${what} did not happen within ${ms} ms${last === undefined ? '' : `: ${String(last)}`}`,
  );
}

/** A long-running server started here; `kill` ends it by its PID and waits for the end. */
interface Daemon {
  readonly child: ChildProcess;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Starts a {@link Daemon}, its stderr appended to `log`. */
function daemon(argv: readonly string[], log: string): Daemon {
  const [file, ...args] = argv;
  const child = spawn(file as string, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    appendFileSync(log, chunk);
  });
  const ended = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', (code, signal) => {
    if (code === 0 || signal !== null || stderr === '') return;
    process.stderr.write(`${file} ended (${code}): ${stderr.slice(-500)}\n`);
  });
  return {
    child,
    async kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await ended;
    },
  };
}

async function startPostgresPair(): Promise<ReplicaPair> {
  const bin = postgresBin() as string;
  const dir = mkdtempSync(join(tmpdir(), 'idmint-pg-'));
  // PostgreSQL refuses to run as root: as root, every step runs as the postgres user.
  const as = (argv: string[]) => (ROOT ? ['runuser', '-u', 'postgres', '--', ...argv] : argv);
  if (ROOT) {
    const uid = Number((await run(['id', '-u', 'postgres'])).trim());
    const gid = Number((await run(['id', '-g', 'postgres'])).trim());
    chownSync(dir, uid, gid);
  }
  const [primaryPort, replicaPort] = (await freePorts(2)) as [number, number];
  const primaryDir = join(dir, 'primary');
  const replicaDir = join(dir, 'replica');
  const pgCtl = (data: string, ...args: string[]) =>
    run(as([join(bin, 'pg_ctl'), '-D', data, ...args]));
  await run(
    as([
      join(bin, 'initdb'),
      '-D',
      primaryDir,
      '-A',
      'trust',
      '-U',
      'postgres',
      '--no-sync',
      '-E',
      'UTF8',
    ]),
  );
  const settings = [
    `listen_addresses = '${HOST}'`,
    `unix_socket_directories = '${dir}'`,
    'wal_level = replica',
    'max_wal_senders = 4',
    'fsync = off',
    'shared_buffers = 16MB',
    'max_connections = 60',
  ];
  // Appending keeps the files' owner (root may write them; the server only reads them).
  appendFileSync(join(primaryDir, 'postgresql.conf'), `${settings.join('\n')}\n`);
  appendFileSync(join(primaryDir, 'pg_hba.conf'), `host replication all ${HOST}/32 trust\n`);
  let link: TcpProxy | undefined;
  // pg_ctl stops the server by the PID in its postmaster.pid: the one started here.
  const stopBoth = async () => {
    for (const data of [primaryDir, replicaDir]) {
      if (!existsSync(join(data, 'postmaster.pid'))) continue;
      await attempt(as([join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop']));
    }
  };
  try {
    await pgCtl(
      primaryDir,
      '-l',
      join(dir, 'primary.log'),
      '-o',
      `-p ${primaryPort}`,
      '-w',
      'start',
    );
    // The replica copies the primary and follows it through the link, which the test can hang.
    link = await TcpProxy.start({ host: HOST, port: primaryPort });
    const source = ['-h', HOST, '-p', String(link.port), '-U', 'postgres'];
    await run(as([join(bin, 'pg_basebackup'), ...source, '-D', replicaDir, '-R', '-X', 'stream']));
    await pgCtl(
      replicaDir,
      '-l',
      join(dir, 'replica.log'),
      '-o',
      `-p ${replicaPort}`,
      '-w',
      'start',
    );
  } catch (error) {
    await stopBoth();
    await link?.close();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const replicationLink = link;
  const url = (port: number) => `postgres://postgres@${HOST}:${port}/postgres`;
  const query = async (port: number, sql: string): Promise<Record<string, unknown>[]> => {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: url(port), connectionTimeoutMillis: 2000 });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return (await client.query(sql)).rows as Record<string, unknown>[];
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  return {
    backend: 'postgres',
    primary: { host: HOST, port: primaryPort },
    replica: { host: HOST, port: replicaPort },
    url,
    async caughtUp() {
      await waitFor('the PostgreSQL replica catching up', async () => {
        const [primary] = await query(primaryPort, 'SELECT pg_current_wal_lsn() AS lsn');
        const lsn = String(primary?.['lsn']);
        const [replica] = await query(
          replicaPort,
          `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS done`,
        );
        return replica?.['done'] === true;
      });
    },
    holdReplication: () => replicationLink.hang(),
    async killPrimary() {
      await pgCtl(primaryDir, '-m', 'immediate', '-w', 'stop');
    },
    async promote() {
      await query(replicaPort, 'SELECT pg_promote(true, 60)');
    },
    async stop() {
      await stopBoth();
      await replicationLink.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function startMariadbPair(): Promise<ReplicaPair> {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-mariadb-'));
  const [primaryPort, replicaPort] = (await freePorts(2)) as [number, number];
  const user = ROOT ? ['--user=root'] : [];
  const install = [
    `--datadir=${join(dir, 'primary')}`,
    ...user,
    '--auth-root-authentication-method=normal',
  ];
  await run([
    onPath('mariadb-install-db') as string,
    '--no-defaults',
    ...install,
    '--skip-test-db',
  ]);
  // Two copies of one fresh install: the replica then starts from exactly what the primary has.
  cpSync(join(dir, 'primary'), join(dir, 'replica'), { recursive: true });
  const server = (name: string, port: number, serverId: number) =>
    daemon(
      [
        onPath('mariadbd') as string,
        '--no-defaults',
        `--datadir=${join(dir, name)}`,
        `--socket=${join(dir, `${name}.sock`)}`,
        `--port=${port}`,
        `--bind-address=${HOST}`,
        `--server-id=${serverId}`,
        '--log-bin=binlog',
        '--binlog-format=ROW',
        '--innodb-buffer-pool-size=16M',
        '--innodb-flush-log-at-trx-commit=2',
        '--skip-name-resolve',
        `--pid-file=${join(dir, `${name}.pid`)}`,
        ...user,
      ],
      join(dir, `${name}.log`),
    );
  const primary = server('primary', primaryPort, 1);
  const replica = server('replica', replicaPort, 2);
  const url = (port: number) => `mysql://root@${HOST}:${port}/test`;
  const query = async (port: number, sql: string): Promise<Record<string, unknown>[]> => {
    const mysql = await import('mysql2/promise');
    const options = {
      host: HOST,
      port,
      user: 'root',
      connectTimeout: 2000,
      multipleStatements: true,
    };
    const connection = await mysql.createConnection(options);
    try {
      const [rows] = await connection.query(sql);
      return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
    } finally {
      await connection.end().catch(() => undefined);
    }
  };
  let link: TcpProxy | undefined;
  try {
    const answers = (port: number) => async () =>
      (await query(port, 'SELECT 1 AS one')).length === 1;
    await waitFor('the MariaDB primary starting', answers(primaryPort));
    await waitFor('the MariaDB replica starting', answers(replicaPort));
    link = await TcpProxy.start({ host: HOST, port: primaryPort });
    await query(primaryPort, 'CREATE DATABASE test');
    const master = `MASTER_HOST='${HOST}', MASTER_PORT=${link.port}, MASTER_USER='root'`;
    const from = 'MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1';
    await query(replicaPort, `CHANGE MASTER TO ${master}, ${from}; START SLAVE`);
  } catch (error) {
    await primary.kill();
    await replica.kill();
    await link?.close();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const replicationLink = link;
  return {
    backend: 'mariadb',
    primary: { host: HOST, port: primaryPort },
    replica: { host: HOST, port: replicaPort },
    url,
    async caughtUp() {
      await waitFor('the MariaDB replica catching up', async () => {
        const [p] = await query(primaryPort, 'SELECT @@gtid_binlog_pos AS pos');
        const [r] = await query(replicaPort, 'SELECT @@gtid_slave_pos AS pos');
        return p?.['pos'] !== '' && p?.['pos'] === r?.['pos'];
      });
    },
    holdReplication: () => replicationLink.hang(),
    killPrimary: () => primary.kill('SIGKILL'),
    async promote() {
      await query(replicaPort, 'STOP SLAVE; RESET SLAVE ALL');
    },
    async stop() {
      await primary.kill();
      await replica.kill();
      await replicationLink.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function startRedisPair(): Promise<ReplicaPair> {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-redis-'));
  const [primaryPort, replicaPort] = (await freePorts(2)) as [number, number];
  const redis = onPath('redis-server') as string;
  // No persistence: the failover is what is tested, not a restart. The primary streams the first
  // sync at once (no diskless-sync delay, 5 s by default).
  const common = [
    '--bind',
    HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--repl-diskless-sync-delay',
    '0',
  ];
  const primary = daemon(
    [redis, '--port', String(primaryPort), ...common],
    join(dir, 'primary.log'),
  );
  let link: TcpProxy | undefined;
  let replica: ReturnType<typeof daemon> | undefined;
  const { Redis } = await import('ioredis');
  const info = async (port: number): Promise<string> => {
    const client = new Redis({
      host: HOST,
      port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      connectTimeout: 2000,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return await client.info('replication');
    } finally {
      client.disconnect();
    }
  };
  const field = (text: string, name: string) =>
    new RegExp(`^${name}:(.*)$`, 'm').exec(text)?.[1]?.trim();
  try {
    await waitFor(
      'the Redis primary starting',
      async () => field(await info(primaryPort), 'role') === 'master',
    );
    link = await TcpProxy.start({ host: HOST, port: primaryPort });
    const follow = ['--dbfilename', 'replica.rdb', '--replicaof', HOST, String(link.port)];
    replica = daemon(
      [redis, '--port', String(replicaPort), ...common, ...follow],
      join(dir, 'replica.log'),
    );
    const synced = async () => field(await info(replicaPort), 'master_link_status') === 'up';
    await waitFor('the Redis replica syncing', synced);
  } catch (error) {
    await primary.kill();
    await replica?.kill();
    await link?.close();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const replicationLink = link;
  const replicaServer = replica;
  return {
    backend: 'redis',
    primary: { host: HOST, port: primaryPort },
    replica: { host: HOST, port: replicaPort },
    url: (port) => `redis://${HOST}:${port}/0`,
    async caughtUp() {
      await waitFor('the Redis replica catching up', async () => {
        const offset = field(await info(primaryPort), 'master_repl_offset');
        return (
          offset !== undefined && field(await info(replicaPort), 'slave_repl_offset') === offset
        );
      });
    },
    holdReplication: () => replicationLink.hang(),
    killPrimary: () => primary.kill('SIGKILL'),
    async promote() {
      const client = new Redis({ host: HOST, port: replicaPort, maxRetriesPerRequest: 0 });
      client.on('error', () => undefined);
      try {
        await client.call('REPLICAOF', 'NO', 'ONE');
      } finally {
        client.disconnect();
      }
    },
    async stop() {
      await primary.kill();
      await replicaServer.kill();
      await replicationLink.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
