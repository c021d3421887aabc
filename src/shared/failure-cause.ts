// Why a backend failed, in the words the operating system (or the database) gave: refused, timed
// out, read-only, permission denied. A failure reaches the operator as one line naming the
// backend, its address and this cause, never a driver's wording ("the circuit breaker is open")
// nor an internal method name ("listTagChanges failed"). Shared by the adapters (runtime
// failures) and the CLI (start-up failures), so both say the same thing in the same words.

import { connect } from 'node:net';
import { connect as connectTls } from 'node:tls';
import type { UrlHost } from './connection-url.ts';

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
  // PostgreSQL: read-only transaction, and a server shutting down or starting up.
  '25006',
  '57P01',
  '57P02',
  '57P03',
  '28000',
  '28P01',
  'ER_ACCESS_DENIED_ERROR',
  'ER_DBACCESS_DENIED_ERROR',
  'ER_TABLEACCESS_DENIED_ERROR',
  'ER_SPECIFIC_ACCESS_DENIED_ERROR',
  // MySQL: the server runs read_only, or the table is.
  'ER_OPTION_PREVENTS_STATEMENT',
  'ER_OPEN_AS_READONLY',
]);

/** A bound that was hit, as idmint's own timeouts word it ("timed out after 1000 ms"). */
const TIMED_OUT =
  /(?:timed out after|no connection within|no answer(?: from \S+)? within) (\d+) ms/;

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

/**
 * Driver wording for a connection the other end closed (PostgreSQL's "Connection terminated
 * unexpectedly", MySQL's PROTOCOL_CONNECTION_LOST, ZooKeeper's CONNECTION_LOSS): the system
 * says only that the connection ended.
 */
const CLOSED =
  /Connection terminated|PROTOCOL_CONNECTION_LOST|Connection lost|CONNECTION_LOSS|socket hang up/;

/**
 * gRPC's (etcd's) wording for a connection attempt that failed without a system error (the
 * server closed it, or the handshake failed): said as such.
 */
const NOT_CONNECTED = /No connection established|Failed to connect/;

/** SQLite's result codes for a file it may not write, as words (node:sqlite's `errcode`). */
const SQLITE_CAUSES: Readonly<Record<number, string>> = {
  8: 'the file is read-only',
  3: 'permission denied',
  13: 'no space left on device',
  14: 'cannot open the file',
};

/**
 * `error`'s cause in words: {@link failureCause}, else "connection closed" for a driver's word
 * for it, else SQLite's code in words, else undefined.
 */
function knownCause(error: unknown): string | undefined {
  const cause = failureCause(error);
  if (cause !== undefined) return cause;
  const errors = chain(error);
  if (errors.some((item) => item instanceof Error && CLOSED.test(item.message)))
    return 'connection closed';
  if (errors.some((item) => item instanceof Error && NOT_CONNECTED.test(item.message)))
    return 'could not connect';
  for (const item of errors) {
    const errcode = (item as { errcode?: unknown }).errcode;
    // The primary result code is the low byte (SQLITE_READONLY_DBMOVED is 8 | 4 << 8).
    if (typeof errcode === 'number' && SQLITE_CAUSES[errcode & 0xff] !== undefined)
      return SQLITE_CAUSES[errcode & 0xff];
    // Node's TLS and certificate codes: the handshake's own words say what to fix, as the
    // start-up probe says them (rediss: with an untrusted certificate).
    const code = (item as { code?: unknown }).code;
    if (typeof code === 'string' && TLS_CODE.test(code) && item instanceof Error)
      return `TLS handshake failed: ${item.message}`;
  }
  return undefined;
}

/** Node's codes for a failed TLS handshake (ERR_TLS_..., SELF_SIGNED_CERT_IN_CHAIN, ...). */
const TLS_CODE = /^ERR_TLS_|^ERR_SSL_|CERT|^UNABLE_TO_(GET|VERIFY)_/;

/** The message of the innermost cause: the database's own words where nothing else says. */
function innermost(error: unknown): string {
  const errors = chain(error).filter((item) => item instanceof Error);
  const last = errors[errors.length - 1];
  return last === undefined ? String(error) : last.message;
}

/**
 * The cause of one backend's failures in words, remembering the last one the system named. A
 * driver that gives up in its own words (etcd3's open circuit breaker, ioredis without an offline
 * queue) failed for the reason seen last, which its own error no longer carries. One per adapter
 * instance; nothing is shared between instances.
 */
export class BackendCauses {
  #last: string | undefined;
  /** A cause the driver reported on the side since the last call that succeeded. */
  #pending: string | undefined;

  /**
   * Notes a connection error a driver reports on the side, not through a failing call (ioredis's
   * 'error' events while it reconnects).
   */
  saw(error: unknown): void {
    const cause = knownCause(error);
    if (cause === undefined) return;
    this.#last = cause;
    this.#pending = cause;
  }

  /** A call succeeded: what was seen on the side before is over. */
  succeeded(): void {
    this.#pending = undefined;
  }

  /** Why `error` happened, in the system's or the database's words. */
  of(error: unknown): string {
    if (driverGaveUp(error)) return this.#last ?? 'not connected';
    const cause = knownCause(error);
    if (cause !== undefined) {
      this.#last = cause;
      return cause;
    }
    return innermost(error);
  }

  /**
   * Why a call ran out of its `ms`: the connection error seen on the side since the last call
   * that succeeded (a driver reconnecting to a refused port keeps the call waiting), else the
   * timeout itself.
   */
  timedOut(ms: number): string {
    return this.#pending ?? `timed out after ${ms} ms`;
  }
}

/** camelCase as words: an operation named in code, said to a person ("listTagPage"). */
export function inWords(name: string): string {
  return name.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase();
}

/**
 * The one line a backend failure is told in: `postgres segment store at db:5432, allocating a
 * range: connection refused`. `where` is the address without credentials (host:port, a file),
 * absent when the adapter was built without one; `doing` is the operation in words.
 */
export function failureLine(
  backend: string,
  role: 'segment store' | 'worker registry',
  where: string | undefined,
  doing: string | undefined,
  cause: string,
): string {
  const at = where === undefined || where === '' ? '' : ` at ${where}`;
  return `${backend} ${role}${at}${doing === undefined ? '' : `, ${doing}`}: ${cause}`;
}

/** The causes of a failure that say the backend gave no answer at all, as the end of a line. */
const NO_ANSWER = new RegExp(
  `: (?:${[
    'connection (?:refused|reset|closed)',
    'timed out(?: after \\d+ ms)?',
    '(?:host|network) unreachable',
    'host does not resolve',
    'could not connect',
    'not connected',
  ].join('|')})$`,
);

/**
 * True when `line` (a {@link failureLine}) says the backend did not answer (refused, timed out,
 * unreachable), false when it answered with a refusal of its own (permission denied, read-only).
 */
export function saysNoAnswer(line: string): boolean {
  return NO_ANSWER.test(line);
}
