import { ID_FAMILIES, type IdFamily } from '../contract/families.ts';
import type {
  DecodedAnyId,
  DecodedOpaqueSegmentId,
  DecodedOpaqueSnowflakeId,
  IdBatch,
} from '../contract/ids.ts';
import type { Readiness as ReadinessAnswer } from '../contract/operations.ts';
import type { SegmentBatch } from '../contract/segment.ts';
import type { DecodedSnowflakeId, SnowflakeBatch } from '../contract/snowflake.ts';
import type { NewTag, Tag, TagChanges, TagList } from '../contract/tags.ts';
import { IdMintError } from '../core/errors.ts';
import { errorFrom, unreachable } from './http-errors.ts';
import {
  TagRanges,
  localSettings,
  type LocalModeOptions,
  type LocalSettings,
  type LocalTagStats,
} from './local-ranges.ts';
import { ServerPool, type ServerState } from './server-pool.ts';
import { sleep } from '../shared/time.ts';

// The answers' types are the HTTP contract's (src/contract/): what the server's routes are
// typed and serialized by. Only types come from there, and the family list (a file with no
// imports).
export type { LocalModeOptions, LocalTagStats } from './local-ranges.ts';
export type { ServerState } from './server-pool.ts';
export type { DecodedAnyId, DecodedOpaqueSegmentId, DecodedOpaqueSnowflakeId, Tag };

/** Options for {@link IdMintClient}. */
export interface IdMintClientOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:8080`. One of `url` and `urls` is needed. */
  readonly url?: string;
  /**
   * Several servers of one cluster, for local mode's failover ({@link IdMintClient.nextId}); the
   * per-request methods use the first (or `url`).
   */
  readonly urls?: readonly string[];
  /** Local mode's range sizes, prefetch, backoff and ordering (docs/client.md). */
  readonly local?: LocalModeOptions;
  /** Milliseconds for local mode's backoffs and range sizing. Default `performance.now`. */
  readonly now?: () => number;
  /** Bearer token, when the server has auth on. */
  readonly token?: string;
  /** Each attempt is abandoned after this many ms (SERVER_UNAVAILABLE). Default 5000. */
  readonly timeoutMs?: number;
  /**
   * How many times a retryable failure (503 with Retry-After, or the server unreachable) is
   * retried. Default 2. Retrying an ID request is safe: at worst an ID goes unused, never twice.
   */
  readonly retries?: number;
  /** Longest wait between attempts, capping the server's Retry-After. Default 1000 ms. */
  readonly maxRetryDelayMs?: number;
  /** The fetch to use. Default the global one (Node's, with keep-alive connections). */
  readonly fetch?: typeof fetch;
}

/** The parts of a snowflake ID, as `/v1/snowflake/decode/{id}` answers. */
export type DecodedId = DecodedSnowflakeId;

/** An ID family the server issues at `/v1/<family>`. */
export type IdFamilyName = IdFamily;

/** `/readyz`: whether the server should get traffic, and each check's state. */
export interface Readiness {
  readonly ready: boolean;
  readonly checks: ReadinessAnswer['checks'];
}

/**
 * A small typed client for an idmint server. IDs are returned as decimal strings, as they travel
 * (64-bit IDs do not fit a JS number); `BigInt(id)` converts one. Every failure is an
 * IdMintError with the server's code, or SERVER_UNAVAILABLE when the server did not answer.
 *
 * ```ts
 * const ids = new IdMintClient({ url: 'http://127.0.0.1:8080' });
 * await ids.segment('order');          // '1001'
 * await ids.snowflakeBatch(3);         // { workerId: 0, ids: ['...', '...', '...'] }
 * ```
 */
export class IdMintClient {
  readonly #base: string;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;
  readonly #retries: number;
  readonly #maxRetryDelayMs: number;
  readonly #fetch: typeof fetch;

  readonly #bases: readonly string[];
  readonly #local: LocalSettings;
  readonly #now: () => number;
  readonly #tags = new Map<string, TagRanges>();
  #pool: ServerPool | undefined;
  readonly #firstServer: number | undefined;

  constructor(options: IdMintClientOptions) {
    const urls = options.urls ?? (options.url === undefined ? [] : [options.url]);
    if (options.urls !== undefined && options.url !== undefined)
      throw new IdMintError('INVALID_ARGUMENT', 'give url or urls, not both');
    if (!Array.isArray(urls) || urls.length === 0)
      throw new IdMintError(
        'INVALID_ARGUMENT',
        'url (or urls, a non-empty list) is required: the idmint server, such as ' +
          'http://127.0.0.1:8080',
      );
    this.#bases = urls.map(baseOf);
    this.#base = this.#bases[0] as string;
    this.#headers = options.token === undefined ? {} : { authorization: `Bearer ${options.token}` };
    this.#timeoutMs = checkCount('timeoutMs', options.timeoutMs ?? 5000, 1);
    this.#retries = checkCount('retries', options.retries ?? 2, 0);
    this.#maxRetryDelayMs = checkCount('maxRetryDelayMs', options.maxRetryDelayMs ?? 1000, 0);
    this.#fetch = options.fetch ?? fetch;
    this.#local = localSettings(options.local);
    this.#now = options.now ?? (() => performance.now());
    const first = options.local?.firstServer;
    if (first !== undefined && (!Number.isSafeInteger(first) || first < 0 || first >= urls.length))
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `local.firstServer must be an index into urls, 0 to ${urls.length - 1}, got ` +
          `${String(first)}`,
      );
    this.#firstServer = first;
  }

  /**
   * Local mode: the tag's next ID from a range held in this process, or undefined when none is
   * held yet (a range is then being fetched; call {@link nextId}). No I/O, no Promise:
   * `ids.nextIdSync(tag) ?? await ids.nextId(tag)`. IDs are bigints, never issued twice; with
   * `local.ordering` `increasing` (the default) they increase per tag.
   */
  nextIdSync(tag: string): bigint | undefined {
    const ranges = this.#tags.get(tag);
    return ranges === undefined ? this.#ranges(tag).nextSync() : ranges.nextSync();
  }

  /**
   * Local mode: the tag's next ID, from a held range when there is one (most calls), else after
   * fetching a range from one of the servers (`GET /v1/segment/{tag}/range`). Throws
   * RANGES_EXHAUSTED (retryable) when nothing is held and no server answers; recovers by itself.
   */
  nextId(tag: string): Promise<bigint> {
    const ranges = this.#tags.get(tag);
    if (ranges === undefined) {
      try {
        return this.#ranges(tag).next();
      } catch (error) {
        return Promise.reject(error as Error); // a bad tag rejects, as every other failure does
      }
    }
    const id = ranges.nextSync();
    return id === undefined ? ranges.next() : Promise.resolve(id);
  }

  /** Local mode's figures: per tag what is held and fetched, and each server's state. */
  localStats(): { tags: LocalTagStats[]; servers: ServerState[] } {
    return {
      tags: [...this.#tags.values()].map((ranges) => ranges.stats()),
      servers: this.#servers().states(),
    };
  }

  #ranges(tag: string): TagRanges {
    if (typeof tag !== 'string' || tag.length === 0 || tag.length > 128)
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `tag must be 1 to 128 characters, got ${JSON.stringify(tag)}`,
      );
    const pool = this.#servers();
    const ranges = new TagRanges(
      tag,
      this.#local,
      (name, size) =>
        pool.get(`/v1/segment/${encodeURIComponent(name)}/range?size=${size}`, (response) =>
          refuseOrdered(response, name),
        ),
      this.#now,
    );
    this.#tags.set(tag, ranges);
    return ranges;
  }

  #servers(): ServerPool {
    this.#pool ??= new ServerPool({
      bases: this.#bases,
      headers: this.#headers,
      timeoutMs: this.#timeoutMs,
      backoffMs: this.#local.backoffMs,
      maxBackoffMs: this.#local.maxBackoffMs,
      fetch: this.#fetch,
      now: this.#now,
      ...(this.#firstServer === undefined ? {} : { preferred: this.#firstServer }),
    });
    return this.#pool;
  }

  /** The tag's next segment ID (Leaf's `/api/segment/get/{tag}`). */
  async segment(tag: string): Promise<string> {
    return this.#request('GET', `/api/segment/get/${encodeURIComponent(tag)}`, undefined, 'text');
  }

  /** `count` of the tag's next segment IDs, increasing. */
  async segmentBatch(tag: string, count: number): Promise<string[]> {
    const body = await this.#request<SegmentBatch>(
      'GET',
      `/v1/segment/${encodeURIComponent(tag)}?count=${count}`,
    );
    return body.ids;
  }

  /**
   * `count` formatted IDs of a periodic tag (docs/segments.md, Periodic sequences), all of one
   * period, and that period's key (`20261127`). Works for any template; {@link segment} and
   * {@link segmentBatch} answer a periodic tag's IDs too, but Leaf's route only all-digit ones.
   * Throws PERIOD_SWITCHING (retried like any retryable answer) at a period boundary.
   */
  async periodicBatch(tag: string, count = 1): Promise<{ period: string; ids: string[] }> {
    const body = await this.#request<SegmentBatch>(
      'GET',
      `/v1/segment/${encodeURIComponent(tag)}?count=${count}`,
    );
    if (body.period === undefined)
      throw new IdMintError('INVALID_ARGUMENT', `tag "${tag}" is not a periodic tag`, {
        details: { tag },
      });
    return { period: body.period, ids: body.ids };
  }

  /** One snowflake ID (Leaf's `/api/snowflake/get/{tag}`; the tag is only a label there). */
  async snowflake(tag = 'default'): Promise<string> {
    return this.#request('GET', `/api/snowflake/get/${encodeURIComponent(tag)}`, undefined, 'text');
  }

  /** `count` snowflake IDs, strictly increasing, and the worker that made them. */
  async snowflakeBatch(count: number): Promise<SnowflakeBatch> {
    return this.#request('GET', `/v1/snowflake?count=${count}`);
  }

  /** The parts of a snowflake ID under the server's layout. */
  async decode(id: string | bigint): Promise<DecodedId> {
    return this.#request('GET', `/v1/snowflake/decode/${encodeURIComponent(String(id))}`);
  }

  /**
   * `count` IDs of a family (UUIDv7, UUIDv4, ULID, ObjectId: ID_FAMILIES), in the order the server
   * made them.
   */
  async ids(family: IdFamilyName, count = 1): Promise<string[]> {
    if (!FAMILIES.has(family)) {
      const allowed = ID_FAMILIES.join(', ');
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `family must be one of ${allowed}, got ${JSON.stringify(family)}`,
      );
    }
    return (await this.#request<IdBatch>('GET', `/v1/${family}?count=${count}`)).ids;
  }

  /** `count` UUIDv7s, strictly increasing. */
  uuid7(count = 1): Promise<string[]> {
    return this.ids('uuid7', count);
  }

  /** `count` UUIDv4s. */
  uuid4(count = 1): Promise<string[]> {
    return this.ids('uuid4', count);
  }

  /** `count` ULIDs, strictly increasing. */
  ulid(count = 1): Promise<string[]> {
    return this.ids('ulid', count);
  }

  /** `count` MongoDB ObjectIds. */
  objectId(count = 1): Promise<string[]> {
    return this.ids('objectid', count);
  }

  /** The format and parts of any ID idmint makes, detected by its shape (`/v1/decode/{id}`). */
  async decodeAny(id: string | bigint): Promise<DecodedAnyId> {
    return this.#request('GET', `/v1/decode/${encodeURIComponent(String(id))}`);
  }

  /** `count` opaque snowflake IDs (25-digit decimal strings). */
  async opaqueSnowflake(count = 1): Promise<string[]> {
    return (await this.#request<IdBatch>('GET', `/v1/opaque/snowflake?count=${count}`)).ids;
  }

  /**
   * The dense ID behind an opaque ID of `tag` (admin token); INVALID_ID if it is not one of the
   * tag's.
   */
  async decodeOpaque(tag: string, id: string | bigint): Promise<DecodedOpaqueSegmentId> {
    return this.#request(
      'GET',
      `/v1/opaque/segment/${encodeURIComponent(tag)}/${encodeURIComponent(String(id))}`,
    );
  }

  /** The snowflake ID behind an opaque one, and its parts (admin token). */
  async decodeOpaqueSnowflake(id: string | bigint): Promise<DecodedOpaqueSnowflakeId> {
    return this.#request('GET', `/v1/opaque/snowflake/${encodeURIComponent(String(id))}`);
  }

  /** Every tag the token may see, sorted by name. */
  async listTags(): Promise<Tag[]> {
    return (await this.#request<TagList>('GET', '/v1/tags')).tags;
  }

  /** One tag; TAG_NOT_FOUND if it does not exist. */
  async getTag(tag: string): Promise<Tag> {
    return this.#request('GET', `/v1/tags/${encodeURIComponent(tag)}`);
  }

  /** Creates a tag (admin token); TAG_EXISTS if it exists. */
  async createTag(
    tag: Omit<NewTag, 'startId'> & { startId?: NewTag['startId'] | bigint },
  ): Promise<Tag> {
    const { startId, ...rest } = tag;
    return this.#request(
      'POST',
      '/v1/tags',
      startId === undefined ? rest : { ...rest, startId: String(startId) },
      'json',
      false,
    );
  }

  /** Changes a tag's step and/or description, or makes it opaque (admin token). */
  async updateTag(tag: string, update: TagChanges): Promise<Tag> {
    return this.#request('PATCH', `/v1/tags/${encodeURIComponent(tag)}`, update, 'json', false);
  }

  /** `/readyz`, never throwing for a 503 (that is an answer: not ready). */
  async readiness(): Promise<Readiness> {
    const response = await this.#send('GET', '/readyz', undefined);
    const body = (await response.json()) as ReadinessAnswer;
    return { ready: response.status === 200, checks: body.checks };
  }

  async #request<T>(
    method: string,
    path: string,
    body?: unknown,
    as: 'json' | 'text' = 'json',
    retry = true,
  ): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        const response = await this.#send(method, path, body);
        if (response.ok)
          return (as === 'text' ? await response.text() : await response.json()) as T;
        throw await errorFrom(response);
      } catch (error) {
        const failure = error instanceof IdMintError ? error : unreachable(this.#base, error);
        // Creating or changing a tag is not repeated: a lost reply may mean it succeeded.
        if (!retry || !failure.retryable || attempt >= this.#retries) throw failure;
        await sleep(
          Math.min(this.#maxRetryDelayMs, Number(failure.details?.['retryAfterMs'] ?? 100)),
        );
      }
    }
  }

  async #send(method: string, path: string, body: unknown): Promise<Response> {
    try {
      return await this.#fetch(`${this.#base}${path}`, {
        method,
        headers:
          body === undefined
            ? this.#headers
            : { ...this.#headers, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (error) {
      throw unreachable(this.#base, error);
    }
  }
}

const FAMILIES: ReadonlySet<string> = new Set(ID_FAMILIES);

/** A server's base URL, checked, without its trailing slash. */
function baseOf(url: string): string {
  let base: URL;
  try {
    base = new URL(url);
  } catch {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `url must be an http(s) URL such as http://127.0.0.1:8080, got ${JSON.stringify(url)}`,
    );
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `url must be an http(s) URL, got ${JSON.stringify(url)}`,
    );
  }
  return base.href.replace(/\/+$/, '');
}

function checkCount(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min)
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${name} must be an integer >= ${min}, got ${String(value)}`,
    );
  return value;
}

/**
 * Local mode refuses a cluster-ordered tag's range (the server marks it `x-idmint-ordering:
 * cluster`): its IDs would be issued here later, after IDs other nodes issue meanwhile, breaking
 * the tag's cluster-wide order. The range is never used.
 */
function refuseOrdered(response: Response, tag: string): void {
  if (response.headers.get('x-idmint-ordering') === 'cluster') {
    throw new IdMintError(
      'ORDERED_RANGE_REFUSED',
      `tag "${tag}" is cluster-ordered: local mode cannot hold its ranges; use the client ` +
        'without local mode, which asks the server for every ID',
      { details: { tag } },
    );
  }
}
