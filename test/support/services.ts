import { connect } from 'node:net';
import { describe, type SuiteContext } from 'node:test';

/**
 * Addresses of the real services integration suites run against, from env vars with loopback
 * defaults (scripts/services.sh starts them on these ports).
 */
export const SERVICES = {
  postgres: {
    env: 'IDMINT_TEST_POSTGRES_URL',
    url: process.env['IDMINT_TEST_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test',
  },
  mysql: {
    env: 'IDMINT_TEST_MYSQL_URL',
    url: process.env['IDMINT_TEST_MYSQL_URL'] ?? 'mysql://root@127.0.0.1:3306/test',
  },
  redis: {
    env: 'IDMINT_TEST_REDIS_URL',
    url: process.env['IDMINT_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0',
  },
  etcd: {
    env: 'IDMINT_TEST_ETCD',
    url: process.env['IDMINT_TEST_ETCD'] ?? 'http://127.0.0.1:2379',
  },
  zookeeper: {
    env: 'IDMINT_TEST_ZOOKEEPER',
    url: process.env['IDMINT_TEST_ZOOKEEPER'] ?? '127.0.0.1:2181',
  },
} as const;

export type ServiceName = keyof typeof SERVICES;

/** True when IDMINT_REQUIRE_SERVICES=1 (CI): an unreachable service fails instead of skipping. */
export const REQUIRE_SERVICES = process.env['IDMINT_REQUIRE_SERVICES'] === '1';

/** host and port of a service URL (`scheme://user@host:port/...` or `host:port`). */
export function hostPort(url: string): { host: string; port: number } {
  const parsed = new URL(url.includes('://') ? url : `tcp://${url}`);
  return { host: parsed.hostname, port: Number(parsed.port) };
}

/** Resolves true if a TCP connection to the service opens within `timeoutMs`. */
export function reachable(name: ServiceName, timeoutMs = 1000): Promise<boolean> {
  const { host, port } = hostPort(SERVICES[name].url);
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

const checked = new Map<ServiceName, Promise<boolean>>();

/**
 * Checks a service once per test file. Unreachable: with IDMINT_REQUIRE_SERVICES=1 this throws
 * (the suite fails); otherwise it prints a loud line and returns a skip reason.
 */
export async function serviceSkipReason(name: ServiceName): Promise<string | undefined> {
  let probe = checked.get(name);
  if (probe === undefined) {
    probe = reachable(name);
    checked.set(name, probe);
  }
  if (await probe) return undefined;
  const reason =
    `${name} unreachable at ${SERVICES[name].url} (set ${SERVICES[name].env} or run ` +
    `scripts/services.sh up)`;
  if (REQUIRE_SERVICES) throw new Error(`IDMINT_REQUIRE_SERVICES=1 but ${reason}`);
  process.stderr.write(`\n!!! SKIPPING: ${reason}\n`);
  return reason;
}

/**
 * `describe` for a suite that needs real services: skipped loudly when one is unreachable, failed
 * under IDMINT_REQUIRE_SERVICES=1. The check runs before the suite is declared, hence async.
 */
export async function describeWithServices(
  title: string,
  services: readonly ServiceName[],
  body: (context: SuiteContext) => void | Promise<void>,
): Promise<void> {
  let skip: string | undefined;
  for (const service of services) skip ??= await serviceSkipReason(service);
  await describe(title, { skip: skip ?? false }, body);
}

/** A name unique to this run and process, for tables, keys and paths tests create. */
export function uniqueName(prefix: string): string {
  const random = Math.floor(Math.random() * 1e6).toString(36);
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${random}`;
}
