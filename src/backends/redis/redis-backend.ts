// Redis: segment store and worker registry, through `ioredis`. The URL is read here, never by
// ioredis, which would run on database 0 when the one named cannot be selected.

import { hostText, isRefusal, refuse, splitUrl } from '../../shared/connection-url.ts';
import type { BackendDescriptor } from '../descriptor.ts';

/**
 * Redis databases idmint accepts: 0 to 15, Redis's default `databases 16` (and what managed
 * Redis services offer). A server configured with more databases is used through 0 to 15 all the
 * same: idmint keeps its keys apart by prefix (segment.table, snowflake.cluster), which also works
 * on Redis Cluster, where only database 0 exists.
 */
export const REDIS_MAX_DATABASE = 15;

/** What a `redis://` or `rediss://` URL names: the options ioredis gets. */
export interface RedisOptions {
  readonly host: string;
  readonly port: number;
  readonly username?: string;
  readonly password?: string;
  readonly db: number;
  /** Present for `rediss://`: connect over TLS. */
  readonly tls?: Record<string, never>;
}

/** Redis (`redis://`, `rediss://` for TLS). */
export const redisBackend: BackendDescriptor<RedisOptions> = {
  kind: 'redis',
  schemes: ['redis', 'rediss'],
  forms: {
    'segment-store': [
      `redis://:password@host:6379/0 (database 0 to ${REDIS_MAX_DATABASE}; rediss:// for TLS)`,
    ],
    'worker-registry': [
      `redis://:password@host:6379/<database 0 to ${REDIS_MAX_DATABASE}> (rediss:// for TLS)`,
    ],
  },
  parse(url) {
    const parts = splitUrl(url);
    if (isRefusal(parts)) return parts;
    const { scheme, hosts, user, password, path, query } = parts;
    const host = hosts[0];
    if (hosts.length !== 1 || host === undefined)
      return refuse(`names ${hosts.length} hosts; ${scheme}:// takes one`);
    if (query !== '') return refuse(`${scheme}:// takes no ?options`);
    const db = path === '' || path === '/' ? '0' : path.slice(1);
    if (!/^[0-9]{1,3}$/.test(db) || Number(db) > REDIS_MAX_DATABASE) {
      return {
        refused:
          `the Redis database must be a number from 0 to ${REDIS_MAX_DATABASE}, got "${db}" ` +
          "(separate idmint's keys from other data by prefix, not by database)",
        showForms: false,
      };
    }
    return {
      host: host.host,
      port: host.port ?? 6379,
      ...(user === undefined ? {} : { username: user }),
      ...(password === undefined ? {} : { password }),
      db: Number(db),
      ...(scheme === 'rediss' ? { tls: {} } : {}),
    };
  },
  target: (options) => hostText(options),
  hosts: (options) => [options],
  async openStore(options, settings) {
    const { RedisSegmentStore } = await import('../../stores/redis/redis-segment-store.ts');
    return RedisSegmentStore.connect(options, settings);
  },
  async openRegistry(options, settings) {
    const { connectRedisWorkerRegistry } = await import(
      '../../registries/redis/redis-worker-registry.ts'
    );
    return connectRedisWorkerRegistry(options, {
      ttlMs: settings.ttlMs,
      maxLeadMs: settings.maxLeadMs,
      operationTimeoutMs: settings.operationTimeoutMs,
      interleave: settings.interleave,
      name: settings.name,
    });
  },
  cacheCluster: (_options, settings) => settings.name ?? 'idmint',
};
