import { deleteRedisNamespace, viaProxy } from '../support/registry-admin.ts';
import { SERVICES, hostPort } from '../support/services.ts';
import { runWorkerProcessScenarios } from '../support/worker-process-scenarios.ts';
import { runWorkerRegistrySuite, type RegistryHarness } from '../support/worker-registry-suite.ts';

const url = SERVICES.redis.url;
const harness: RegistryHarness = {
  backend: 'redis',
  services: ['redis'],
  ttlMs: 3000,
  target: hostPort(url),
  url: (_name, proxy) => viaProxy(url, proxy),
  options: (name) => ({ name, ttlMs: 3000, operationTimeoutMs: 1500 }),
  cleanup: (name) => deleteRedisNamespace(url, name),
};

await runWorkerRegistrySuite(harness);
await runWorkerProcessScenarios(harness);
