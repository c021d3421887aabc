// Didi TinyId's Java client (didi/tinyid 49976d3: tinyid-client and tinyid-base), ported line for
// line so tests speak to idmint exactly as a TinyId deployment's applications do: the same HTTP
// request (TinyIdHttpUtils.post over HttpURLConnection), the same parsing of the Simple answer
// (HttpSegmentIdServiceImpl), the same segment arithmetic (SegmentId) and the same double buffer
// (CachedIdGenerator). Only Java's threads become async tasks; `synchronized` becomes a lock.
import { Agent, request } from 'node:http';

/** TinyIdClientConfig: `tinyid.server` (host:port, comma-separated) and `tinyid.token`. */
export interface TinyIdClientConfig {
  readonly server: string;
  readonly token: string;
  /** `tinyid.readTimeout` and `tinyid.connectTimeout`; TinyId's default is 5000 ms. */
  readonly timeoutMs?: number;
}

/**
 * The headers HttpURLConnection sends for TinyIdHttpUtils.post (setDoOutput(true), nothing set by
 * hand): Java's default Accept and User-Agent, and the form content type it adds for a POST body.
 */
export const TINYID_CLIENT_HEADERS = {
  'User-Agent': 'Java/1.8.0_392',
  Accept: 'text/html, image/gif, image/jpeg, */*; q=0.2',
  'Content-type': 'application/x-www-form-urlencoded',
  'Content-Length': '0',
} as const;

/**
 * TinyIdHttpUtils.post: a POST of an empty form to `url`, the answer's lines joined without their
 * line breaks; null on any failure (an exception, a refused connection), as TinyId logs and
 * returns null. HttpURLConnection throws on a status of 400 or more when reading the body.
 */
export function tinyIdPost(url: string, agent: Agent, timeoutMs = 5000): Promise<string | null> {
  return new Promise((resolve) => {
    const req = request(url, { method: 'POST', headers: TINYID_CLIENT_HEADERS, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        if ((res.statusCode ?? 500) >= 400) return resolve(null);
        resolve(Buffer.concat(chunks).toString('utf8').split(/\r?\n/).join(''));
      });
      res.on('error', () => resolve(null));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('read timed out')));
    req.on('error', () => resolve(null));
    req.end('');
  });
}

/** TinyId's SegmentId: IDs `(currentId, maxId]`, `delta` apart, each `≡ remainder (mod delta)`. */
export class SegmentId {
  currentId: bigint;
  readonly loadingId: bigint;
  readonly maxId: bigint;
  readonly delta: bigint;
  readonly remainder: bigint;
  #isInit = false;

  constructor(fields: {
    currentId: bigint;
    loadingId: bigint;
    maxId: bigint;
    delta: number;
    remainder: number;
  }) {
    this.currentId = fields.currentId;
    this.loadingId = fields.loadingId;
    this.maxId = fields.maxId;
    this.delta = BigInt(fields.delta);
    this.remainder = BigInt(fields.remainder);
  }

  /** SegmentId.init: moves currentId onto the class, one delta below its first ID. */
  init(): void {
    if (this.#isInit) return;
    let id = this.currentId;
    if (id % this.delta === this.remainder) {
      this.#isInit = true;
      return;
    }
    for (let i = 0n; i <= this.delta; i++) {
      id = ++this.currentId;
      if (id % this.delta === this.remainder) {
        this.currentId -= this.delta;
        this.#isInit = true;
        return;
      }
    }
  }

  /** SegmentId.nextId: OVER past maxId, LOADING from loadingId on, else NORMAL. */
  nextId(): { code: 'NORMAL' | 'LOADING' | 'OVER'; id: bigint } {
    this.init();
    const id = (this.currentId += this.delta);
    if (id > this.maxId) return { code: 'OVER', id };
    if (id >= this.loadingId) return { code: 'LOADING', id };
    return { code: 'NORMAL', id };
  }

  useful(): boolean {
    return this.currentId <= this.maxId;
  }
}

/**
 * HttpSegmentIdServiceImpl.getNextSegmentId: a random server of the list, TinyId's URL
 * (`http://{server}/tinyid/id/nextSegmentIdSimple?token={token}&bizType=` + bizType), and the
 * five comma-separated numbers; null for an empty answer. A malformed one throws, as
 * Long.parseLong does.
 */
export class HttpSegmentIdService {
  readonly #urls: string[];
  readonly #agent = new Agent({ keepAlive: true });
  readonly #timeoutMs: number;
  /** Every answer body, for assertions on what the server sent. */
  readonly answers: string[] = [];

  constructor(config: TinyIdClientConfig) {
    this.#urls = config.server
      .split(',')
      .map(
        (server) => `http://${server}/tinyid/id/nextSegmentIdSimple?token=${config.token}&bizType=`,
      );
    this.#timeoutMs = config.timeoutMs ?? 5000;
  }

  async getNextSegmentId(bizType: string): Promise<SegmentId | null> {
    const base = this.#urls[Math.floor(Math.random() * this.#urls.length)] as string;
    const response = await tinyIdPost(base + bizType, this.#agent, this.#timeoutMs);
    if (response === null || response.trim() === '') return null;
    this.answers.push(response);
    const arr = response.split(',');
    const long = (text: string | undefined) => {
      if (text === undefined || !/^-?[0-9]+$/.test(text))
        throw new Error(`NumberFormatException: ${text}`);
      return BigInt(text);
    };
    return new SegmentId({
      currentId: long(arr[0]),
      loadingId: long(arr[1]),
      maxId: long(arr[2]),
      delta: Number(long(arr[3])),
      remainder: Number(long(arr[4])),
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}

/** CachedIdGenerator: the current segment, the next one loaded in the background from loadingId. */
export class CachedIdGenerator {
  readonly #bizType: string;
  readonly #service: HttpSegmentIdService;
  #current: SegmentId | null = null;
  #next: SegmentId | null = null;
  #isLoadingNext = false;
  /** `synchronized` on loadCurrent: one load at a time, as Java's monitor gives. */
  #lock: Promise<void> = Promise.resolve();

  constructor(bizType: string, service: HttpSegmentIdService) {
    this.#bizType = bizType;
    this.#service = service;
  }

  async #loadCurrent(): Promise<void> {
    const run = this.#lock.then(async () => {
      if (this.#current === null || !this.#current.useful()) {
        if (this.#next === null) {
          this.#current = await this.#querySegmentId();
        } else {
          this.#current = this.#next;
          this.#next = null;
        }
      }
    });
    this.#lock = run.catch(() => undefined);
    return run;
  }

  async #querySegmentId(): Promise<SegmentId> {
    let message: string | null = null;
    try {
      const segmentId = await this.#service.getNextSegmentId(this.#bizType);
      if (segmentId !== null) return segmentId;
    } catch (error) {
      message = error instanceof Error ? error.message : String(error);
    }
    throw new Error(`error query segmentId: ${message}`);
  }

  #loadNext(): void {
    if (this.#next === null && !this.#isLoadingNext) {
      this.#isLoadingNext = true;
      this.#querySegmentId()
        .then((segment) => {
          this.#next = segment;
        })
        .catch(() => undefined)
        .finally(() => {
          this.#isLoadingNext = false;
        });
    }
  }

  /** CachedIdGenerator.nextId: throws "error query segmentId: ..." when no segment comes. */
  async nextId(): Promise<bigint> {
    for (;;) {
      if (this.#current === null) {
        await this.#loadCurrent();
        continue;
      }
      const result = this.#current.nextId();
      if (result.code === 'OVER') {
        await this.#loadCurrent();
      } else {
        if (result.code === 'LOADING') this.#loadNext();
        return result.id;
      }
    }
  }
}
