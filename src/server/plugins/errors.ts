import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { type ERROR_CODES, IdMintError, isIdMintError, type ErrorCode } from '../../core/errors.ts';
import { clip } from '../input.ts';

/** Content type of every JSON answer. */
export const JSON_TYPE = 'application/json; charset=utf-8';

/** The codes whose status is 5xx: the server's trouble, not the client's. */
type ServerErrorCode = {
  [K in ErrorCode]: (typeof ERROR_CODES)[K]['status'] extends 500 | 501 | 502 | 503 | 504
    ? K
    : never;
}[ErrorCode];

/**
 * What a client is told for each 5xx code, written here and never taken from the error: a 5xx
 * message is built from whatever failed (a driver's message, a SQL statement, the address of a
 * database or coordinator), which is the operator's to read in the log, not the client's. The
 * type makes a new 5xx code fail to compile until it has its sentence here.
 */
const PUBLIC_MESSAGES: Readonly<Record<ServerErrorCode, string>> = {
  INTERNAL_ERROR: 'internal error',
  LAYOUT_INVALID: "the server's snowflake layout is invalid",
  CONFIG_INVALID: "the server's configuration is invalid",
  DRIVER_MISSING: 'a driver the server needs is not installed',
  SERVER_UNAVAILABLE: 'the server is unavailable; retry',
  SEGMENTS_NOT_READY: "the tag's next range of IDs is not loaded yet; retry",
  STORE_UNAVAILABLE: 'the segment store is unavailable; retry',
  ID_SPACE_EXHAUSTED: "the tag's IDs are used up: its next range would pass 2^63-1",
  TAG_MISCONFIGURED:
    'its row in the segment store has a step or max_id no range can come from; an operator ' +
    'must fix the row',
  REGISTRY_UNAVAILABLE: 'the worker registry is unavailable; retry',
  WORKER_IDS_EXHAUSTED: 'every worker ID is in use; retry',
  CLOCK_MOVED_BACKWARDS:
    "the server's clock is behind the last time it used; retry after Retry-After seconds",
  CLOCK_SKEW: "the server's clock is too far from its peers' clocks",
  LEASE_LOST: "this node's worker-ID lease is not confirmed, so it issues no snowflake IDs; retry",
  ISSUER_UNAVAILABLE: 'no node that issues this cluster-ordered tag could be reached; retry',
  MONOTONIC_OVERFLOW: "this millisecond's monotonic IDs are used up; retry",
  OPAQUE_DOMAIN_EXHAUSTED:
    "the tag's IDs have outgrown the space of its opaque IDs; none is issued",
  OPAQUE_UNAVAILABLE:
    'opaque IDs are not set up on this server (opaque keys, or the opaque column of the ' +
    'segment table)',
  RANGES_EXHAUSTED: "the client's ranges are used up and no server answered; retry",
  TIME_OVERFLOW: "the snowflake layout's time field is used up; no ID can be issued",
  PERIOD_SEQUENCE_EXHAUSTED:
    "the tag's sequence numbers of this period are used up; the next period starts again",
  PERIOD_SWITCHING: 'the tag is at a period boundary; retry after Retry-After seconds',
};

/** Options of {@link installErrorHandling}. */
export interface ErrorHandlingOptions {
  /** Called after a request that matched no route was answered (metrics count it). */
  readonly onNotFound?: (reply: FastifyReply) => void;
  /** Told the code of every error answer {@link sendError} sends (the error counts by code). */
  readonly onError?: (code: ErrorCode) => void;
}

/** Where {@link sendError} finds the app's `onError`: a decoration of the Fastify instance. */
const ON_ERROR = Symbol('idmint.onError');

/**
 * Turns every failure into `{ "error": { "code", "message" } }` with the code's status, plus
 * `Retry-After` when retrying can help. Unknown routes, malformed bodies and framework errors get
 * the same shape, so a client needs one error parser. A 5xx answer carries its code and a fixed
 * sentence with the request's id; the log line with the same id has what failed (message, cause
 * chain, stack). A bug is INTERNAL_ERROR, never a bare 500 page.
 */
export function installErrorHandling(
  app: FastifyInstance,
  log: Logger,
  options: ErrorHandlingOptions = {},
): void {
  const throttle = new LogThrottle(log);
  if (options.onError !== undefined) app.decorate(ON_ERROR, options.onError);
  app.setErrorHandler((error: FastifyError | IdMintError, request, reply) => {
    const known = toIdMintError(error, request.headers['content-type']);
    let loggedAs: string | undefined;
    if (known.status >= 500) {
      loggedAs = throttle.error(
        known.code,
        request.id,
        {
          method: request.method,
          url: request.url,
          code: known.code,
          err: known.code === 'INTERNAL_ERROR' ? error : ownLine(known),
        },
        known.code === 'INTERNAL_ERROR' ? 'unexpected error' : 'request failed',
      );
    }
    sendError(reply, known, loggedAs);
  });
  const { onNotFound } = options;
  app.setNotFoundHandler((request, reply) => {
    sendError(
      reply,
      new IdMintError(
        'ROUTE_NOT_FOUND',
        `no route ${request.method} ${clip(request.url.split('?')[0] ?? '')}; the routes ` +
          `are listed at /openapi.json`,
      ),
    );
    onNotFound?.(reply);
  });
}

/**
 * Writes an IdMintError as the JSON error body with its status (and Retry-After when retryable).
 * A 5xx gets its public sentence and the request id instead of its own message; `loggedAs` is
 * the request whose log line has the details, when it is not this one (see LogThrottle).
 */
export function sendError(
  reply: FastifyReply,
  error: IdMintError,
  loggedAs?: string,
): FastifyReply {
  if (error.retryable) reply.header('retry-after', String(retryAfterSeconds(error)));
  // RFC 7235: a 401 says which scheme would work.
  if (error.code === 'UNAUTHORIZED') reply.header('www-authenticate', 'Bearer realm="idmint"');
  (reply.server as unknown as { [ON_ERROR]?: (code: ErrorCode) => void })[ON_ERROR]?.(error.code);
  return reply
    .code(error.status)
    .type(JSON_TYPE)
    .send(errorJson(error.code, publicMessage(error, reply.request.id, loggedAs)));
}

/**
 * The message a client may see: the error's own for a 4xx; for a 5xx a fixed sentence (naming
 * the tag asked for, where there is one), the request id, and, when this request's failure was not
 * logged on its own line, the request whose line has the details.
 */
export function publicMessage(error: IdMintError, requestId: string, loggedAs?: string): string {
  if (error.status < 500) return error.message;
  const fixed =
    (PUBLIC_MESSAGES as Partial<Record<ErrorCode, string>>)[error.code] ?? 'the server failed';
  // The tag is the client's own input, so naming it leaks nothing and says which tag failed.
  const tag = error.details?.['tag'];
  const sentence = typeof tag === 'string' ? `tag ${JSON.stringify(tag)}: ${fixed}` : fixed;
  const where =
    loggedAs === undefined || loggedAs === requestId
      ? 'the server log has the details'
      : `the server log has the details under request ${loggedAs}`;
  return `${sentence} (request ${requestId}; ${where})`;
}

/** The error body, `{"error":{"code":...,"message":...}}`, as a string. */
export function errorJson(code: ErrorCode, message: string): string {
  return `{"error":{"code":"${code}","message":${JSON.stringify(message)}}}`;
}

/**
 * Seconds a client should wait: how far the clock is behind, the rest of a period boundary's pause,
 * else one second.
 */
function retryAfterSeconds(error: IdMintError): number {
  const offset =
    error.code === 'CLOCK_MOVED_BACKWARDS'
      ? error.details?.['offsetMs']
      : error.code === 'PERIOD_SWITCHING'
        ? error.details?.['retryAfterMs']
        : undefined;
  return typeof offset === 'number' && offset > 0 ? Math.ceil(offset / 1000) : 1;
}

/**
 * A known failure as logged: its own message and stack, not its causes'. pino would append each
 * cause's message to the line (a driver's "Connection terminated unexpectedly"), where the
 * message already says what failed in words: the backend, its address and the cause (issue 23).
 * A bug (INTERNAL_ERROR) is logged whole.
 */
function ownLine(error: IdMintError): { type: string; message: string; stack?: string } {
  return { type: error.name, message: error.message, stack: error.stack };
}

/**
 * Maps Fastify's own errors (body parsing, validation, bad URLs) to idmint codes. `contentType`
 * is the request's, named in a 415.
 */
export function toIdMintError(error: unknown, contentType?: string): IdMintError {
  if (isIdMintError(error)) return error;
  const fastify = error as Partial<FastifyError> & { validation?: unknown };
  const message = typeof fastify.message === 'string' ? fastify.message : String(error);
  switch (fastify.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new IdMintError(
        'PAYLOAD_TOO_LARGE',
        'request body is larger than api.bodyLimit allows',
        { cause: error },
      );
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new IdMintError('UNSUPPORTED_MEDIA_TYPE', unsupportedMediaTypeMessage(contentType), {
        cause: error,
      });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new IdMintError('INVALID_ARGUMENT', 'request body is not valid JSON', {
        cause: error,
      });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new IdMintError('INVALID_ARGUMENT', 'request body is empty; send a JSON object', {
        cause: error,
      });
    case 'FST_ERR_VALIDATION':
      return new IdMintError('INVALID_ARGUMENT', validationMessage(fastify), { cause: error });
    default:
      break;
  }
  // JSON.parse failures and the other 4xx conditions Fastify detects (invalid content length,
  // bad URL encoding, prototype poisoning) are the client's to fix.
  if (
    typeof fastify.statusCode === 'number' &&
    fastify.statusCode >= 400 &&
    fastify.statusCode < 500
  ) {
    const text =
      error instanceof SyntaxError ? `request body is not valid JSON: ${message}` : message;
    return new IdMintError('INVALID_ARGUMENT', text, { cause: error });
  }
  return new IdMintError('INTERNAL_ERROR', 'internal error; the server log has the details', {
    cause: error,
  });
}

/**
 * A 415 naming what is accepted and what was sent: JSON sent as text/plain (curl -d without
 * -H 'content-type: application/json') is the usual case.
 */
function unsupportedMediaTypeMessage(contentType: string | undefined): string {
  const sent =
    contentType === undefined || contentType.trim() === '' ? 'none' : clip(contentType.trim());
  return (
    `request body must be JSON sent with Content-Type: application/json (Content-Type was ` +
    `${sent})`
  );
}

interface ValidationIssue {
  readonly instancePath?: string;
  readonly keyword?: string;
  readonly message?: string;
  readonly params?: Record<string, unknown>;
}

/** "body.step must be integer" -> a sentence naming the field and what is allowed. */
function validationMessage(error: {
  validation?: unknown;
  validationContext?: string;
  message?: string;
}): string {
  const issue = Array.isArray(error.validation)
    ? (error.validation[0] as ValidationIssue | undefined)
    : undefined;
  if (issue === undefined) return error.message ?? 'invalid request';
  const where = error.validationContext ?? 'request';
  const path = (issue.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
  if (issue.keyword === 'additionalProperties') {
    return `${where} has an unknown field "${String(issue.params?.['additionalProperty'])}"`;
  }
  if (issue.keyword === 'minProperties') return `${where} must set at least one field`;
  if (issue.keyword === 'required')
    return `${where} is missing the field "${String(issue.params?.['missingProperty'])}"`;
  const subject = path === '' ? where : `${where}.${path}`;
  if (issue.keyword === 'const') {
    // Ajv says "must be equal to constant"; a choice of literals is one `const` issue per
    // literal at the same path: name them all.
    const allowed = error.validation as ValidationIssue[];
    const values = allowed
      .filter((other) => other.keyword === 'const' && other.instancePath === issue.instancePath)
      .map((other) => JSON.stringify(other.params?.['allowedValue']));
    return values.length === 1
      ? `${subject} must be ${values[0]}`
      : `${subject} must be one of ${values.join(', ')}`;
  }
  return `${subject} ${issue.message ?? 'is invalid'}`;
}

/**
 * Logs at most one line per error code per interval: during a database outage every request
 * fails the same way, and 50,000 identical lines a second would bury the one that matters. A
 * line carries its request's id (`reqId`) and how many were suppressed before it; a suppressed
 * request is answered with the id of the line that was logged for its code.
 */
class LogThrottle {
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #last = new Map<string, { at: number; reqId: string; suppressed: number }>();

  constructor(log: Logger, intervalMs = 5000) {
    this.#log = log;
    this.#intervalMs = intervalMs;
  }

  /**
   * Logs the failure of request `reqId`, or counts it; returns the request whose line has the
   * details.
   */
  error(key: string, reqId: string, fields: Record<string, unknown>, message: string): string {
    const now = Date.now();
    const entry = this.#last.get(key);
    if (entry !== undefined && now - entry.at < this.#intervalMs) {
      entry.suppressed++;
      return entry.reqId;
    }
    const suppressed =
      entry === undefined || entry.suppressed === 0 ? {} : { suppressed: entry.suppressed };
    this.#log.error({ reqId, ...fields, ...suppressed }, message);
    this.#last.set(key, { at: now, reqId, suppressed: 0 });
    return reqId;
  }
}
