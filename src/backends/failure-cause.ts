// Why a backend failed, in the words the operating system (or the database) gave: refused, timed
// out, read-only, permission denied. A failure reaches the operator as one line naming the
// backend, its address and this cause, never a driver's wording ("the circuit breaker is open")
// nor an internal method name ("listTagChanges failed").

import { connect } from 'node:net';
import { connect as connectTls } from 'node:tls';
import type { UrlHost } from '../shared/connection-url.ts';

/** System error codes, as words. */
const OS_CAUSES: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection reset',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'host does not resolve',
  EAI_AGAIN: 'host does not resolve',
  EROFS: 'read-only file system',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ENOSPC: 'no space left on device',
};

/**
 * Database codes whose server message is the cause as the database gave it (PostgreSQL's
 * insufficient_privilege and authentication failures; MySQL's access denied errors).
 */
const DATABASE_REFUSALS = new Set([
  '42501',
  '28000',
  '28P01',
  'ER_ACCESS_DENIED_ERROR',
  'ER_DBACCESS_DENIED_ERROR',
  'ER_TABLEACCESS_DENIED_ERROR',
  'ER_SPECIFIC_ACCESS_DENIED_ERROR',
]);

/** A bound that was hit, as idmint's own timeouts word it ("timed out after 1000 ms"). */
const TIMED_OUT = /(?:timed out after|no connection within|no answer within) (\d+) ms/;

/** The errors behind `error`, outermost first: its causes, and an aggregate's errors. */
function chain(error: unknown): unknown[] {
  const seen: unknown[] = [];
  const queue = [error];
  while (queue.length > 0 && seen.length < 16) {
    const next = queue.shift();
    if (next === null || next === undefined || seen.includes(next)) continue;
    seen.push(next);
    const { cause, errors } = next as { cause?: unknown; errors?: unknown };
    if (cause !== undefined) queue.push(cause);
    if (Array.isArray(errors)) queue.push(...errors);
  }
  return seen;
}

/**
 * The cause of a backend failure in words, or undefined when nothing in it says (the caller may
 * then probe the address, see {@link probeAddress}). A system code anywhere in the chain wins
 * over a timeout, which wins over a database's refusal.
 */
export function failureCause(error: unknown): string | undefined {
  const errors = chain(error);
  for (const item of errors) {
    const code = (item as { code?: unknown }).code;
    if (typeof code === 'string' && OS_CAUSES[code] !== undefined) return OS_CAUSES[code];
    // gRPC (etcd) and some drivers carry the system error only in their message text.
    const text = item instanceof Error ? item.message : '';
    const named = /\b(E[A-Z]{3,}[A-Z_]*)\b/.exec(text)?.[1];
    if (named !== undefined && OS_CAUSES[named] !== undefined) return OS_CAUSES[named];
  }
  for (const item of errors) {
    const text = item instanceof Error ? item.message : '';
    const bound = TIMED_OUT.exec(text)?.[1];
    if (bound !== undefined) return `timed out after ${bound} ms`;
    if (/\btime(?:d)? ?out\b|deadline exceeded/i.test(text)) return 'timed out';
  }
  for (const item of errors) {
    const code = (item as { code?: unknown }).code;
    if (typeof code === 'string' && DATABASE_REFUSALS.has(code) && item instanceof Error)
      return item.message;
  }
  return undefined;
}

/**
 * Driver wording for "no usable connection" (etcd3's circuit breaker, ioredis without an offline
 * queue): said only when every attempt failed, which the system words differently (refused, or
 * no answer).
 */
const DRIVER_GAVE_UP =
  /circuit breaker is open|Stream isn't writeable|Connection is closed|max retries per request/;

/** True when `error` is a driver giving up on its connection in its own words. */
export function driverGaveUp(error: unknown): boolean {
  return chain(error).some((item) => item instanceof Error && DRIVER_GAVE_UP.test(item.message));
}

/**
 * What connecting to `host` says, within `timeoutMs`: 'connection refused' (or another system
 * cause) when the connection fails, undefined when it opens or the probe runs out of time. For
 * drivers that retry a refused connection until their own timeout and report only that. With
 * `tls` (rediss:) the probe also shakes hands, so an untrusted certificate is named as such.
 */
export function probeAddress(
  host: UrlHost,
  timeoutMs: number,
  tls = false,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    if (host.host === '' || host.port === undefined) return resolve(undefined);
    const target = { host: host.host, port: host.port };
    const socket = tls ? connectTls(target) : connect(target);
    const done = (cause: string | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(cause);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    socket.once(tls ? 'secureConnect' : 'connect', () => done(undefined));
    socket.once('error', (error: NodeJS.ErrnoException) =>
      done(
        OS_CAUSES[error.code ?? ''] ?? (tls ? `TLS handshake failed: ${error.message}` : undefined),
      ),
    );
  });
}
