import { deleteEtcdNamespace, etcdRecord } from '../support/registry-admin.ts';
import { SERVICES, hostPort } from '../support/services.ts';
import { runWorkerProcessScenarios } from '../support/worker-process-scenarios.ts';
import { runInterleavingSuite, runWorkerRegistrySuite, type RegistryHarness } from '../support/worker-registry-suite.ts';

const url = SERVICES.etcd.url;
const { host, port } = hostPort(url);
const harness: RegistryHarness = {
  backend: 'etcd',
  services: ['etcd'],
  ttlMs: 3000,
  target: { host, port },
  url: (name, proxy) => `etcd://${proxy?.address ?? `${host}:${port}`}/${name}`,
  options: () => ({ ttlMs: 3000, operationTimeoutMs: 1500 }),
  cleanup: (name) => deleteEtcdNamespace(url, name),
  record: (name, workerId) => etcdRecord(url, name, workerId),
};

await runWorkerRegistrySuite(harness);
await runInterleavingSuite(harness);
await runWorkerProcessScenarios(harness);
