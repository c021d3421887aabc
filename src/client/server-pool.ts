import { IdMintError } from '../core/errors.ts';
import { errorFrom, unreachable } from './http-errors.ts';

/** How {@link ServerPool} treats its servers. */
export interface ServerPoolOptions {
  /** Base URLs, already checked (http or https, no trailing slash). */
  readonly bases: readonly string[];
  readonly headers: Readonly<Record<string, string>>;
  /**
   * Each attempt is abandoned after this many ms; its answer, if one comes later, is never read.
   */
  readonly timeoutMs: number;
  /** First backoff of a failing server, doubled on each further failure up to maxBackoffMs. */
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  readonly fetch: typeof fetch;
  /** Milliseconds on a monotonic-enough clock (tests inject one). */
  readonly now: () => number;
  /**
   * Which server to prefer first; default a random one, so many clients spread over the servers.
   */
  readonly preferred?: number;
}

/** A server's state as the pool sees it, for stats. */
export interface ServerState {
  readonly url: string;
  /** True while it is marked down (until `downUntil`). */
  readonly down: boolean;
  /** Clock time until which it is not asked; 0 when up. */
  readonly downUntil: number;
  /** Failures in a row. */
  readonly failures: number;
}

interface Server {
  readonly base: string;
  downUntil: number;
  failures: number;
}

/**
 * Several idmint servers behind one `get`: a request goes to the preferred server, and one that
 * fails (unreachable, timed out, or a retryable 5xx) is marked down with an exponential backoff
 * while the next server is tried. The server that answered becomes the preferred one: a client
 * sticks to one server while it works (its ranges then come from one buffer, in order) and each
 * client starts at a random one, which spreads clients over the servers.
 *
 * A timed-out request is aborted (`AbortSignal.timeout`): whatever it would have answered is never
 * read, so a range the server reserved for it is simply skipped, never used.
 */
export class ServerPool {
  readonly #servers: Server[];
  readonly #o: ServerPoolOptions;
  #preferred: number;

  constructor(options: ServerPoolOptions) {
    this.#o = options;
    this.#servers = options.bases.map((base) => ({ base, downUntil: 0, failures: 0 }));
    this.#preferred = options.preferred ?? Math.floor(Math.random() * this.#servers.length);
  }

  /**
   * GETs `path` (JSON) from the first server that answers. Throws the server's own error when it is
   * not retryable (a 4xx: asking another server would get the same); SERVER_UNAVAILABLE when no
   * server answered, with `details.retryAt` the clock time the first one may be asked again.
   * `inspect` sees each successful response before its body is read, and may refuse it by
   * throwing a non-retryable IdMintError (its body is then never used).
   */
  async get(path: string, inspect?: (response: Response) => void): Promise<unknown> {
    const now = this.#o.now();
    const count = this.#servers.length;
    let last: IdMintError | undefined;
    for (let i = 0; i < count; i++) {
      const index = (this.#preferred + i) % count;
      const server = this.#servers[index] as Server;
      if (server.downUntil > now) continue;
      try {
        const fetcher = this.#o.fetch; // called bare: a browser's fetch refuses another `this`
        const response = await fetcher(`${server.base}${path}`, {
          headers: this.#o.headers,
          signal: AbortSignal.timeout(this.#o.timeoutMs),
        }).catch((error: unknown) => {
          throw unreachable(server.base, error);
        });
        if (!response.ok) throw await errorFrom(response);
        inspect?.(response);
        const body: unknown = await response.json().catch((error: unknown) => {
          throw unreachable(server.base, error);
        });
        server.failures = 0;
        server.downUntil = 0;
        this.#preferred = index;
        return body;
      } catch (error) {
        const failure = error instanceof IdMintError ? error : unreachable(server.base, error);
        if (!failure.retryable && failure.code !== 'INTERNAL_ERROR') throw failure;
        this.markDown(index);
        last = failure;
      }
    }
    const retryAt = Math.min(...this.#servers.map((server) => server.downUntil));
    throw new IdMintError(
      'SERVER_UNAVAILABLE',
      `no idmint server answered (${count} configured, all marked ` +
        `down)${last === undefined ? '' : `; last: ${last.message}`}`,
      {
        details: { retryAt },
        ...(last === undefined ? {} : { cause: last }),
      },
    );
  }

  /** Marks a server down: not asked for backoffMs, doubling with each failure in a row (capped). */
  markDown(index: number): void {
    const server = this.#servers[index];
    if (server === undefined) return;
    server.failures++;
    const backoff = Math.min(
      this.#o.maxBackoffMs,
      this.#o.backoffMs * 2 ** Math.min(server.failures - 1, 20),
    );
    server.downUntil = this.#o.now() + backoff;
  }

  /** Every server's state, in the configured order. */
  states(): ServerState[] {
    const now = this.#o.now();
    return this.#servers.map((server) => ({
      url: server.base,
      down: server.downUntil > now,
      downUntil: server.downUntil > now ? server.downUntil : 0,
      failures: server.failures,
    }));
  }
}
