import { IdMintError } from '../../core/errors.ts';
import { checkDescription, checkStep, checkTag, idSpaceExhausted, tagNotFound } from '../../core/segment-limits.ts';
import type { NewTag, SegmentRange, SegmentStore, TagRecord, TagUpdate } from '../../ports/segment-store.ts';
import { byTag, checkNewTag, checkRelease, resolveStoreOptions, storeCall, tagRecord, toBigInt, toStep, type SegmentStoreOptions } from '../store-support.ts';

/** The part of an `ioredis` client idmint uses (a structural subset): every operation is one Lua script. */
export interface RedisClientLike {
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  /** Drops the connection, failing every queued command; with `reconnect` opens a new one. */
  disconnect(reconnect?: boolean): void;
  quit(): Promise<unknown>;
}

/** Options for {@link RedisSegmentStore}. `table` is the key prefix. */
export interface RedisSegmentStoreOptions extends SegmentStoreOptions {
  /** An `ioredis` client (or anything shaped like one). */
  readonly client: RedisClientLike;
  /** Quit the client on close(). Default false: a client you pass in is yours to quit. */
  readonly closeClient?: boolean;
}

// Keys: `<prefix>:tag:<tag>` is a hash with Leaf's columns (max_id, step, description,
// update_time as ms since the epoch); `<prefix>:tags` is the set of tag names, for listing.
//
// Lua numbers are doubles, exact only to 2^53, so no script does arithmetic on max_id: HINCRBY
// adds in 64-bit integers (and refuses to overflow, changing nothing), and max_id travels as the
// hash's decimal string.

/** HMGET of a tag's fields, in tagRecord's order. */
const READ = `local function read(key) return redis.call('HMGET', key, 'max_id', 'step', 'description', 'update_time') end
local function now() local t = redis.call('TIME') return t[1] .. string.sub(string.format('%06d', t[2]), 1, 3) end
`;

// KEYS[1] tag hash; ARGV[1] step or '' for the stored one. HINCRBY is the only write before the
// reply is built, so an overflow error leaves the hash untouched.
const ALLOCATE = `${READ}
local stored = redis.call('HGET', KEYS[1], 'step')
if not stored then return {'not_found'} end
local step = ARGV[1] ~= '' and ARGV[1] or stored
local added = redis.pcall('HINCRBY', KEYS[1], 'max_id', step)
if type(added) == 'table' and added.err then return {'exhausted', redis.call('HGET', KEYS[1], 'max_id'), step, added.err} end
redis.call('HSET', KEYS[1], 'update_time', now())
return {'ok', redis.call('HGET', KEYS[1], 'max_id'), stored}`;

// KEYS[1] tag hash; ARGV from, to. Compare-and-set on the exact decimal strings.
const RELEASE = `${READ}
if redis.call('HGET', KEYS[1], 'max_id') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'max_id', ARGV[1], 'update_time', now())
return 1`;

// KEYS[1] tag hash, KEYS[2] tag set; ARGV tag, max_id, step, description or '' with ARGV[5] = '1' when present.
const CREATE = `${READ}
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
redis.call('HSET', KEYS[1], 'max_id', ARGV[2], 'step', ARGV[3], 'update_time', now())
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'description', ARGV[4]) end
redis.call('SADD', KEYS[2], ARGV[1])
return {'ok', unpack(read(KEYS[1]))}`;

// KEYS[1] tag hash; ARGV step or '', description mode ('keep' | 'set' | 'clear'), description.
const UPDATE = `${READ}
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'step', ARGV[1]) end
if ARGV[2] == 'set' then redis.call('HSET', KEYS[1], 'description', ARGV[3]) end
if ARGV[2] == 'clear' then redis.call('HDEL', KEYS[1], 'description') end
redis.call('HSET', KEYS[1], 'update_time', now())
return {'ok', unpack(read(KEYS[1]))}`;

// KEYS[1] tag hash.
const GET = `${READ}
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
return {'ok', unpack(read(KEYS[1]))}`;

// KEYS[1] tag set; ARGV[1] hash key prefix. One consistent snapshot: a flat list of tag + fields.
const LIST = `${READ}
local out = {}
for _, tag in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local fields = read(ARGV[1] .. tag)
  if fields[1] then
    table.insert(out, tag)
    for i = 1, 4 do table.insert(out, fields[i]) end
  end
end
return out`;

/**
 * Leaf's table as Redis hashes, through `ioredis`. Every operation is one Lua script, so it is
 * atomic on the server; allocation is HINCRBY on max_id (Redis INCRBY backing whole ranges).
 *
 * Durability is Redis's: without AOF (`appendonly yes`, `appendfsync always` or `everysec`), a
 * Redis restart can lose the last allocations and hand the same range out again. Use it only
 * with persistence configured to match how much you can lose (see docs/segments.md).
 */
export class RedisSegmentStore implements SegmentStore {
  readonly backend = 'redis';
  /** The key prefix (the `table` option). */
  readonly table: string;
  readonly #client: RedisClientLike;
  readonly #closeClient: boolean;
  readonly #timeoutMs: number;

  constructor(options: RedisSegmentStoreOptions) {
    const { table, timeoutMs } = resolveStoreOptions(options);
    if (options.client === undefined || typeof options.client.eval !== 'function') {
      throw new TypeError('RedisSegmentStore needs { client } (an ioredis client); use RedisSegmentStore.connect(url) to open one');
    }
    this.table = table;
    this.#client = options.client;
    this.#closeClient = options.closeClient === true;
    this.#timeoutMs = timeoutMs;
  }

  /** Opens a client of its own on `url` (`redis://host:6379/0`), quit by close(). Loads `ioredis` on first use. */
  static async connect(url: string, options: SegmentStoreOptions = {}): Promise<RedisSegmentStore> {
    const { timeoutMs } = resolveStoreOptions(options);
    const { Redis } = await import('ioredis');
    const client = new Redis(url, {
      connectTimeout: timeoutMs,
      // Fail a command after one reconnection attempt instead of queueing it for many: the
      // segment service backs off and retries on its own, so a queue would only pile up.
      maxRetriesPerRequest: 1,
      // A command cut off by a dropped connection is not sent again: the store call already
      // failed, and a silent second allocation would only waste a range.
      autoResendUnfulfilledCommands: false,
      // No commandTimeout: the store's own timer bounds each call and, unlike ioredis's, drops
      // the connection when it fires (see #run).
    });
    // Connection errors surface as failed commands; without a listener ioredis would log each one.
    client.on('error', () => undefined);
    return new RedisSegmentStore({ ...options, client, closeClient: true });
  }

  async init(): Promise<void> {
    // Hashes need no schema.
  }

  async allocate(tag: string, step?: number): Promise<SegmentRange> {
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    const reply = await this.#list('allocate', ALLOCATE, [this.#key(tag)], [step === undefined ? '' : String(step)]);
    if (reply[0] === 'not_found') throw tagNotFound(tag);
    if (reply[0] === 'exhausted') {
      if (!String(reply[3]).includes('overflow')) throw new IdMintError('STORE_UNAVAILABLE', `redis store: tag "${tag}" has a malformed max_id: ${String(reply[3])}`);
      throw idSpaceExhausted(tag, toBigInt(reply[1], 'max_id'), toStep(reply[2]));
    }
    const end = toBigInt(reply[1], 'max_id');
    const tagStep = toStep(reply[2]);
    const used = step ?? tagStep;
    return { tag, start: end - BigInt(used), end, step: used, tagStep };
  }

  async release(tag: string, from: bigint, to: bigint): Promise<boolean> {
    checkTag(tag);
    checkRelease(from, to);
    const reply = await this.#run('release', RELEASE, [this.#key(tag)], [from.toString(), to.toString()]);
    return Number(reply) === 1;
  }

  async listTags(): Promise<TagRecord[]> {
    const flat = await this.#list('listTags', LIST, [`${this.table}:tags`], [this.#key('')]);
    const records: TagRecord[] = [];
    for (let i = 0; i + 4 < flat.length; i += 5) records.push(this.#record(String(flat[i]), flat.slice(i + 1, i + 5)));
    return records.sort(byTag);
  }

  async getTag(tag: string): Promise<TagRecord | undefined> {
    checkTag(tag);
    const reply = await this.#list('getTag', GET, [this.#key(tag)], []);
    return reply[0] === 'ok' ? this.#record(tag, reply.slice(1)) : undefined;
  }

  async createTag(tag: NewTag): Promise<TagRecord> {
    const v = checkNewTag(tag);
    const reply = await this.#list('createTag', CREATE, [this.#key(v.tag), `${this.table}:tags`], [
      v.tag,
      v.startId.toString(),
      String(v.step),
      v.description ?? '',
      v.description === null ? '0' : '1',
    ]);
    if (reply[0] === 'exists') throw new IdMintError('TAG_EXISTS', `tag "${v.tag}" already exists`, { details: { tag: v.tag } });
    return this.#record(v.tag, reply.slice(1));
  }

  async updateTag(tag: string, update: TagUpdate): Promise<TagRecord> {
    checkTag(tag);
    const step = update.step === undefined ? '' : String(checkStep(update.step));
    const description = update.description === undefined ? undefined : checkDescription(update.description);
    const mode = description === undefined ? 'keep' : description === null ? 'clear' : 'set';
    const reply = await this.#list('updateTag', UPDATE, [this.#key(tag)], [step, mode, description ?? '']);
    if (reply[0] === 'not_found') throw tagNotFound(tag);
    return this.#record(tag, reply.slice(1));
  }

  async close(): Promise<void> {
    if (this.#closeClient) await this.#client.quit().catch(() => undefined);
  }

  #key(tag: string): string {
    return `${this.table}:tag:${tag}`;
  }

  async #run(operation: string, script: string, keys: string[], args: string[]): Promise<unknown> {
    return storeCall(this.backend, operation, this.#timeoutMs, (signal) => {
      // Replies are matched to commands by order on the connection: if a request was lost, the
      // next reply would answer the wrong command (another tag's range). On timeout the
      // connection is dropped, failing everything queued on it, and a fresh one is opened.
      signal.addEventListener('abort', () => this.#client.disconnect(true), { once: true });
      return this.#client.eval(script, keys.length, ...keys, ...args);
    });
  }

  async #list(operation: string, script: string, keys: string[], args: string[]): Promise<unknown[]> {
    const reply = await this.#run(operation, script, keys, args);
    if (!Array.isArray(reply)) throw new IdMintError('STORE_UNAVAILABLE', `redis store: ${operation} returned ${String(reply)}`);
    return reply as unknown[];
  }

  #record(tag: string, fields: unknown[]): TagRecord {
    return tagRecord({ biz_tag: tag, max_id: fields[0], step: fields[1], description: fields[2] ?? null, update_time: fields[3] });
  }
}
