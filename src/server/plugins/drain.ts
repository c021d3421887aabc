import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer } from 'node:net';

/**
 * How long a keep-alive connection that is idle when the drain begins stays open for its next
 * request. Closing an idle connection races with a request the client is sending on it at that
 * moment (the request meets a reset), so closing them all at once when the drain begins, as
 * Node's server.close() does, resets requests that were already on their way. Two seconds lets
 * those, and the requests of clients that keep sending until they see `Connection: close`, arrive
 * and be served; a connection still idle after that is closed, as its keep-alive timeout would
 * (a client retries on a fresh connection to another node). Bounded by the shutdown timeout.
 */
export const DRAIN_IDLE_GRACE_MS = 2000;

/** How {@link drainHttpServer} bounds the drain. */
export interface DrainOptions {
  /**
   * When connections still open are closed, requests in flight or not (`api.shutdownTimeoutMs`).
   */
  readonly timeoutMs: number;
  /** Called when `timeoutMs` passes with connections still open, before they are closed. */
  readonly onTimeout?: () => void;
  /** Override of {@link DRAIN_IDLE_GRACE_MS}. */
  readonly idleGraceMs?: number;
}

/**
 * Drains a listening HTTP/1.1 server without resetting a request that reached it:
 * 1. it stops accepting connections, but leaves the open ones open;
 * 2. every request that arrives on an open connection is served, with `Connection: close`, and
 *    the connection closes after that response (a client learns it must reconnect);
 * 3. connections still idle after the grace period are closed; one busy then closes after its
 *    response;
 * 4. after `timeoutMs` whatever is left is closed.
 * Resolves when every connection is closed. A server that is not listening resolves at once.
 */
export async function drainHttpServer(server: Server, options: DrainOptions): Promise<void> {
  if (!server.listening) return;
  const closeAfterResponse = (_request: IncomingMessage, response: ServerResponse): void => {
    response.setHeader('connection', 'close');
  };
  // Runs before Fastify's handler, only while draining: the hot path pays nothing until then.
  server.prependListener('request', closeAfterResponse);
  // net.Server's close, not http.Server's: the latter also closes every idle connection at once
  // (Node >= 19), resetting requests already on their way.
  const allClosed = new Promise<void>((resolve) => {
    NetServer.prototype.close.call(server, () => resolve());
  });
  const graceMs = Math.min(options.idleGraceMs ?? DRAIN_IDLE_GRACE_MS, options.timeoutMs);
  let reaper: NodeJS.Timeout | undefined;
  const grace = setTimeout(() => {
    server.closeIdleConnections();
    // A response that began before the drain carries no `Connection: close`; its connection
    // turns idle afterwards, and is closed then.
    reaper = setInterval(() => server.closeIdleConnections(), 100);
  }, graceMs);
  const deadline = setTimeout(() => {
    options.onTimeout?.();
    server.closeAllConnections();
  }, options.timeoutMs);
  try {
    await allClosed;
  } finally {
    clearTimeout(grace);
    clearTimeout(deadline);
    clearInterval(reaper);
    server.off('request', closeAfterResponse);
  }
}
