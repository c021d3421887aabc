import { connectZooKeeperWorkerRegistry } from '../../src/registries/zookeeper/zookeeper-worker-registry.ts';
import { deleteZooKeeperNamespace } from '../support/registry-admin.ts';
import { SERVICES, hostPort } from '../support/services.ts';
import { runWorkerRegistrySuite } from '../support/worker-registry-suite.ts';

const address = SERVICES.zookeeper.url;

await runWorkerRegistrySuite({
  backend: 'zookeeper',
  services: ['zookeeper'],
  // The server's smallest session timeout is 2 ticks: 4 s with tickTime=2000.
  ttlMs: 4000,
  target: hostPort(address),
  open: (name, proxy) => connectZooKeeperWorkerRegistry(proxy?.address ?? address, { name, ttlMs: 4000, operationTimeoutMs: 1500, recycleAfterMs: 1000 }),
  cleanup: (name) => deleteZooKeeperNamespace(address, name),
});
