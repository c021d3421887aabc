import { connectEtcdWorkerRegistry } from '../../src/registries/etcd/etcd-worker-registry.ts';
import { deleteEtcdNamespace, viaProxy } from '../support/registry-admin.ts';
import { SERVICES, hostPort } from '../support/services.ts';
import { runWorkerRegistrySuite } from '../support/worker-registry-suite.ts';

const url = SERVICES.etcd.url;

await runWorkerRegistrySuite({
  backend: 'etcd',
  services: ['etcd'],
  ttlMs: 3000,
  target: hostPort(url),
  open: (name, proxy) => connectEtcdWorkerRegistry(viaProxy(url, proxy).replace(/\/$/, ''), { name, ttlMs: 3000, operationTimeoutMs: 1500 }),
  cleanup: (name) => deleteEtcdNamespace(url, name),
});
