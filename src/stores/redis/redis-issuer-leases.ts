import { IdMintError } from '../../core/errors.ts';
import { checkTag } from '../../core/segment-limits.ts';
import type { IssuerBusy, IssuerLease, IssuerLeases } from '../../ports/issuer-lease.ts';
import {
  checkClaim,
  checkHolding,
  issuerBusy,
  issuerLeaseLost,
  issuerTagNotFound,
  type IssuerInterleave,
} from '../issuer-support.ts';
import { toBigInt } from '../store-support.ts';

/** Runs one of the store's scripts (its nonce check and timeout included); the reply's rest. */
export type RedisRun = (
  operation: string,
  script: string,
  keys: string[],
  args: string[],
) => Promise<unknown[]>;

/** What {@link RedisIssuerLeases} needs from its segment store. */
export interface RedisIssuerLeasesOptions {
  /** The key prefix. */
  readonly table: string;
  readonly run: RedisRun;
  /** The store's script prelude (the nonce, `now()`). */
  readonly prelude: string;
  /** The store's history check: records the live history, fencing it first when it is new. */
  readonly verifyHistory: () => Promise<void>;
  readonly interleave?: IssuerInterleave;
}

// KEYS[1] is the lease's hash, `<prefix>:issuer:<tag>`: node, address, epoch and expires_at (ms by
// the server's TIME). Times are Lua numbers: ms since the epoch are below 2^53, exact. Each script
// reads and writes the hash in one step on the server, so no claim runs between its read and its
// write. The epoch is a HINCRBY: 64-bit, never reused; the hash is never deleted with its tag.
const clock = `local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function expires()
  return tonumber(redis.call('HGET', KEYS[1], 'expires_at') or '0') or 0
end
`;

// KEYS[1] the lease, KEYS[2] the tag's hash, KEYS[3] the prefix's history hash; ARGV node,
// address, ttl (ms). Held when no live lease stands by the server's clock, or the live one is
// this node's: a new epoch either way. Not for one TTL (and a second) after a fence moved the
// history on ('settling'), a first record of a prefix that had tags included: see SqlIssuerLeases.
const CLAIM = `
if redis.call('EXISTS', KEYS[2]) == 0 then return {nonce, 'not_found'} end
local t = now_ms()
local holder = redis.call('HGET', KEYS[1], 'node') or ''
if expires() > t and holder ~= ARGV[1] then
  return {nonce, 'busy', holder, redis.call('HGET', KEYS[1], 'address') or '',
    redis.call('HGET', KEYS[1], 'epoch') or '0', string.format('%.0f', expires() - t)}
end
local fences = tonumber(redis.call('HGET', KEYS[3], 'fences') or '0') or 0
local fenced_at = tonumber(redis.call('HGET', KEYS[3], 'update_time') or '0') or 0
if fences >= 1 and fenced_at + tonumber(ARGV[3]) + 1000 > t then return {nonce, 'settling'} end
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HSET', KEYS[1], 'node', ARGV[1], 'address', ARGV[2], 'expires_at',
  string.format('%.0f', t + tonumber(ARGV[3])))
return {nonce, 'held', redis.call('HGET', KEYS[1], 'epoch')}`;

// KEYS[1] the lease; ARGV node, epoch, ttl. Only the live holding of that node and epoch, and never
// earlier than it was (see SqlIssuerLeases: a renewal that lands last may grant less).
const RENEW = `
local t = now_ms()
local node, epoch = redis.call('HGET', KEYS[1], 'node'), redis.call('HGET', KEYS[1], 'epoch')
if node ~= ARGV[1] or epoch ~= ARGV[2] or expires() <= t then
  return {nonce, 0}
end
local ends = math.max(expires(), t + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'expires_at', string.format('%.0f', ends))
return {nonce, 1}`;

// KEYS[1] the lease; ARGV node, epoch. Ends it at once; the epoch stays for the next claim.
const RELEASE = `
local node, epoch = redis.call('HGET', KEYS[1], 'node'), redis.call('HGET', KEYS[1], 'epoch')
if node == ARGV[1] and epoch == ARGV[2] then
  redis.call('HSET', KEYS[1], 'expires_at', '0')
end
return {nonce, 1}`;

// KEYS[1] the lease: the live holder, or nothing.
const CURRENT = `
local t = now_ms()
if expires() <= t then return {nonce, 'none'} end
return {nonce, 'live', redis.call('HGET', KEYS[1], 'node') or '',
  redis.call('HGET', KEYS[1], 'address') or '', redis.call('HGET', KEYS[1], 'epoch') or '0',
  string.format('%.0f', expires() - t)}`;

/**
 * Issuer leases as Redis hashes beside the tags' (`<prefix>:issuer:<tag>`), each operation one
 * Lua script timed by the server's `TIME`: the claim's read and write are one atomic step, so the
 * `before-claim` hook runs before the whole script. See SqlIssuerLeases for the protocol.
 */
export class RedisIssuerLeases implements IssuerLeases {
  readonly #table: string;
  readonly #run: RedisRun;
  readonly #interleave: IssuerInterleave | undefined;
  readonly #verifyHistory: () => Promise<void>;
  readonly #scripts: Readonly<Record<'claim' | 'renew' | 'release' | 'current', string>>;

  constructor(options: RedisIssuerLeasesOptions) {
    this.#table = options.table;
    this.#run = options.run;
    this.#interleave = options.interleave;
    this.#verifyHistory = options.verifyHistory;
    const head = `${options.prelude}${clock}`;
    this.#scripts = {
      claim: head + CLAIM,
      renew: head + RENEW,
      release: head + RELEASE,
      current: head + CURRENT,
    };
  }

  async claimIssuer(
    tag: string,
    node: string,
    address: string,
    ttlMs: number,
  ): Promise<{ readonly held: true; readonly lease: IssuerLease } | IssuerBusy> {
    checkClaim(tag, node, address, ttlMs);
    // A server on a new history is fenced first, so that the claim sees the change.
    await this.#verifyHistory();
    await this.#interleave?.({ point: 'before-claim', backend: 'redis', tag, node });
    const reply = await this.#run(
      'claimIssuer',
      this.#scripts.claim,
      [this.#key(tag), `${this.#table}:tag:${tag}`, `${this.#table}:history`],
      [node, address, String(ttlMs)],
    );
    if (reply[0] === 'not_found') throw issuerTagNotFound(tag);
    if (reply[0] === 'settling')
      throw new IdMintError(
        'STORE_UNAVAILABLE',
        `redis store: no claim of tag "${tag}" for ${ttlMs} ms after its database moved to a ` +
          "new history (a failover or a restore may have lost the last holder's lease)",
        { details: { backend: 'redis', tag, ttlMs } },
      );
    if (reply[0] === 'held') {
      const epoch = toBigInt(reply[1], 'epoch');
      return { held: true, lease: { tag, node, address, epoch, ttlMs } };
    }
    if (reply[0] === 'busy')
      return issuerBusy(reply[1], reply[2], toBigInt(reply[3], 'epoch'), reply[4]);
    throw unexpected('claimIssuer', reply);
  }

  async renewIssuer(tag: string, node: string, epoch: bigint, ttlMs: number): Promise<void> {
    checkHolding(tag, node, epoch, ttlMs);
    await this.#interleave?.({ point: 'before-renew-write', backend: 'redis', tag, node });
    const reply = await this.#run(
      'renewIssuer',
      this.#scripts.renew,
      [this.#key(tag)],
      [node, epoch.toString(), String(ttlMs)],
    );
    if (Number(reply[0]) !== 1) throw issuerLeaseLost('redis', tag, epoch);
  }

  async releaseIssuer(tag: string, node: string, epoch: bigint): Promise<void> {
    checkHolding(tag, node, epoch);
    await this.#run(
      'releaseIssuer',
      this.#scripts.release,
      [this.#key(tag)],
      [node, epoch.toString()],
    );
  }

  async currentIssuer(tag: string): Promise<IssuerBusy | undefined> {
    checkTag(tag);
    const reply = await this.#run('currentIssuer', this.#scripts.current, [this.#key(tag)], []);
    if (reply[0] !== 'live') return undefined;
    return issuerBusy(reply[1], reply[2], toBigInt(reply[3], 'epoch'), reply[4]);
  }

  #key(tag: string): string {
    return `${this.#table}:issuer:${tag}`;
  }
}

function unexpected(operation: string, reply: unknown[]): IdMintError {
  return new IdMintError(
    'STORE_UNAVAILABLE',
    `redis store: ${operation} got an unexpected reply ${JSON.stringify(reply[0])}`,
    { details: { backend: 'redis', operation } },
  );
}
