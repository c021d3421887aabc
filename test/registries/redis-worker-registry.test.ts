import { connectRedisWorkerRegistry } from '../../src/registries/redis/redis-worker-registry.ts';
import { deleteRedisNamespace, viaProxy } from '../support/registry-admin.ts';
import { SERVICES, hostPort } from '../support/services.ts';
import { runWorkerRegistrySuite } from '../support/worker-registry-suite.ts';

const url = SERVICES.redis.url;

await runWorkerRegistrySuite({
  backend: 'redis',
  services: ['redis'],
  ttlMs: 3000,
  target: hostPort(url),
  open: (name, proxy) => connectRedisWorkerRegistry(viaProxy(url, proxy), { name, ttlMs: 3000, operationTimeoutMs: 1500 }),
  cleanup: (name) => deleteRedisNamespace(url, name),
});
