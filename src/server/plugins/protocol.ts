import {
  STATUS_CODES,
  createServer,
  maxHeaderSize,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { Duplex } from 'node:stream';
import { IdMintError } from '../../core/errors.ts';
import { clip } from '../input.ts';
import { JSON_TYPE, errorJson, publicMessage } from './errors.ts';

/**
 * The HTTP/1.1 edge below Fastify: the Node server idmint listens with, and the answers to what
 * Node's parser rejects before a request reaches Fastify (malformed framing, oversized headers,
 * stalled requests, `Expect`, `CONNECT`, a missing `Host`). Left to Node and Fastify, these get
 * Fastify's error shape, an empty body or no answer at all; here they get idmint's one JSON shape,
 * with `Connection: close`, since after a framing error nothing else on the connection can be
 * trusted.
 */

/** Settings of the listening socket, from the `api` configuration. */
export interface HttpServerSettings {
  /** Time to receive a whole request (headers and body); 0: no limit. */
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
}

/**
 * How often Node looks for requests past `requestTimeoutMs` (Node's default is every 30 s, so a
 * 10 s limit would act after 10 to 40 s). A tenth of the limit, at most a second, bounds a stalled
 * request to the limit plus a second; the check walks only connections with a request in progress.
 */
export function connectionsCheckingIntervalMs(requestTimeoutMs: number): number {
  return requestTimeoutMs === 0
    ? 30_000
    : Math.min(1000, Math.max(10, Math.ceil(requestTimeoutMs / 10)));
}

/**
 * Creates the Node HTTP server for Fastify's `serverFactory`. The timeouts are passed to the
 * constructor: Node sets up its request-timeout checks from the values it is constructed with, so
 * a `requestTimeout` assigned afterwards (as Fastify's own factory does) left a stalled body open
 * for 90 s whatever the setting.
 */
export function createHttpServer(settings: HttpServerSettings, handler: RequestListener): Server {
  const server = createServer(
    {
      requestTimeout: settings.requestTimeoutMs,
      keepAliveTimeout: settings.keepAliveTimeoutMs,
      connectionsCheckingInterval: connectionsCheckingIntervalMs(settings.requestTimeoutMs),
      // Node would answer a missing Host with an empty 400; the listener below answers instead.
      requireHostHeader: false,
    },
    (request, response) => {
      // RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request without Host. Node has
      // already built request.headers to look for `Expect`, so this costs one property read.
      if (
        request.headers.host === undefined &&
        request.httpVersionMajor === 1 &&
        request.httpVersionMinor === 1
      ) {
        answer(
          response,
          new IdMintError('INVALID_ARGUMENT', 'an HTTP/1.1 request must carry a Host header'),
        );
        return;
      }
      handler(request, response);
    },
  );
  // Without a listener Node answers 417 with an empty body.
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const expectation = clip(String(request.headers.expect));
    answer(
      response,
      new IdMintError(
        'EXPECTATION_FAILED',
        `Expect: ${expectation} is not supported; the only expectation this server meets is ` +
          `100-continue`,
      ),
    );
  });
  // Without a listener Node drops a CONNECT without a word. No resource here takes CONNECT, so
  // the Allow header of the 405 is empty (RFC 9110 10.2.1: the resource allows no methods).
  server.on('connect', (_request: IncomingMessage, socket: Duplex) => {
    answerSocket(
      socket,
      new IdMintError('METHOD_NOT_ALLOWED', 'CONNECT is not supported: idmint is not a proxy'),
      'Allow: \r\n',
    );
  });
  return server;
}

/**
 * Fastify's `clientErrorHandler`: answers a request Node's parser rejected, or one that did not
 * arrive whole within `requestTimeoutMs`, in idmint's shape, then closes the connection. These
 * are the client's mistakes (4xx), so nothing is logged, as for every 4xx.
 */
export function clientErrorHandler(
  requestTimeoutMs: number,
): (error: Error & { code?: string; reason?: string }, socket: Duplex) => void {
  return (error, socket) => {
    // A reset connection has nobody to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    // As Node's own handler: answer only if no response on this connection has begun, or the
    // answer would land in the middle of another one.
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })
      ._httpMessage;
    if (
      socket.writable &&
      (inFlight === undefined || inFlight === null || inFlight.headersSent !== true)
    ) {
      writeAndClose(socket, rawResponse(clientError(error, requestTimeoutMs), ''));
    } else {
      socket.destroy();
    }
  };
}

/** The IdMintError for a request Node's parser refused. */
function clientError(
  error: Error & { code?: string; reason?: string },
  requestTimeoutMs: number,
): IdMintError {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new IdMintError(
        'REQUEST_TIMEOUT',
        `the request did not arrive whole within ${requestTimeoutMs} ms ` +
          `(api.requestTimeoutMs); send it again, whole`,
      );
    case 'HPE_HEADER_OVERFLOW':
      return new IdMintError(
        'HEADERS_TOO_LARGE',
        `the request line and headers are larger than ${maxHeaderSize} bytes`,
      );
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new IdMintError(
        'PAYLOAD_TOO_LARGE',
        'the chunk extensions of the request body are too large',
      );
    case 'HPE_PAUSED_H2_UPGRADE':
      return new IdMintError(
        'INVALID_ARGUMENT',
        'HTTP/2 without TLS (prior knowledge) is not supported; send HTTP/1.1',
      );
    default: {
      // llhttp's reason is a fixed phrase ("Invalid character in Content-Length"), never request
      // data.
      const reason = error.reason ?? error.message;
      return new IdMintError(
        'INVALID_ARGUMENT',
        `the request is not valid HTTP/1.1: ` +
          `${clip(reason)}${error.code === undefined ? '' : ` (${error.code})`}`,
      );
    }
  }
}

/** Answers through a ServerResponse Node created for a request Fastify will not see. */
function answer(response: ServerResponse, error: IdMintError): void {
  const body = errorJson(error.code, publicMessage(error, '-'));
  response.writeHead(error.status, {
    'content-type': JSON_TYPE,
    'content-length': Buffer.byteLength(body),
    // A body the client may send after the headers would be read as the next request.
    connection: 'close',
  });
  response.end(body);
}

/** Answers on a bare socket (one Node handed over or gave up on), then closes it. */
function answerSocket(socket: Duplex, error: IdMintError, extraHeaders: string): void {
  writeAndClose(socket, rawResponse(error, extraHeaders));
}

function rawResponse(error: IdMintError, extraHeaders: string): string {
  const body = errorJson(error.code, publicMessage(error, '-'));
  return (
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}\r\n` +
    `Content-Type: ${JSON_TYPE}\r\nContent-Length: ` +
    `${Buffer.byteLength(body)}\r\nConnection: close\r\n${extraHeaders}\r\n${body}`
  );
}

/** Sends the answer, then closes the socket once it is written (or at once if it cannot be). */
function writeAndClose(socket: Duplex, data: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(data, () => socket.destroy());
}
