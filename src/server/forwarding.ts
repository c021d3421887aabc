import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { ERROR_CODES, IdMintError, type ErrorCode } from '../core/errors.ts';
import type { SegmentRun } from '../core/segment-buffer.ts';

/**
 * Marks a request one node forwarded to the issuer of a cluster-ordered tag. A node that does not
 * issue the tag answers such a request ISSUER_UNAVAILABLE instead of forwarding it again, so a
 * request crosses at most one hop, whatever the nodes believe about who holds the lease.
 */
export const FORWARDED_HEADER = 'x-idmint-forwarded';

/**
 * TinyId's `token` parameter on a forwarded TinyId draw, base64url-encoded (TinyId's tokens are
 * free text). The issuer accepts it on the batch route only, only with {@link FORWARDED_HEADER},
 * and only for the tag in the path, as TinyId's routes accept the token: it draws that tag's IDs
 * and nothing else (see installAuth). A TinyId token is never sent as a bearer token.
 */
export const TINYID_TOKEN_HEADER = 'x-idmint-tinyid-token';

/** Set on a range answer of a cluster-ordered tag: the client's local mode must not hold it. */
export const ORDERING_HEADER = 'x-idmint-ordering';

/** Options for {@link Forwarder}. */
export interface ForwarderOptions {
  /** The largest `count` the holder's batch route takes (api.maxBatch, the same on every node). */
  readonly maxBatch: number;
  /** An upstream request not answered within this long fails (SERVER_UNAVAILABLE). */
  readonly timeoutMs: number;
  /** Upstream requests of one tag to one holder in flight at once; more wait and are merged. */
  readonly maxInFlight?: number;
  /** Kept-alive connections per holder. */
  readonly maxSockets?: number;
}

/** One waiting request of a merged batch. */
interface Waiter {
  readonly count: number;
  readonly resolve: (ids: bigint[]) => void;
  readonly reject: (error: unknown) => void;
}

/** The requests for one tag to one holder, with one caller's credentials. */
interface Lane {
  readonly address: string;
  readonly tag: string;
  readonly authorization: string | undefined;
  readonly tinyIdToken: string | undefined;
  waiting: Waiter[];
  waitingIds: number;
  inFlight: number;
}

/**
 * Forwards a cluster-ordered tag's requests to the node that issues it, over kept-alive
 * connections, as binary batches (`/v1/segment/{tag}`, 8 bytes per ID), each node writing the
 * answer in its own route's format.
 *
 * Requests for the same tag that arrive while earlier ones are in flight are merged into one
 * upstream batch and handed its IDs in arrival order. That keeps the promise: a request that
 * arrives after another's answer was sent arrives after that answer's upstream batch came back,
 * so its own batch is sent after, and the issuer answers it with greater IDs. Requests in flight
 * together may be ordered either way, as on one node. Merging is what makes forwarding cheap: the
 * issuer handles one request per batch instead of one per caller.
 */
export class Forwarder {
  readonly #options: Required<ForwarderOptions>;
  readonly #http: Agent;
  readonly #https: HttpsAgent;
  readonly #lanes = new Map<string, Lane>();
  #closed = false;

  constructor(options: ForwarderOptions) {
    this.#options = { maxInFlight: 2, maxSockets: 32, ...options };
    const agent = { keepAlive: true, maxSockets: this.#options.maxSockets };
    this.#http = new Agent(agent);
    this.#https = new HttpsAgent(agent);
  }

  /**
   * `count` increasing IDs of `tag` from the issuer at `address`, merged with other requests in
   * the same lane. Rejects with the issuer's error (ISSUER_UNAVAILABLE when it no longer issues
   * the tag), or SERVER_UNAVAILABLE when it cannot be reached. `authorization` is the caller's
   * Authorization header; `tinyIdToken` instead TinyId's `token` parameter, for TinyId's routes.
   */
  ids(
    address: string,
    tag: string,
    count: number,
    authorization: string | undefined,
    tinyIdToken?: string,
  ): Promise<bigint[]> {
    if (this.#closed) return Promise.reject(closed());
    // A request larger than a batch goes alone, a batch at a time, one after the other.
    if (count > this.#options.maxBatch)
      return this.#large(address, tag, count, authorization, tinyIdToken);
    // One lane per credential: a batch is drawn with one caller's rights only.
    const key = JSON.stringify([address, tag, authorization ?? null, tinyIdToken ?? null]);
    let lane = this.#lanes.get(key);
    if (lane === undefined) {
      lane = { address, tag, authorization, tinyIdToken, waiting: [], waitingIds: 0, inFlight: 0 };
      this.#lanes.set(key, lane);
    }
    const entered = lane;
    const promise = new Promise<bigint[]>((resolve, reject) => {
      entered.waiting.push({ count, resolve, reject });
    });
    entered.waitingIds += count;
    this.#pump(key, entered);
    return promise;
  }

  /**
   * An exact range of `size` IDs of `tag` from the issuer's range route (never merged: it is one
   * allocation there when the buffer does not hold it).
   */
  async range(
    address: string,
    tag: string,
    size: number,
    authorization: string | undefined,
  ): Promise<SegmentRun> {
    if (this.#closed) throw closed();
    const path = `/v1/segment/${encodeURIComponent(tag)}/range?size=${size}`;
    const body = await this.#get(address, path, 'application/json', authorization);
    const answer = JSON.parse(body.toString('utf8')) as {
      start: string;
      end: string;
      stride: number;
      size: number;
    };
    return {
      start: BigInt(answer.start),
      end: BigInt(answer.end),
      stride: answer.stride,
      count: answer.size,
    };
  }

  /** Closes the kept-alive connections; later calls fail. */
  close(): void {
    this.#closed = true;
    this.#http.destroy();
    this.#https.destroy();
  }

  async #large(
    address: string,
    tag: string,
    count: number,
    authorization: string | undefined,
    tinyIdToken: string | undefined,
  ): Promise<bigint[]> {
    const ids: bigint[] = [];
    while (ids.length < count) {
      const size = Math.min(this.#options.maxBatch, count - ids.length);
      const batch = await this.#batch(address, tag, size, authorization, tinyIdToken);
      for (const id of batch) ids.push(id);
    }
    return ids;
  }

  /** Sends what waits in `lane` as one batch while fewer than maxInFlight are on their way. */
  #pump(key: string, lane: Lane): void {
    while (lane.waiting.length > 0 && lane.inFlight < this.#options.maxInFlight) {
      const batch: Waiter[] = [];
      let count = 0;
      while (lane.waiting.length > 0) {
        const next = lane.waiting[0] as Waiter;
        if (count + next.count > this.#options.maxBatch) break;
        batch.push(next);
        count += next.count;
        lane.waiting.shift();
      }
      lane.waitingIds -= count;
      lane.inFlight++;
      this.#batch(lane.address, lane.tag, count, lane.authorization, lane.tinyIdToken)
        .then(
          (ids) => {
            let at = 0;
            for (const waiter of batch) {
              waiter.resolve(ids.slice(at, at + waiter.count));
              at += waiter.count;
            }
          },
          (error: unknown) => {
            for (const waiter of batch) waiter.reject(error);
          },
        )
        .finally(() => {
          lane.inFlight--;
          if (lane.waiting.length > 0) this.#pump(key, lane);
          else if (lane.inFlight === 0) this.#lanes.delete(key);
        });
    }
  }

  async #batch(
    address: string,
    tag: string,
    count: number,
    authorization: string | undefined,
    tinyIdToken: string | undefined = undefined,
  ): Promise<bigint[]> {
    const path = `/v1/segment/${encodeURIComponent(tag)}?count=${count}`;
    const accept = 'application/octet-stream';
    const body = await this.#get(address, path, accept, authorization, tinyIdToken);
    if (body.length !== count * 8)
      throw new IdMintError(
        'ISSUER_UNAVAILABLE',
        `tag "${tag}": the issuer at ${address} answered ${body.length} bytes for ${count} IDs`,
        { details: { tag } },
      );
    const view = new DataView(body.buffer, body.byteOffset, body.length);
    const ids = new Array<bigint>(count);
    for (let i = 0; i < count; i++) ids[i] = view.getBigUint64(i * 8);
    return ids;
  }

  /** One GET to the issuer, marked forwarded: its body, or its error as an IdMintError. */
  #get(
    address: string,
    path: string,
    accept: string,
    authorization: string | undefined,
    tinyIdToken: string | undefined = undefined,
  ): Promise<Buffer> {
    const url = new URL(path, address);
    const https = url.protocol === 'https:';
    const headers: Record<string, string> = { accept, [FORWARDED_HEADER]: '1' };
    if (authorization !== undefined) headers.authorization = authorization;
    if (tinyIdToken !== undefined)
      headers[TINYID_TOKEN_HEADER] = Buffer.from(tinyIdToken, 'utf8').toString('base64url');
    return new Promise<Buffer>((resolve, reject) => {
      const upstream = (https ? httpsRequest : httpRequest)(
        url,
        {
          method: 'GET',
          headers,
          agent: https ? this.#https : this.#http,
          timeout: this.#options.timeoutMs,
        },
        (response: IncomingMessage) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', (error) => reject(unreachable(address, error)));
          response.on('end', () => {
            const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
            if (response.statusCode === 200) resolve(body);
            else reject(upstreamError(address, response.statusCode ?? 0, body));
          });
        },
      );
      upstream.on('timeout', () =>
        upstream.destroy(new Error(`no answer within ${this.#options.timeoutMs} ms`)),
      );
      upstream.on('error', (error) => reject(unreachable(address, error)));
      upstream.end();
    });
  }
}

/** The issuer's error answer as the IdMintError it carries (its code, status and message). */
function upstreamError(address: string, status: number, body: Buffer): IdMintError {
  let code: ErrorCode | undefined;
  let message = '';
  try {
    const parsed = JSON.parse(body.toString('utf8')) as {
      error?: { code?: unknown; message?: unknown };
    };
    const given = parsed.error?.code;
    if (typeof given === 'string' && Object.hasOwn(ERROR_CODES, given)) code = given as ErrorCode;
    if (typeof parsed.error?.message === 'string') message = parsed.error.message;
  } catch {
    // Not an idmint answer: said below.
  }
  if (code === undefined)
    return new IdMintError(
      'SERVER_UNAVAILABLE',
      `the issuer at ${address} answered HTTP ${status} without an idmint error`,
      { details: { issuer: address, status } },
    );
  return new IdMintError(code, message, { details: { upstream: address } });
}

function unreachable(address: string, error: Error): IdMintError {
  return new IdMintError(
    'SERVER_UNAVAILABLE',
    `the issuer at ${address} did not answer: ${error.message}`,
    { cause: error, details: { upstream: address } },
  );
}

function closed(): IdMintError {
  return new IdMintError('SERVER_UNAVAILABLE', 'the server is shutting down');
}
