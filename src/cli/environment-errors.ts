// Failures of the environment (a port in use, a host that does not resolve, a store that does
// not answer) put in one line naming the setting to look at, with exit status 1. Configuration
// mistakes are caught earlier, by the configuration (exit 2); what is left here is what only
// trying can tell.
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { isIdMintError } from '../core/errors.ts';
import { type BackendUrl, parseBackendUrl } from '../backends/catalog.ts';
import { driverGaveUp, failureCause, probeAddress } from '../shared/failure-cause.ts';
import type { BackendRole as UrlRole } from '../backends/descriptor.ts';
import { withTimeout } from '../shared/timeout.ts';
import { EXIT_FAILURE } from './exit-codes.ts';
import { CommandFailure } from './io.ts';

/** How long a host name may take to resolve when explaining a failure. */
const LOOKUP_TIMEOUT_MS = 2000;

/**
 * Why `listen(host, port)` failed, in one line naming IDMINT_HOST or IDMINT_PORT; undefined for an
 * error it does not know.
 */
export function listenFailure(
  error: unknown,
  host: string,
  port: number,
): CommandFailure | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  const fail = (message: string) => new CommandFailure(message, EXIT_FAILURE, { cause: error });
  switch (code) {
    case 'EADDRINUSE':
      return fail(`port ${port} (IDMINT_PORT) is in use by another process`);
    case 'EADDRNOTAVAIL':
      return fail(`host ${host} (IDMINT_HOST) is not an address of this machine`);
    case 'EACCES':
      return fail(
        `port ${port} (IDMINT_PORT) is below 1024 and needs privileges this process lacks ` +
          '(use 1024 or above, or grant CAP_NET_BIND_SERVICE)',
      );
    case 'ENOTFOUND':
    case 'EAI_NONAME':
    case 'EAI_AGAIN':
      return fail(`host "${host}" (IDMINT_HOST) does not resolve`);
    case 'EAFNOSUPPORT':
      return fail(`host ${host} (IDMINT_HOST): this machine has no network of that address family`);
    default:
      return undefined;
  }
}

/** A backend URL and the variable that sets it, for {@link backendFailure}. */
export interface BackendSetting {
  readonly url: string;
  readonly role: UrlRole;
  /** `IDMINT_SEGMENT_STORE`, `IDMINT_WORKER_REGISTRY`, `--store`. */
  readonly name: string;
  /**
   * The bound the backend's calls were given (segment.timeoutMs, snowflake.registryTimeoutMs):
   * a driver that says only "timed out" ran out of it, and the line says how long it waited.
   */
  readonly timeoutMs?: number;
  /**
   * `url` is the first of a set of databases (segment.stores): the set's failure names each
   * database, its address and its cause itself, and is told as it is.
   */
  readonly set?: boolean;
}

/**
 * A store or registry failure (STORE_UNAVAILABLE, REGISTRY_UNAVAILABLE) in one line naming the
 * setting: `host "db.example" in the segment store URL (IDMINT_SEGMENT_STORE) does not resolve`
 * when a host of its URL does not resolve, else the failure itself prefixed with the setting.
 * Undefined for any other error (it is already as clear as it gets, or a configuration error).
 */
export async function backendFailure(
  error: unknown,
  settings: readonly BackendSetting[],
): Promise<CommandFailure | undefined> {
  const role: UrlRole | undefined = isIdMintError(error, 'STORE_UNAVAILABLE')
    ? 'segment-store'
    : isIdMintError(error, 'REGISTRY_UNAVAILABLE')
      ? 'worker-registry'
      : undefined;
  const setting = settings.find((s) => s.role === role);
  if (setting === undefined || !(error instanceof Error)) return undefined;
  const what = role === 'segment-store' ? 'segment store' : 'worker registry';
  const unresolved = await unresolvedHost(setting.url, setting.role);
  if (unresolved !== undefined)
    return new CommandFailure(
      `host "${unresolved}" in the ${what} URL (${setting.name}) does not resolve`,
      EXIT_FAILURE,
      { cause: error },
    );
  // A message that names its setting already (`cannot open SQLite file ... (IDMINT_SEGMENT_STORE)`)
  // stays as it is.
  if (error.message.includes(setting.name))
    return new CommandFailure(error.message, EXIT_FAILURE, { cause: error });
  const where = setting.set === true ? error.message : await backendAndCause(setting, error);
  return new CommandFailure(`${what} (${setting.name}): ${where}`, EXIT_FAILURE, {
    cause: error,
  });
}

/**
 * `postgres at db:5432: connection refused`: the backend, its address and the cause as the
 * operating system or the database gave it. A driver that reports a refused connection only as
 * its own timeout (ZooKeeper's client retries it; etcd's opens a circuit breaker) is seen
 * through by connecting to the address once. The failure's own message is the last resort.
 */
async function backendAndCause(setting: BackendSetting, error: Error): Promise<string> {
  let url: BackendUrl;
  try {
    url = parseBackendUrl(setting.url, setting.role);
  } catch {
    return error.message;
  }
  let cause = failureCause(error);
  if (cause === undefined || cause.startsWith('timed out')) {
    const tls = (url.options as { tls?: unknown } | undefined)?.tls !== undefined;
    for (const host of url.hosts) {
      const probed = await probeAddress(host, LOOKUP_TIMEOUT_MS, tls);
      if (probed !== undefined) {
        cause = probed;
        break;
      }
    }
  }
  // The address accepts connections, yet the driver found none it could use: no answer in time.
  if (cause === undefined && driverGaveUp(error)) cause = 'timed out';
  // Every backend's start fails within its bound, worded as ZooKeeper's and idmint's own timers
  // word it; a driver's own timer (mysql2's connectTimeout, ETIMEDOUT) is set to the same bound.
  if (cause === 'timed out' && setting.timeoutMs !== undefined)
    cause = `timed out after ${setting.timeoutMs} ms`;
  return `${url.backend.kind} at ${url.target}: ${cause ?? innermostMessage(error)}`;
}

/** The message of the innermost cause: the driver's or the database's words, not idmint's. */
function innermostMessage(error: Error): string {
  let inner: Error = error;
  for (let depth = 0; depth < 16 && inner.cause instanceof Error; depth++) inner = inner.cause;
  return inner.message;
}

/** The first host name of `url` that does not resolve, if any (IP addresses are not looked up). */
async function unresolvedHost(url: string, role: UrlRole): Promise<string | undefined> {
  let hosts: string[];
  try {
    hosts = parseBackendUrl(url, role).hosts.map((h) => h.host);
  } catch {
    return undefined;
  }
  for (const host of hosts) {
    if (host === '' || isIP(host) !== 0) continue;
    const found = await withTimeout(
      lookup(host),
      LOOKUP_TIMEOUT_MS,
      () => new Error('lookup timed out'),
    ).then(
      () => true,
      (reason: unknown) =>
        !['ENOTFOUND', 'EAI_NONAME', 'EAI_FAIL', 'EAI_NODATA'].includes(
          String((reason as { code?: unknown }).code),
        ),
    );
    if (!found) return host;
  }
  return undefined;
}
