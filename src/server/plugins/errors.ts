import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { clip } from '../input.ts';

/** Content type of every JSON answer. */
export const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Turns every failure into `{ "error": { "code", "message" } }` with the code's status, plus
 * `Retry-After` when retrying can help. Unknown routes, malformed bodies and framework errors get
 * the same shape, so a client needs one error parser; a bug is INTERNAL_ERROR, logged with its
 * stack, never a bare 500 page.
 */
export function installErrorHandling(app: FastifyInstance, log: Logger): void {
  const throttle = new LogThrottle(log);
  app.setErrorHandler((error: FastifyError | IdMintError, request, reply) => {
    const known = toIdMintError(error);
    if (known.code === 'INTERNAL_ERROR') throttle.error(known.code, { err: error, method: request.method, url: request.url }, 'unexpected error');
    else if (known.status >= 500) throttle.error(known.code, { code: known.code, err: known.message }, 'request failed');
    sendError(reply, known);
  });
  app.setNotFoundHandler((request, reply) => {
    sendError(reply, new IdMintError('ROUTE_NOT_FOUND', `no route ${request.method} ${clip(request.url.split('?')[0] ?? '')}; the routes are listed at /openapi.json`));
  });
}

/** Writes an IdMintError as the JSON error body with its status (and Retry-After when retryable). */
export function sendError(reply: FastifyReply, error: IdMintError): FastifyReply {
  if (error.retryable) reply.header('retry-after', String(retryAfterSeconds(error)));
  // RFC 7235: a 401 says which scheme would work.
  if (error.code === 'UNAUTHORIZED') reply.header('www-authenticate', 'Bearer realm="idmint"');
  return reply
    .code(error.status)
    .type(JSON_TYPE)
    .send(`{"error":{"code":"${error.code}","message":${JSON.stringify(error.message)}}}`);
}

/** Seconds a client should wait: how far the clock is behind, else one second. */
function retryAfterSeconds(error: IdMintError): number {
  const offset = error.code === 'CLOCK_MOVED_BACKWARDS' ? error.details?.['offsetMs'] : undefined;
  return typeof offset === 'number' && offset > 0 ? Math.ceil(offset / 1000) : 1;
}

/** Maps Fastify's own errors (body parsing, validation, bad URLs) to idmint codes. */
export function toIdMintError(error: unknown): IdMintError {
  if (isIdMintError(error)) return error;
  const fastify = error as Partial<FastifyError> & { validation?: unknown };
  const message = typeof fastify.message === 'string' ? fastify.message : String(error);
  switch (fastify.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new IdMintError('PAYLOAD_TOO_LARGE', 'request body is larger than api.bodyLimit allows', { cause: error });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new IdMintError('UNSUPPORTED_MEDIA_TYPE', 'request body must be JSON (Content-Type: application/json)', { cause: error });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new IdMintError('INVALID_ARGUMENT', 'request body is not valid JSON', { cause: error });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new IdMintError('INVALID_ARGUMENT', 'request body is empty; send a JSON object', { cause: error });
    case 'FST_ERR_VALIDATION':
      return new IdMintError('INVALID_ARGUMENT', validationMessage(fastify), { cause: error });
    default:
      break;
  }
  // JSON.parse failures and the other 4xx conditions Fastify detects (invalid content length,
  // bad URL encoding, prototype poisoning) are the client's to fix.
  if (typeof fastify.statusCode === 'number' && fastify.statusCode >= 400 && fastify.statusCode < 500) {
    const text = error instanceof SyntaxError ? `request body is not valid JSON: ${message}` : message;
    return new IdMintError('INVALID_ARGUMENT', text, { cause: error });
  }
  return new IdMintError('INTERNAL_ERROR', 'internal error; the server log has the details', { cause: error });
}

interface ValidationIssue {
  readonly instancePath?: string;
  readonly keyword?: string;
  readonly message?: string;
  readonly params?: Record<string, unknown>;
}

/** "body.step must be integer" -> a sentence naming the field and what is allowed. */
function validationMessage(error: { validation?: unknown; validationContext?: string; message?: string }): string {
  const issue = Array.isArray(error.validation) ? (error.validation[0] as ValidationIssue | undefined) : undefined;
  if (issue === undefined) return error.message ?? 'invalid request';
  const where = error.validationContext ?? 'request';
  const path = (issue.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
  if (issue.keyword === 'additionalProperties') {
    return `${where} has an unknown field "${String(issue.params?.['additionalProperty'])}"`;
  }
  if (issue.keyword === 'minProperties') return `${where} must set at least one field`;
  if (issue.keyword === 'required') return `${where} is missing the field "${String(issue.params?.['missingProperty'])}"`;
  const subject = path === '' ? where : `${where}.${path}`;
  return `${subject} ${issue.message ?? 'is invalid'}`;
}

/**
 * Logs at most one line per error code per interval: during a database outage every request
 * fails the same way, and 50,000 identical lines a second would bury the one that matters.
 */
class LogThrottle {
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #last = new Map<string, { at: number; suppressed: number }>();

  constructor(log: Logger, intervalMs = 5000) {
    this.#log = log;
    this.#intervalMs = intervalMs;
  }

  error(key: string, fields: Record<string, unknown>, message: string): void {
    const now = Date.now();
    const entry = this.#last.get(key);
    if (entry !== undefined && now - entry.at < this.#intervalMs) {
      entry.suppressed++;
      return;
    }
    this.#log.error(entry !== undefined && entry.suppressed > 0 ? { ...fields, suppressed: entry.suppressed } : fields, message);
    this.#last.set(key, { at: now, suppressed: 0 });
  }
}
