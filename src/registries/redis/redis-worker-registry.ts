import { hostText } from '../../shared/connection-url.ts';
import type {
  AcquireRequest,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from '../../ports/worker-registry.ts';
import {
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_TTL_MS,
  RegistryLease,
  checkName,
  checkTtl,
  floorAfterSettle,
  judgeHistory,
  leaseLost,
  planAcquire,
  registryDoing,
  registrySettling,
  registryUnavailable,
  settleMs,
  workerIdsExhausted,
  type Interleave,
  type InterleaveStep,
  type RegistryHistory,
} from '../common.ts';
import { LIVE_HISTORY_LUA } from '../../redis/redis-history.ts';
import { BackendCauses } from '../../shared/failure-cause.ts';
import { loadDriver } from '../../shared/load-driver.ts';

/**
 * The part of an ioredis client the registry uses. The client may be shared: a call that times
 * out leaves the connection, and every other call on it, alone.
 */
export interface RedisLike {
  eval(script: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  quit(): Promise<unknown>;
  /** Drops the connection. */
  disconnect(): void;
}

/** Options for {@link RedisWorkerRegistry}. */
export interface RedisWorkerRegistryOptions {
  readonly client: RedisLike;
  /** Cluster name; worker IDs are unique within it. Default `idmint`. */
  readonly name?: string;
  /** Lease TTL in ms, judged by Redis's clock (`PX`). Default 10000. */
  readonly ttlMs?: number;
  /** Where Redis is, for error messages. Default `redis`. */
  readonly where?: string;
  /** Quit `client` in {@link RedisWorkerRegistry.close}. Default false. */
  readonly ownsClient?: boolean;
  /**
   * The causes the client's connection errors were noted in (its 'error' events), for messages:
   * a command fails in ioredis's words ("Stream isn't writeable"), the system's are there.
   */
  readonly causes?: BackendCauses;
  /**
   * The most any holder's `borrow` generator leads its clock, in ms (as SqlWorkerRegistry's):
   * after Redis moves to a new history no lease is granted for one TTL plus this. Default 0.
   */
  readonly maxLeadMs?: number;
  /** Tests only: pauses at the steps docs/workers.md lists (see {@link Interleave}). */
  readonly interleave?: Interleave;
}

// Keys, under the prefix `idmint:workers:{<name>}:` (one hash slot, so a cluster keeps them on
// one node and every script below stays atomic):
//   lease:<id>    the holder's fencing token, SET NX PX: exists exactly while the lease is held
//   record:<id>   hash: lastTimestamp, reportedAt, reportedServerMs (survives the lease)
//   node:<host>:<port>  the worker ID this identity held last, so a restart gets it back
//   ids           set of worker IDs ever leased, to recycle and to list peers without SCAN
//   fence         counter: each claim's token is the next value, so tokens only grow
//   expiry        sorted set: worker ID -> when its lease ends by Redis's clock (the ID itself once
//                 released), so a free ID is found without reading every ID; a hint only, the
//                 lease key decides
//   next          the lowest ID that may never have been used, where a new ID is looked for first

/**
 * The guard at the start of ACQUIRE: unless the history recorded in `history` (a hash: history,
 * fences, settledAt) is the live one and settled, returns {-2, live, recorded, used, settledAt,
 * now, fences} for the client to judge (common.ts, judgeHistory) and claims nothing. `used`: the
 * registry has lease data (the fence counter every claim moves).
 */
const SETTLED_OR_RETURN = `
local h = redis.call('HMGET', p .. 'history', 'history', 'fences', 'settledAt')
local live, settled_at = live_history(), tonumber(h[3] or '0')
if h[1] ~= live or settled_at > now then
  return { -2, live, h[1] or false, redis.call('EXISTS', p .. 'fence'), h[3] or '0',
    string.format('%.0f', now), h[2] or '0' }
end`;

/**
 * Records the live history if the record is still the one the client judged (ARGV[1] history or
 * '', ARGV[2] fences): as settled (ARGV[3] = 0, a registry seen for the first time) or fenced,
 * settling ARGV[3] ms from now. 1 = done, 0 = the record changed meanwhile.
 */
const RECORD_HISTORY = `${LIVE_HISTORY_LUA}
local key = KEYS[1] .. 'history'
local h = redis.call('HMGET', key, 'history', 'fences')
if (h[1] or '') ~= ARGV[1] or (h[2] or '0') ~= ARGV[2] then return 0 end
local settle = tonumber(ARGV[3])
if settle == 0 then
  redis.call('HSET', key, 'history', live_history(), 'fences', '0', 'settledAt', '0')
  return 1
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HSET', key, 'history', live_history(), 'fences', tonumber(ARGV[2]) + 1,
  'settledAt', string.format('%.0f', now + settle))
return 1
`;

/**
 * Claims the best free worker ID in one atomic step. Returns {id, token, last, reported} or {-1,
 * live}.
 *
 * The order: this identity's last ID; then up to 16 IDs whose lease ended, by `expiry` (released
 * ones first, lowest first, then expired ones, longest expired first); then up to 16 IDs from
 * `next` on that were never used; only when none of those can be taken, every ID ever used and then
 * every ID of the layout, as before `expiry` existed. So with any number of IDs held the usual
 * claim costs a few commands, and the verdict "none free" is never given without looking at all of
 * them. IDs leased by a node that predates `expiry` are missing from it until renewed: the full
 * pass still finds them.
 */
const ACQUIRE = `${LIVE_HISTORY_LUA}
local p = KEYS[1]
local host, port, ttl, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local only, below = tonumber(ARGV[5]), tonumber(ARGV[6])
local excluded = {}
for id in string.gmatch(ARGV[7], '%d+') do excluded[tonumber(id)] = true end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
${SETTLED_OR_RETURN}
local token = tostring(redis.call('INCR', p .. 'fence'))
local function try(id)
  if id < 0 or id >= max or excluded[id] or (only >= 0 and id ~= only) then return false end
  local last = redis.call('HGET', p .. 'record:' .. id, 'lastTimestamp')
  if last and tonumber(last) >= below then return false end
  return redis.call('SET', p .. 'lease:' .. id, token, 'NX', 'PX', ttl)
end
local function claimed(id)
  redis.call('SADD', p .. 'ids', id)
  redis.call('ZADD', p .. 'expiry', now + tonumber(ttl), id)
  redis.call('SET', p .. 'node:' .. host .. ':' .. port, id)
  local r = redis.call('HMGET', p .. 'record:' .. id, 'lastTimestamp', 'reportedAt')
  return { id, token, r[1] or '-1', r[2] or '-1', settled_at }
end
local mine = redis.call('GET', p .. 'node:' .. host .. ':' .. port)
if mine and try(tonumber(mine)) then return claimed(tonumber(mine)) end
if only >= 0 then
  if try(only) then return claimed(only) end
else
  for _, v in ipairs(redis.call('ZRANGEBYSCORE', p .. 'expiry', '-inf', now, 'LIMIT', 0, 16)) do
    if try(tonumber(v)) then return claimed(tonumber(v)) end
  end
  local from = tonumber(redis.call('GET', p .. 'next') or '0')
  for id = from, math.min(from + 16, max) - 1 do
    if redis.call('SISMEMBER', p .. 'ids', id) == 0 and try(id) then
      redis.call('SET', p .. 'next', id + 1)
      return claimed(id)
    end
  end
end
local ids, known = {}, {}
for i, v in ipairs(redis.call('SMEMBERS', p .. 'ids')) do ids[i] = tonumber(v); known[ids[i]] = \
true end
table.sort(ids)
for _, id in ipairs(ids) do if try(id) then return claimed(id) end end
if only >= 0 then
  if not known[only] and try(only) then return claimed(only) end
else
  for id = 0, max - 1 do
    if not known[id] and try(id) then
      redis.call('SET', p .. 'next', id + 1)
      return claimed(id)
    end
  end
end
local live = 0
for _, id in ipairs(ids) do live = live + redis.call('EXISTS', p .. 'lease:' .. id) end
return { -1, live }
`;

/**
 * Renews (ARGV[6] = 'renew') or releases a lease if the token still holds it, recording the
 * report with Redis's own time beside it (for peers' report ages). A renewal keeps the larger of
 * the stored and the reported value of each number (one that lands after a later one changes
 * nothing); a release stores the report exactly. 1 = done, 0 = not the holder.
 */
const WRITE = `${LIVE_HISTORY_LUA}
local p, id, token = KEYS[1], ARGV[1], ARGV[2]
local lease, record = p .. 'lease:' .. id, p .. 'record:' .. id
if redis.call('GET', lease) ~= token then return 0 end
-- A renewal on a history other than the recorded one is lost (docs/workers.md).
if ARGV[6] == 'renew' and redis.call('HGET', p .. 'history', 'history') ~= live_history() then
  return 0
end
local last, reported = ARGV[4], ARGV[5]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if ARGV[6] == 'renew' then
  redis.call('PEXPIRE', lease, ARGV[3])
  redis.call('ZADD', p .. 'expiry', now + tonumber(ARGV[3]), id)
  local r = redis.call('HMGET', record, 'lastTimestamp', 'reportedAt')
  if r[1] and tonumber(r[1]) > tonumber(last) then last = r[1] end
  if r[2] and tonumber(r[2]) > tonumber(reported) then reported = r[2] end
else
  redis.call('DEL', lease)
  -- Released: scored by its own ID, far below any time, so released IDs come out lowest first.
  redis.call('ZADD', p .. 'expiry', id, id)
end
redis.call('HSET', record, 'lastTimestamp', last, 'reportedAt', reported,
  'reportedServerMs', string.format('%.0f', now))
return 1
`;

/** Live holders' reports, flattened: id, reportedAt, ageMs, ... */
const PEERS = `
local p = KEYS[1]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', p .. 'ids')) do
  if redis.call('EXISTS', p .. 'lease:' .. id) == 1 then
    local r = redis.call('HMGET', p .. 'record:' .. id, 'reportedAt', 'reportedServerMs')
    if r[1] and r[2] and tonumber(r[1]) >= 0 then
      table.insert(out, id); table.insert(out, r[1]); table.insert(out, string.format('%.0f', now \
- tonumber(r[2])))
    end
  end
end
return out
`;

/**
 * Worker IDs leased in Redis: a claim is `SET lease:<id> <token> NX PX <ttl>` inside one script
 * that also picks the ID (this identity's last ID, else a recycled one, else a new one), so any
 * number of nodes acquiring at once get different IDs. The token is a fencing token from a
 * counter; renewals and releases are scripts that act only if the key still holds it, so a node
 * whose lease expired and was taken over can never extend or overwrite the new holder's.
 *
 * Redis signals nothing when a key expires, so lease loss shows up at the next renewal. Expiry
 * follows Redis's clock: run Redis with persistence and no failover that could lose the key.
 */
export class RedisWorkerRegistry implements WorkerRegistry {
  readonly backend = 'redis';
  readonly #client: RedisLike;
  readonly #prefix: string;
  readonly #ttlMs: number;
  readonly #settleMs: number;
  readonly #where: string;
  /** Causes of this registry's failures, the last one the system named remembered. */
  readonly #causes: BackendCauses;
  readonly #ownsClient: boolean;
  readonly #interleave: Interleave | undefined;

  constructor(options: RedisWorkerRegistryOptions) {
    this.#client = options.client;
    this.#prefix = `idmint:workers:{${checkName(options.name ?? 'idmint')}}:`;
    this.#ttlMs = checkTtl(options.ttlMs ?? DEFAULT_TTL_MS);
    this.#settleMs = settleMs(this.#ttlMs, options.maxLeadMs ?? 0);
    this.#where = options.where ?? 'redis';
    this.#causes = options.causes ?? new BackendCauses();
    this.#ownsClient = options.ownsClient ?? false;
    this.#interleave = options.interleave;
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    const plan = planAcquire(request);
    const { host, port } = plan.identity;
    const below = Number.isFinite(plan.below) ? plan.below : Number.MAX_SAFE_INTEGER;
    // The script reads and claims in one atomic step: the pause can only come before both.
    if (this.#interleave !== undefined)
      await this.#step({ point: 'before-claim', backend: this.backend, workerId: plan.only ?? -1 });
    const claim = async () =>
      (await this.#eval(
        registryDoing.acquire,
        ACQUIRE,
        host,
        port,
        this.#ttlMs,
        plan.maxWorkers,
        plan.only ?? -1,
        below,
        [...plan.exclude].join(','),
      )) as unknown[];
    let result = await claim();
    // Three tries at most: a record or fence by this node or another lands between two.
    for (let attempt = 1; Number(result[0]) === -2; attempt++) {
      await this.#settle(result, attempt);
      result = await claim();
    }
    const workerId = Number(result[0]);
    if (workerId < 0) throw workerIdsExhausted(this.backend, plan, Number(result[1]));
    const token = String(result[1]);
    return new RegistryLease({
      backend: this.backend,
      workerId,
      lastTimestamp: floorAfterSettle(Number(result[2]), Number(result[4])),
      reportedAt: Number(result[3]),
      ttlMs: this.#ttlMs,
      write: async (kind, report) => this.#write(kind, workerId, token, report),
    });
  }

  /**
   * ACQUIRE found the history unsettled (`found`, its reply): records a first history, fences a
   * new one (docs/workers.md, "When the database's history changes"), or throws while a fence
   * settles.
   */
  async #settle(found: unknown[], attempt: number): Promise<void> {
    const recorded = found[2] == null ? undefined : String(found[2]);
    const history: RegistryHistory = {
      live: String(found[1]),
      recorded,
      used: Number(found[3]) === 1,
      settledAt: Number(found[4]),
      nowMs: Number(found[5]),
    };
    const verdict = judgeHistory(history);
    if (verdict === 'settled') return; // settled between the script's read and now
    if (verdict === 'settling' || attempt === 3)
      throw registrySettling(this.backend, this.#where, history);
    const settle = verdict === 'record' ? 0 : this.#settleMs;
    await this.#eval(
      registryDoing.acquire,
      RECORD_HISTORY,
      recorded ?? '',
      String(found[6]),
      settle,
    );
  }

  async peers(): Promise<PeerTime[]> {
    const flat = (await this.#eval(registryDoing.peers, PEERS)) as unknown[];
    const peers: PeerTime[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      peers.push({
        workerId: Number(flat[i]),
        reportedAt: Number(flat[i + 1]),
        ageMs: Math.max(0, Number(flat[i + 2])),
      });
    }
    return peers;
  }

  async close(): Promise<void> {
    if (!this.#ownsClient) return;
    await this.#client.quit().catch(() => {});
    // QUIT cannot reach a Redis that is down; without this the client would keep reconnecting.
    this.#client.disconnect();
  }

  async #write(
    kind: 'renew' | 'release',
    workerId: number,
    token: string,
    report: WorkerReport,
  ): Promise<number> {
    if (kind === 'renew' && this.#interleave !== undefined)
      await this.#step({ point: 'before-renew-write', backend: this.backend, workerId, report });
    const done = await this.#eval(
      registryDoing[kind](workerId),
      WRITE,
      workerId,
      token,
      this.#ttlMs,
      report.lastTimestamp,
      report.reportedAt,
      kind,
    );
    if (Number(done) !== 1)
      throw leaseLost(
        this.backend,
        workerId,
        'its key expired or holds another token, or Redis is on a new history',
      );
    return this.#ttlMs;
  }

  /** Runs the test hook; its failure is the step's, as a request that never arrived. */
  async #step(step: InterleaveStep): Promise<void> {
    try {
      await this.#interleave?.(step);
    } catch (error) {
      throw registryUnavailable(this.backend, this.#where, error, this.#causes);
    }
  }

  /** Runs `script`; a failure is told as `doing`'s (words, see registryDoing). */
  async #eval(doing: string, script: string, ...args: (string | number)[]): Promise<unknown> {
    try {
      return await this.#client.eval(script, 1, this.#prefix, ...args);
    } catch (error) {
      // A call that timed out stays in ioredis's command queue until its reply comes, and that
      // reply is matched to it (replies come in the order of the commands), so the connection is
      // still in step: nothing to reset, and the calls in flight behind it are answered. (The
      // call itself may still land: renewals never lower a record, so a late one is harmless.)
      throw registryUnavailable(this.backend, this.#where, error, this.#causes, doing);
    }
  }
}

/** Options for {@link connectRedisWorkerRegistry}. */
export interface ConnectRedisOptions
  extends Omit<RedisWorkerRegistryOptions, 'client' | 'ownsClient' | 'where'> {
  /** Bound on one round trip, and on connecting. Default 5000 ms. */
  readonly operationTimeoutMs?: number;
}

/**
 * Where a Redis server is, as the redis backend (src/backends/) read it from the URL: the
 * options ioredis gets (a structural subset of its RedisOptions).
 */
export interface RedisRegistryAddress {
  readonly host: string;
  readonly port: number;
  readonly username?: string;
  readonly password?: string;
  readonly db: number;
  /** Present for `rediss://`: connect over TLS. */
  readonly tls?: Record<string, never>;
}

/**
 * Connects to Redis at `target` with ioredis, loaded only now. The redis backend reads the URL,
 * never ioredis: it would run on database 0 when the one named cannot be selected.
 */
export async function connectRedisWorkerRegistry(
  target: RedisRegistryAddress,
  options: ConnectRedisOptions = {},
): Promise<RedisWorkerRegistry> {
  const { Redis } = await loadDriver(
    'ioredis',
    'a redis:// worker registry',
    () => import('ioredis'),
  );
  const timeout = options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
  const client = new Redis({
    ...target,
    lazyConnect: true,
    connectTimeout: timeout,
    commandTimeout: timeout,
    // No offline queue: a command sent during an outage fails at once (the worker's fencing and
    // retries handle it) instead of running whenever the connection returns, long after the
    // caller gave up on it (a late acquire would hold an ID nobody uses).
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    retryStrategy: (attempt: number) => Math.min(attempt * 200, 2000),
    // A connection that gets no byte at all for twice the operation timeout while calls wait is
    // dead (a partition with no reset can keep it open for minutes): ioredis drops it and
    // reconnects. One slow reply does not, and a timeout alone never resets a connection.
    socketTimeout: 2 * timeout,
    // Calls cut off with the connection fail (their callers retry): none is sent a second time,
    // long after its caller gave up on it.
    autoResendUnfulfilledCommands: false,
  });
  // Reported through the failing commands, not as an unhandled event; their cause is noted.
  const causes = new BackendCauses();
  client.on('error', (error: unknown) => causes.saw(error));
  const where = hostText({ host: target.host, port: target.port });
  // Open even while Redis is down (the weak-dependency cache needs the registry then); the
  // client keeps reconnecting in the background.
  await client.connect().catch(() => {});
  return new RedisWorkerRegistry({ ...options, client, ownsClient: true, where, causes });
}
