import { LIVE_HISTORY_LUA } from '../../redis/redis-history.ts';
import { IdMintError } from '../../core/errors.ts';
import {
  EVERY_ID,
  MAX_SEGMENT_ID,
  MAX_TAG_DELTA,
  MAX_TAG_STEP,
  checkDescription,
  checkSequence,
  checkStep,
  checkTag,
  idSpaceExhausted,
  storedSequence,
  tagMisconfigured,
  tagNotFound,
} from '../../core/segment-limits.ts';
import type {
  FenceMargin,
  FenceReport,
  FenceRequest,
  NewTag,
  SegmentRange,
  SegmentResidue,
  SegmentStore,
  StoreHistory,
  TagChanges,
  TagPage,
  TagRecord,
  TagUpdate,
} from '../../ports/segment-store.ts';
import { withTimeout } from '../../shared/timeout.ts';
import {
  HistoryWatch,
  byTag,
  changeCursor,
  changeOverlapMs,
  checkFenceCount,
  checkFenceMargin,
  checkNewTag,
  checkOpaqueUpdate,
  checkPageLimit,
  checkRaise,
  checkRelease,
  combinedResidue,
  fenceTimeoutMs,
  historyUnsettled,
  parseChangeCursor,
  residueMismatch,
  residueRange,
  resolveStoreOptions,
  StorePlace,
  storeCall,
  storedResidue,
  tagRecord,
  toBigInt,
  toStep,
  type AllocateRetry,
  type FenceOutcome,
  type SegmentStoreOptions,
} from '../store-support.ts';
import { loadDriver } from '../../shared/load-driver.ts';
import { orderedInFirstDatabase, orderedNotOpaque } from '../tag-ordering.ts';
import { RedisIssuerLeases } from './redis-issuer-leases.ts';

/**
 * Where a Redis server is, as the redis backend (src/backends/) read it from the URL: the
 * options ioredis gets (a structural subset of its RedisOptions).
 */
export interface RedisAddress {
  readonly host: string;
  readonly port: number;
  readonly username?: string;
  readonly password?: string;
  readonly db: number;
  /** Present for `rediss://`: connect over TLS. */
  readonly tls?: Record<string, never>;
}

/**
 * The part of an `ioredis` client idmint uses (a structural subset): every operation is one Lua
 * script.
 */
export interface RedisClientLike {
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  /**
   * Drops the connection, failing every queued command; with `reconnect` opens a new one. Used only
   * when a reply is found out of step.
   */
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

// Keys: `<prefix>:history` is a hash recording the history the prefix was last fenced for
// (`history`, `fences`, `update_time`: see RedisSegmentStore); `<prefix>:tag:<tag>` is a hash
// with Leaf's columns (max_id, step, description, update_time as ms since the epoch, and, on a
// database of a set, id_offset and id_increment) and idmint's `opaque` ('1' on an opaque tag, else
// absent) and TinyId's `delta` and `remainder` (absent on a tag of every ID); `<prefix>:tags` is
// the set of tag names, for listing; `<prefix>:changed` is a sorted set of tag keys scored by their
// last write's time (ms), for the incremental tag refresh. A hash without id_offset and
// id_increment is a plain row (0 and 1). A tag may hold any character idmint accepts (`:`, `{`,
// `}`, `/`, spaces, Unicode): keys are binary-safe, and the prefix is a plain identifier with no
// `:`, so `<prefix>:tag:` ends where the tag starts and no tag's key can be another prefix's key or
// a tag set. On a single Redis, hash slots play no
// part, so `{` and `}` in a tag change nothing (a Redis Cluster is not supported: creating and
// listing tags touch several keys, which a cluster refuses across slots whatever the tags).
// `<prefix>:set` is a hash of a set's own records (MultiSegmentStore: its members, this
// database's identity, high-water marks), never a tag's key. A tag's hash has `ordering`
// ('cluster') on a cluster-ordered tag, and its issuer lease is the hash `<prefix>:issuer:<tag>`
// (RedisIssuerLeases), kept when the tag is deleted so that its epochs are never given again.
//
// Lua numbers are doubles, exact only to 2^53, so no script does arithmetic on max_id: HINCRBY
// adds in 64-bit integers (and refuses to overflow, changing nothing), and max_id travels as the
// hash's decimal string.
//
/**
 * Tries of one allocation: a fence of a new history between the first two, one more if another
 * lands.
 */
const ALLOCATE_ATTEMPTS = 3;

/** What the FENCE script is asked: an automatic fence runs only on a new history. */
interface FenceCall {
  readonly margin: FenceMargin;
  readonly automatic: boolean;
  readonly tag?: string;
  readonly ifFences?: number;
}

/** A reply's text, or undefined for a nil (a missing field). */
function optionalText(value: unknown): string | undefined {
  return value === null || value === undefined ? undefined : String(value);
}

/** Fields `read` returns per tag. */
const FIELDS = 11;

// Every script takes a nonce as its last argument and returns it first, so the client can check
// that a reply answers the command it is given to (see RedisSegmentStore.#run).

/**
 * The nonce, taken off ARGV; HMGET of a tag's fields in tagRecord's order; the server's time in
 * ms; the server's history (its replication ID: a promoted replica takes a new one, and so does a
 * restarted Redis, which may have lost writes); a row's residue class as stored (a hash without
 * the fields is plain: '0' and '1'); `touch`,
 * which stamps a write (update_time, and the changed set, the script's last key); `append`, which
 * adds a tag and its fields to a listing if its hash exists. A missing field is false in Lua, and
 * a false in a reply table is nil to the client: a listing stays aligned.
 */
const PRELUDE = `local nonce = table.remove(ARGV)
local function read(key)
  return redis.call('HMGET', key, 'max_id', 'step', 'description', 'update_time', 'id_offset',
    'id_increment', 'opaque', 'periodic', 'delta', 'remainder', 'ordering')
end
local function now()
  local t = redis.call('TIME')
  return t[1] .. string.sub(string.format('%06d', t[2]), 1, 3)
end
local function residue(key)
  return redis.call('HGET', key, 'id_offset') or '0', redis.call('HGET', key, 'id_increment') or '1'
end
local function touch(key)
  local t = now()
  redis.call('HSET', key, 'update_time', t)
  redis.call('ZADD', KEYS[#KEYS], t, key)
end
${LIVE_HISTORY_LUA}local function append(out, tag, key)
  local fields = read(key)
  if not fields[1] then return end
  table.insert(out, tag)
  for i = 1, ${FIELDS} do table.insert(out, fields[i] or false) end
end
`;

// KEYS[1] tag hash, KEYS[2] the history hash; ARGV[1] step or '' for the stored one; ARGV[2],
// ARGV[3] the store's offset and increment, or '' for a store of its own. Nothing is allocated
// unless the history recorded is the server's live one (else 'history': the client fences first);
// the reply names the history the range came from. A row written outside idmint may hold a step or
// max_id no range can come from: refused, unchanged; so is a row of another residue class (a store
// of its own takes only a plain row; a set's store only a row of exactly its class). HINCRBY is the
// only write before the reply is built, so an overflow error leaves the hash untouched.
//
// On database r > 0 of a set a cluster-ordered tag is 'ordered', nothing changed: only database
// 0 allocates it (docs/segments.md, Where a cluster-ordered tag's ordering and issuer lease are
// kept).
//
// The row's class: its own sequence (TinyId's delta and remainder fields; absent: every ID) on a
// store of its own; in a set of N, the one class mod N * delta inside both r mod N and the tag's
// (store-support.ts's combinedResidue, found by the same search). max_id is first raised to the
// next ID of the class, then advanced by step * modulus. max_id mod the modulus is computed digit
// by digit from its decimal string (Lua numbers are doubles, exact only to 2^53); the amount added
// is below 2^44 (step < 2^31, modulus at most 64 * 64), exact, and formatted without an exponent.
// The reply carries the delta and remainder the script used, so the range is computed with the
// class it was allocated in, never a cached one.
const ALLOCATE = `${PRELUDE}
local live = live_history()
local recorded = redis.call('HGET', KEYS[2], 'history')
if recorded ~= live then return {nonce, 'history', live, recorded or false} end
local stored = redis.call('HGET', KEYS[1], 'step')
if not stored then return {nonce, 'not_found'} end
local offset, increment = residue(KEYS[1])
if ARGV[3] == '' and increment ~= '1' then return {nonce, 'residue', offset, increment} end
if ARGV[3] ~= '' and (offset ~= ARGV[2] or increment ~= ARGV[3]) then
  return {nonce, 'residue', offset, increment}
end
if ARGV[3] ~= '' and ARGV[2] ~= '0' and redis.call('HGET', KEYS[1], 'ordering') then
  return {nonce, 'ordered'}
end
if not (string.match(stored, '^[1-9]%d*$') and #stored <= 10
    and tonumber(stored) <= ${MAX_TAG_STEP}) then
  return {nonce, 'misconfigured', 'step', stored}
end
local max_id = redis.call('HGET', KEYS[1], 'max_id')
if not (max_id and string.match(max_id, '^%d+$')) then
  return {nonce, 'misconfigured', 'max_id', max_id or '(missing)'}
end
local delta = redis.call('HGET', KEYS[1], 'delta') or '1'
local remainder = redis.call('HGET', KEYS[1], 'remainder') or '0'
local sane = string.match(delta, '^[1-9]%d?$') and tonumber(delta) <= ${MAX_TAG_DELTA}
  and string.match(remainder, '^%d%d?$') and tonumber(remainder) < tonumber(delta)
if not sane then
  return {nonce, 'misconfigured', 'delta', delta .. ' (remainder ' .. remainder .. ')'}
end
local step = ARGV[1] ~= '' and ARGV[1] or stored
local n = ARGV[3] ~= '' and tonumber(ARGV[3]) or 1
local r = ARGV[3] ~= '' and tonumber(ARGV[2]) or 0
local d = tonumber(delta)
local class = -1
for k = 0, d - 1 do
  if (r + n * k) % d == tonumber(remainder) then class = r + n * k break end
end
if class < 0 then
  return {nonce, 'misconfigured', 'delta', delta .. ' (not coprime to the set size ' .. n .. ')'}
end
local modulus = n * d
local add = step
if modulus > 1 then
  local m = 0
  for i = 1, #max_id do m = (m * 10 + tonumber(string.sub(max_id, i, i))) % modulus end
  add = string.format('%.0f', (class - m + modulus) % modulus + tonumber(step) * modulus)
end
local added = redis.pcall('HINCRBY', KEYS[1], 'max_id', add)
if type(added) == 'table' and added.err then
  return {nonce, 'exhausted', max_id, step, added.err}
end
touch(KEYS[1])
return {nonce, 'ok', redis.call('HGET', KEYS[1], 'max_id'), stored, live, delta, remainder}`;

// KEYS[1] tag hash, KEYS[2] the history hash; ARGV from, to, and the store's offset and increment
// ('' for a store of its own). Compare-and-set on the exact decimal strings; a set's store also on
// the residue class; only on the recorded history.
const RELEASE = `${PRELUDE}
if redis.call('HGET', KEYS[2], 'history') ~= live_history() then return {nonce, 0} end
if redis.call('HGET', KEYS[1], 'max_id') ~= ARGV[2] then return {nonce, 0} end
local offset, increment = residue(KEYS[1])
if ARGV[4] ~= '' and (offset ~= ARGV[3] or increment ~= ARGV[4]) then return {nonce, 0} end
redis.call('HSET', KEYS[1], 'max_id', ARGV[1])
touch(KEYS[1])
return {nonce, 1}`;

// KEYS[1] tag hash, KEYS[2] changed set; ARGV the target, the store's offset and increment ('' for
// a store of its own). Sets max_id to the target only if it is below: compared as decimal strings
// (canonical, no sign), so no Lua number ever holds it.
const RAISE = `${PRELUDE}
local max_id = redis.call('HGET', KEYS[1], 'max_id')
if not (max_id and string.match(max_id, '^%d+$')) then return {nonce, 0} end
local offset, increment = residue(KEYS[1])
if ARGV[3] ~= '' and (offset ~= ARGV[2] or increment ~= ARGV[3]) then return {nonce, 0} end
if #max_id > #ARGV[1] or (#max_id == #ARGV[1] and max_id >= ARGV[1]) then return {nonce, 0} end
redis.call('HSET', KEYS[1], 'max_id', ARGV[1])
touch(KEYS[1])
return {nonce, 1}`;

// KEYS[1] the history hash, KEYS[2] tag set, KEYS[3] changed set; ARGV[1] '1' for an automatic
// fence (nothing to do when the recorded history is the live one), ARGV[2] the fence count the
// caller expects or '', ARGV[3] 'ids' or 'ranges', ARGV[4] the IDs or the ranges, ARGV[5] maxStep
// (ranges), ARGV[6] one tag or '' for every tag, ARGV[7] the tag hash prefix. One script: the
// record and the rows change together or not at all, and no allocation runs between. Each row is
// raised with HINCRBY (64-bit); past 2^63-1 it is set to 2^63-1, exhausted rather than wrapped. A
// margin in ranges is ranges * max(maxStep, step), below 2^53: exact as a Lua number.
const FENCE = `${PRELUDE}
local live = live_history()
local recorded = redis.call('HGET', KEYS[1], 'history')
local fences = tonumber(redis.call('HGET', KEYS[1], 'fences') or '0') or 0
if (ARGV[1] == '1' and recorded == live) or (ARGV[2] ~= '' and fences ~= tonumber(ARGV[2])) then
  return {nonce, 'unchanged', live, recorded or false, fences}
end
local tags
if ARGV[6] ~= '' then
  if redis.call('EXISTS', ARGV[7] .. ARGV[6]) == 0 then return {nonce, 'not_found'} end
  tags = {ARGV[6]}
else
  tags = redis.call('SMEMBERS', KEYS[2])
end
local raised = 0
for _, tag in ipairs(tags) do
  local key = ARGV[7] .. tag
  local max_id = redis.call('HGET', key, 'max_id')
  if max_id and string.match(max_id, '^%d+$') then
    local add = ARGV[4]
    if ARGV[3] == 'ranges' then
      local largest = tonumber(ARGV[5])
      local step = tonumber(redis.call('HGET', key, 'step') or '')
      if step and step > largest and step <= ${MAX_TAG_STEP} then largest = step end
      add = string.format('%.0f', tonumber(ARGV[4]) * largest)
    end
    local added = redis.pcall('HINCRBY', key, 'max_id', add)
    local ok = not (type(added) == 'table' and added.err)
    if not ok and string.find(added.err, 'overflow') then
      redis.call('HSET', key, 'max_id', '${MAX_SEGMENT_ID}')
      ok = true
    end
    if ok then
      touch(key)
      raised = raised + 1
    end
  end
end
-- A first record of a prefix with no tag to raise counts no fence (see recordedFences).
if recorded or raised > 0 then fences = fences + 1 end
redis.call('HSET', KEYS[1], 'history', live, 'fences', fences, 'update_time', now())
return {nonce, 'fenced', live, recorded or false, fences, raised}`;

// KEYS[1] the history hash: the live history, the recorded one and the fence count.
const HISTORY = `${PRELUDE}
local recorded = redis.call('HGET', KEYS[1], 'history') or false
return {nonce, live_history(), recorded, redis.call('HGET', KEYS[1], 'fences') or '0'}`;

// KEYS[1] tag hash; ARGV expected max_id, offset, increment, then the new ones. Re-forms a set
// (MultiSegmentStore.join): a compare-and-set on max_id and the residue class together.
const REASSIGN = `${PRELUDE}
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], 'max_id') ~= ARGV[1] then
  return {nonce, 0}
end
local offset, increment = residue(KEYS[1])
if offset ~= ARGV[2] or increment ~= ARGV[3] then return {nonce, 0} end
redis.call('HSET', KEYS[1], 'max_id', ARGV[4], 'id_offset', ARGV[5], 'id_increment', ARGV[6])
touch(KEYS[1])
return {nonce, 1}`;

// KEYS[1] tag hash, KEYS[2] tag set; ARGV tag, max_id, step, description or '' with ARGV[5] = '1'
// when present, then offset and increment ('' for a store of its own: no residue fields), then
// ARGV[8] = '1' for an opaque tag, ARGV[9] a periodic tag's option or '', ARGV[10] and ARGV[11]
// the delta and remainder (no fields for delta 1), ARGV[12] the ordering or '', all set in the
// same script: no moment without them.
const CREATE = `${PRELUDE}
if redis.call('EXISTS', KEYS[1]) == 1 then return {nonce, 'exists'} end
redis.call('HSET', KEYS[1], 'max_id', ARGV[2], 'step', ARGV[3])
touch(KEYS[1])
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'description', ARGV[4]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'id_offset', ARGV[6], 'id_increment', ARGV[7]) end
if ARGV[8] == '1' then redis.call('HSET', KEYS[1], 'opaque', '1') end
if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'periodic', ARGV[9]) end
if ARGV[10] ~= '1' then redis.call('HSET', KEYS[1], 'delta', ARGV[10], 'remainder', ARGV[11]) end
if ARGV[12] ~= '' then redis.call('HSET', KEYS[1], 'ordering', ARGV[12]) end
redis.call('SADD', KEYS[2], ARGV[1])
return {nonce, 'ok', unpack(read(KEYS[1]))}`;

// KEYS[1] tag hash; ARGV step or '', description mode ('keep' | 'set' | 'clear'), description,
// '1' to mark the tag opaque (never unmarked), delta and remainder or '' to keep them. A
// cluster-ordered tag is never marked opaque: 'ordered', nothing changed.
const UPDATE = `${PRELUDE}
if redis.call('EXISTS', KEYS[1]) == 0 then return {nonce, 'not_found'} end
if ARGV[4] == '1' and redis.call('HGET', KEYS[1], 'ordering') then return {nonce, 'ordered'} end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'step', ARGV[1]) end
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'opaque', '1') end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'delta', ARGV[5], 'remainder', ARGV[6]) end
if ARGV[2] == 'set' then redis.call('HSET', KEYS[1], 'description', ARGV[3]) end
if ARGV[2] == 'clear' then redis.call('HDEL', KEYS[1], 'description') end
touch(KEYS[1])
return {nonce, 'ok', unpack(read(KEYS[1]))}`;

// KEYS[1] the set's records hash (`<prefix>:set`); ARGV the entry keys. Each entry is two fields,
// `v:<key>` (its version) and `d:<key>` (its text): a flat list of version and text per key.
const READ_SET = `${PRELUDE}
local out = {nonce}
for _, key in ipairs(ARGV) do
  table.insert(out, redis.call('HGET', KEYS[1], 'v:' .. key) or false)
  table.insert(out, redis.call('HGET', KEYS[1], 'd:' .. key) or false)
end
return out`;

// KEYS[1] the set's records hash; ARGV key, expected version ('' for none yet), text.
// Compare-and-set on the version, which goes up by one with each write.
const WRITE_SET = `${PRELUDE}
local version = redis.call('HGET', KEYS[1], 'v:' .. ARGV[1])
if (ARGV[2] == '' and version) or (ARGV[2] ~= '' and version ~= ARGV[2]) then return {nonce, 0} end
redis.call('HSET', KEYS[1], 'd:' .. ARGV[1], ARGV[3])
redis.call('HINCRBY', KEYS[1], 'v:' .. ARGV[1], 1)
return {nonce, 1}`;

// KEYS[1] tag hash, KEYS[2] tag set, KEYS[3] changed set; ARGV[1] the tag.
const DELETE = `${PRELUDE}
local gone = redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], KEYS[1])
return {nonce, gone}`;

// KEYS[1] tag hash.
const GET = `${PRELUDE}
if redis.call('EXISTS', KEYS[1]) == 0 then return {nonce, 'not_found'} end
return {nonce, 'ok', unpack(read(KEYS[1]))}`;

// KEYS[1] the changed set; ARGV[1] from (ms) or '' for the time only, ARGV[2] hash key prefix.
// The server's time, then the tags whose last write is at or after `from`: a flat list of tag +
// fields, as LIST. A member whose hash is gone (a tag deleted outside idmint) is left out.
const CHANGES = `${PRELUDE}
local out = {nonce, now()}
if ARGV[1] == '' then return out end
for _, key in ipairs(redis.call('ZRANGE', KEYS[1], ARGV[1], '+inf', 'BYSCORE')) do
  append(out, string.sub(key, #ARGV[2] + 1), key)
end
return out`;

// KEYS[1] tag set; ARGV[1] SSCAN cursor, ARGV[2] COUNT, ARGV[3] hash key prefix. The next
// cursor, then one scan step's tags as LIST lays them out. SSCAN returns every member present for
// the whole scan at least once, and may return one twice.
const PAGE = `${PRELUDE}
local scan = redis.call('SSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local out = {nonce, scan[1]}
for _, tag in ipairs(scan[2]) do append(out, tag, ARGV[3] .. tag) end
return out`;

// KEYS[1] tag set; ARGV[1] hash key prefix. One consistent snapshot: a flat list of tag + fields.
const LIST = `${PRELUDE}
local out = {nonce}
for _, tag in ipairs(redis.call('SMEMBERS', KEYS[1])) do append(out, tag, ARGV[1] .. tag) end
return out`;

/**
 * Leaf's table as Redis hashes, through `ioredis`. With the `residue` option the store is one
 * database of a set (src/stores/multi/), as the SQL stores are: see SqlSegmentStore. Every
 * operation is one Lua script, so it is atomic on the server; allocation is HINCRBY on max_id
 * (Redis INCRBY backing whole ranges).
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
  /**
   * Nonces are `<this store's random id>:<count>`: unique among every command on a shared client.
   */
  readonly #nonceId = globalThis.crypto.randomUUID().slice(0, 8);
  #commands = 0;
  readonly residue?: SegmentResidue;
  /** ARGV of the residue class: offset and increment, or two '' for a store of its own. */
  readonly #residueArgs: [string, string];
  /** How far a new history is fenced. */
  readonly #fence: FenceMargin;
  readonly #history: HistoryWatch;
  /** This store in failure messages: backend, address, causes seen. */
  readonly #place: StorePlace;
  /** The issuer leases of this prefix's cluster-ordered tags, each a hash beside its tag's. */
  readonly issuers: RedisIssuerLeases;

  constructor(options: RedisSegmentStoreOptions) {
    const { table, timeoutMs, residue, fence } = resolveStoreOptions(options);
    this.#place = new StorePlace(this.backend, options.where);
    if (residue !== undefined) this.residue = residue;
    this.#residueArgs =
      residue === undefined ? ['', ''] : [String(residue.offset), String(residue.increment)];
    if (options.client === undefined || typeof options.client.eval !== 'function') {
      throw new TypeError(
        'RedisSegmentStore needs { client } (an ioredis client); ' +
          'use RedisSegmentStore.connect(url) to open one',
      );
    }
    this.table = table;
    this.#client = options.client;
    this.#closeClient = options.closeClient === true;
    this.#timeoutMs = timeoutMs;
    this.#fence = fence;
    this.#history = new HistoryWatch({
      table,
      margin: fence,
      onHistory: options.onHistory,
      fenceIfNew: () => this.#fenceScript({ margin: fence, automatic: true }),
    });
    this.issuers = new RedisIssuerLeases({
      table,
      run: (operation, script, keys, args) => this.#run(operation, script, keys, args),
      prelude: PRELUDE,
      verifyHistory: async () => {
        const [found] = await this.history();
        if (found?.recorded !== found?.live) await this.#history.verify();
      },
      ...(options.issuerInterleave === undefined ? {} : { interleave: options.issuerInterleave }),
    });
  }

  /**
   * Opens a client of its own on `target` (parsed by the redis backend from the URL, never by
   * ioredis, which would run on database 0 when the one named cannot be selected), quit by
   * close(). Loads `ioredis` on first use.
   */
  static async connect(
    target: RedisAddress,
    options: SegmentStoreOptions = {},
  ): Promise<RedisSegmentStore> {
    const { timeoutMs } = resolveStoreOptions(options);
    const { Redis } = await loadDriver(
      'ioredis',
      'a redis:// segment store',
      () => import('ioredis'),
    );
    const client = new Redis({
      ...target,
      connectTimeout: timeoutMs,
      // Fail a command after one reconnection attempt instead of queueing it for many: the
      // segment service backs off and retries on its own, so a queue would only pile up.
      maxRetriesPerRequest: 1,
      // A command cut off by a dropped connection is not sent again: the store call already
      // failed, and a silent second allocation would only waste a range.
      autoResendUnfulfilledCommands: false,
      // No commandTimeout: the store's own timer bounds each call (see #run). A connection that
      // receives nothing at all for twice that bound while commands wait is dead (a peer gone
      // without a reset, a black hole): ioredis then destroys it and reconnects. A stall shorter
      // than that (a slow script, a fork) fails only the calls it outlasts, not the connection.
      socketTimeout: 2 * timeoutMs,
    });
    const store = new RedisSegmentStore({ ...options, client, closeClient: true });
    // Connection errors surface as failed commands, in ioredis's words ("max retries per
    // request"); the system's (connection refused) comes only in these events, so the store's
    // messages take it from here. Without a listener ioredis would log each one.
    client.on('error', (error: unknown) => store.#place.causes.saw(error));
    return store;
  }

  /** Hashes need no schema: records the history (fencing it when it is new). */
  async init(): Promise<void> {
    await this.#history.verify();
  }

  async allocate(tag: string, step?: number): Promise<SegmentRange> {
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    for (let attempt = 1; ; attempt++) {
      const args = [step === undefined ? '' : String(step), ...this.#residueArgs];
      const reply = await this.#run(
        'allocate',
        ALLOCATE,
        [this.#key(tag), this.#historyKey, this.#changedKey],
        args,
      );
      if (reply[0] !== 'history') return this.#allocated(tag, step, reply);
      const retry: AllocateRetry = {
        retry: 'history',
        live: String(reply[1]),
        recorded: optionalText(reply[2]),
      };
      if (attempt >= ALLOCATE_ATTEMPTS) throw historyUnsettled(this.backend, tag, retry);
      await this.#history.verify();
    }
  }

  /** The range an ALLOCATE reply (other than 'history') carries, or the error it names. */
  #allocated(tag: string, step: number | undefined, reply: unknown[]): SegmentRange {
    if (reply[0] === 'not_found') throw tagNotFound(tag);
    if (reply[0] === 'ordered') throw orderedInFirstDatabase(tag, this.residue);
    if (reply[0] === 'residue')
      throw residueMismatch(tag, storedResidue(reply[1], reply[2]), this.residue);
    if (reply[0] === 'misconfigured') {
      const field = reply[1] === 'step' || reply[1] === 'delta' ? reply[1] : 'max_id';
      throw tagMisconfigured(tag, field, reply[2]);
    }
    if (reply[0] === 'exhausted') {
      // HINCRBY fails only on overflow or on a max_id Redis does not read as an integer ("007").
      if (!String(reply[3]).includes('overflow')) throw tagMisconfigured(tag, 'max_id', reply[1]);
      throw idSpaceExhausted(tag, toBigInt(reply[1], 'max_id'), toStep(reply[2]));
    }
    const end = toBigInt(reply[1], 'max_id');
    const tagStep = toStep(reply[2]);
    const used = step ?? tagStep;
    this.#history.allocatedOn(String(reply[3]));
    // The script checked the sequence it used and found its class in this store's.
    const sequence = storedSequence(reply[4], reply[5]) ?? EVERY_ID;
    const own = combinedResidue(this.residue ?? { offset: 0, increment: 1 }, sequence);
    return residueRange(tag, end, used, tagStep, own);
  }

  async release(tag: string, from: bigint, to: bigint): Promise<boolean> {
    checkTag(tag);
    checkRelease(from, to, this.residue);
    const args = [from.toString(), to.toString(), ...this.#residueArgs];
    const reply = await this.#run(
      'release',
      RELEASE,
      [this.#key(tag), this.#historyKey, this.#changedKey],
      args,
    );
    return Number(reply[0]) === 1;
  }

  async history(): Promise<StoreHistory[]> {
    const reply = await this.#run('history', HISTORY, [this.#historyKey], []);
    return [{ live: String(reply[0]), recorded: optionalText(reply[1]), fences: Number(reply[2]) }];
  }

  async fence(request: FenceRequest = {}): Promise<FenceReport[]> {
    const margin = checkFenceMargin(request.margin ?? this.#fence);
    if (request.tag !== undefined) checkTag(request.tag);
    const ifFences = checkFenceCount(request.ifFences);
    // One script: no other fence can claim the record between its read and its write.
    const outcome = await this.#fenceScript({
      margin,
      automatic: false,
      ...(request.tag === undefined ? {} : { tag: request.tag }),
      ...(ifFences === undefined ? {} : { ifFences }),
    });
    return [
      {
        fenced: outcome.fenced,
        tags: outcome.tags,
        history: outcome.history,
        fences: outcome.fences,
      },
    ];
  }

  async raise(tag: string, atLeast: bigint): Promise<boolean> {
    checkTag(tag);
    checkRaise(atLeast, this.residue);
    const args = [atLeast.toString(), ...this.#residueArgs];
    const reply = await this.#run('raise', RAISE, [this.#key(tag), this.#changedKey], args);
    return Number(reply[0]) === 1;
  }

  /** Runs the FENCE script, bounded by the fence timeout (it raises every tag at once). */
  async #fenceScript(call: FenceCall): Promise<FenceOutcome> {
    const { margin: m } = call;
    const margin =
      'ids' in m ? ['ids', m.ids.toString(), ''] : ['ranges', String(m.ranges), String(m.maxStep)];
    const expected = call.ifFences === undefined ? '' : String(call.ifFences);
    const args = [call.automatic ? '1' : '0', expected, ...margin, call.tag ?? '', this.#key('')];
    const keys = [this.#historyKey, `${this.table}:tags`, this.#changedKey];
    const reply = await this.#run('fence', FENCE, keys, args, fenceTimeoutMs(this.#timeoutMs));
    if (reply[0] === 'not_found') throw tagNotFound(call.tag ?? '');
    const fenced = reply[0] === 'fenced';
    return {
      fenced,
      raced: false,
      history: String(reply[1]),
      from: optionalText(reply[2]),
      fences: Number(reply[3]),
      tags: fenced ? Number(reply[4]) : 0,
    };
  }

  /** Re-forms a set, for MultiSegmentStore.join only: see SqlSegmentStore.reassign. */
  async reassign(
    tag: string,
    from: { maxId: bigint; residue: SegmentResidue },
    to: { maxId: bigint; residue: SegmentResidue },
  ): Promise<boolean> {
    checkTag(tag);
    const args = [
      from.maxId,
      from.residue.offset,
      from.residue.increment,
      to.maxId,
      to.residue.offset,
      to.residue.increment,
    ].map(String);
    const reply = await this.#run('reassign', REASSIGN, [this.#key(tag), this.#changedKey], args);
    return Number(reply[0]) === 1;
  }

  /** The set's own records in the hash `<prefix>:set`: see SqlSegmentStore.readSetEntries. */
  async readSetEntries(
    keys: readonly string[],
  ): Promise<({ version: number; value: string } | undefined)[]> {
    const entries: ({ version: number; value: string } | undefined)[] = [];
    // In chunks: one script holds the server while it runs.
    for (let i = 0; i < keys.length; i += 500) {
      const chunk = keys.slice(i, i + 500);
      const reply = await this.#run('readSetEntries', READ_SET, [this.#setKey], [...chunk]);
      chunk.forEach((_, k) => {
        const version = reply[2 * k];
        const value = String(reply[2 * k + 1] ?? '');
        entries.push(
          version === null || version === undefined
            ? undefined
            : { version: Number(version), value },
        );
      });
    }
    return entries;
  }

  /** Writes a set record if its version is still `version`: see SqlSegmentStore.writeSetEntry. */
  async writeSetEntry(key: string, version: number | undefined, value: string): Promise<boolean> {
    const expected = version === undefined ? '' : String(version);
    const reply = await this.#run(
      'writeSetEntry',
      WRITE_SET,
      [this.#setKey],
      [key, expected, value],
    );
    return Number(reply[0]) === 1;
  }

  async listTags(): Promise<TagRecord[]> {
    return this.#records(
      await this.#run('listTags', LIST, [`${this.table}:tags`], [this.#key('')]),
    ).sort(byTag);
  }

  /**
   * From `<prefix>:changed`, a sorted set every write script adds the tag's key to, scored by
   * the write's server time: the members scored at or after the cursor less
   * {@link changeOverlapMs}. Tags last written by an idmint older than this set are found by the
   * full read.
   */
  async listTagChanges(since: string | undefined): Promise<TagChanges> {
    const from =
      since === undefined
        ? ''
        : String(Math.max(0, parseChangeCursor(since) - changeOverlapMs(this.#timeoutMs)));
    const reply = await this.#run(
      'listTagChanges',
      CHANGES,
      [this.#changedKey],
      [from, this.#key('')],
    );
    return { cursor: changeCursor(Number(reply[0])), records: this.#records(reply.slice(1)) };
  }

  /**
   * SSCAN steps of the tag set: about `limit` tags a page (a small set comes whole), in no order.
   */
  async listTagPage(after: string | undefined, limit: number): Promise<TagPage> {
    checkPageLimit(limit);
    if (after !== undefined && !/^[1-9]\d{0,19}$/.test(after))
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `a tag page cursor is one this store returned, got ${JSON.stringify(after)}`,
      );
    const reply = await this.#run(
      'listTagPage',
      PAGE,
      [`${this.table}:tags`],
      [after ?? '0', String(limit), this.#key('')],
    );
    const next = String(reply[0]);
    return { records: this.#records(reply.slice(1)), next: next === '0' ? undefined : next };
  }

  async getTag(tag: string): Promise<TagRecord | undefined> {
    checkTag(tag);
    const reply = await this.#run('getTag', GET, [this.#key(tag)], []);
    return reply[0] === 'ok' ? this.#record(tag, reply.slice(1)) : undefined;
  }

  async createTag(tag: NewTag): Promise<TagRecord> {
    const v = checkNewTag(tag, this.residue);
    // A prefix's first tag records its history first (Redis needs no `db init`): a prefix idmint
    // fills from empty is never fenced at its first allocation.
    await this.#history.verify();
    const reply = await this.#run(
      'createTag',
      CREATE,
      [this.#key(v.tag), `${this.table}:tags`, this.#changedKey],
      [
        v.tag,
        v.startId.toString(),
        String(v.step),
        v.description ?? '',
        v.description === null ? '0' : '1',
        ...this.#residueArgs,
        v.opaque ? '1' : '0',
        v.periodic ?? '',
        String(v.delta),
        String(v.remainder),
        v.ordering ?? '',
      ],
    );
    if (reply[0] === 'exists')
      throw new IdMintError('TAG_EXISTS', `tag "${v.tag}" already exists`, {
        details: { tag: v.tag },
      });
    return this.#record(v.tag, reply.slice(1));
  }

  async updateTag(tag: string, update: TagUpdate): Promise<TagRecord> {
    checkTag(tag);
    // Both together, as on SQL: an absent remainder is 0.
    const sequence =
      update.delta === undefined && update.remainder === undefined
        ? undefined
        : checkSequence(update.delta, update.remainder);
    const step = update.step === undefined ? '' : String(checkStep(update.step));
    const description =
      update.description === undefined ? undefined : checkDescription(update.description);
    const mode = description === undefined ? 'keep' : description === null ? 'clear' : 'set';
    const opaque = checkOpaqueUpdate(update.opaque) ? '1' : '0';
    const reply = await this.#run(
      'updateTag',
      UPDATE,
      [this.#key(tag), this.#changedKey],
      [
        step,
        mode,
        description ?? '',
        opaque,
        sequence === undefined ? '' : String(sequence.delta),
        sequence === undefined ? '' : String(sequence.remainder),
      ],
    );
    if (reply[0] === 'not_found') throw tagNotFound(tag);
    if (reply[0] === 'ordered') throw orderedNotOpaque(tag);
    return this.#record(tag, reply.slice(1));
  }

  async deleteTag(tag: string): Promise<boolean> {
    checkTag(tag);
    const reply = await this.#run(
      'deleteTag',
      DELETE,
      [this.#key(tag), `${this.table}:tags`, this.#changedKey],
      [tag],
    );
    return Number(reply[0]) === 1;
  }

  async close(): Promise<void> {
    if (!this.#closeClient) return;
    // QUIT waits for Redis's reply; a Redis that accepts connections but never answers would
    // keep close() (and the process) waiting forever. Wait as long as for any call, then drop
    // the connection either way; a Redis that never answered is not waited for again (a failed
    // start would have waited for it twice).
    if (this.#place.firstAnswer.answered)
      await withTimeout(
        this.#client.quit(),
        this.#timeoutMs,
        () => new Error('QUIT timed out'),
      ).catch(() => undefined);
    this.#client.disconnect();
  }

  #key(tag: string): string {
    return `${this.table}:tag:${tag}`;
  }

  /**
   * The hash of the set's own records (MultiSegmentStore): never a tag's key, the tag set or the
   * changed set.
   */
  get #setKey(): string {
    return `${this.table}:set`;
  }

  /** The hash recording the history the prefix was last fenced for. */
  get #historyKey(): string {
    return `${this.table}:history`;
  }

  /** The sorted set of tag keys by last write time, for {@link listTagChanges}. */
  get #changedKey(): string {
    return `${this.table}:changed`;
  }

  /** Records from a flat reply of tag + {@link FIELDS} fields each. */
  #records(flat: unknown[]): TagRecord[] {
    const records: TagRecord[] = [];
    for (let i = 0; i + FIELDS < flat.length; i += FIELDS + 1)
      records.push(this.#record(String(flat[i]), flat.slice(i + 1, i + FIELDS + 1)));
    return records;
  }

  /**
   * Runs one script, bounded by the store's timeout. A timeout abandons only this call: ioredis
   * matches replies to commands by their order on the connection, and TCP loses nothing without
   * failing the connection, so a late reply still lands on its own (abandoned) command and every
   * other command in flight keeps its own reply. Dropping the connection on a timeout, as this
   * store once did, failed every allocation in flight for one slow one.
   *
   * Each reply must carry the nonce its command sent. One that carries another (a proxy that lost
   * a request or a reply without closing the connection) means every later reply on the
   * connection is shifted too, so the connection is dropped and reopened at once. The check runs
   * even for a call already abandoned, whose reply is the first to show the shift.
   */
  async #run(
    operation: string,
    script: string,
    keys: string[],
    args: string[],
    timeoutMs = this.#timeoutMs,
  ): Promise<unknown[]> {
    const nonce = `${this.#nonceId}:${++this.#commands}`;
    return storeCall(this.#place, operation, timeoutMs, () =>
      this.#client
        .eval(script, keys.length, ...keys, ...args, nonce)
        .then((reply) => this.#answerTo(operation, nonce, reply)),
    );
  }

  /** The reply without its nonce, if the nonce is `nonce`; else the connection is out of step. */
  #answerTo(operation: string, nonce: string, reply: unknown): unknown[] {
    if (Array.isArray(reply) && reply[0] === nonce) return reply.slice(1);
    this.#client.disconnect(true);
    throw new IdMintError(
      'STORE_UNAVAILABLE',
      this.#place.line(
        operation,
        'a reply meant for another command (the connection lost data on the way); the ' +
          'connection was reset',
      ),
      {
        details: { backend: this.backend, operation },
      },
    );
  }

  #record(tag: string, fields: unknown[]): TagRecord {
    return tagRecord({
      biz_tag: tag,
      max_id: fields[0],
      step: fields[1],
      description: fields[2] ?? null,
      update_time: fields[3],
      id_offset: fields[4],
      id_increment: fields[5],
      opaque: fields[6],
      periodic: fields[7],
      delta: fields[8],
      remainder: fields[9],
      ordering: fields[10],
    });
  }
}
