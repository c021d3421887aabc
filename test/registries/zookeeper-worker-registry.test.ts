import { deleteZooKeeperNamespace } from '../support/registry-admin.ts';
import { SERVICES, hostPort } from '../support/services.ts';
import { runWorkerProcessScenarios } from '../support/worker-process-scenarios.ts';
import { runWorkerRegistrySuite, type RegistryHarness } from '../support/worker-registry-suite.ts';

const address = SERVICES.zookeeper.url;
const harness: RegistryHarness = {
  backend: 'zookeeper',
  services: ['zookeeper'],
  // The server's smallest session timeout is 2 ticks: 4 s with tickTime=2000.
  ttlMs: 4000,
  target: hostPort(address),
  url: (name, proxy) => `zookeeper://${proxy?.address ?? address}/${name}`,
  options: () => ({ ttlMs: 4000, operationTimeoutMs: 1500, recycleAfterMs: 1000 }),
  cleanup: (name) => deleteZooKeeperNamespace(address, name),
};

await runWorkerRegistrySuite(harness);
await runWorkerProcessScenarios(harness);
