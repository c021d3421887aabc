import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openWorkerRegistry } from '../../src/backends/open-worker-registry.ts';
import { deleteEtcdNamespace, etcdRecord } from '../support/registry-admin.ts';
import { SERVICES, hostPort } from '../support/services.ts';
import { runWorkerProcessScenarios } from '../support/worker-process-scenarios.ts';
import {
  runInterleavingSuite,
  runWorkerRegistrySuite,
  type RegistryHarness,
} from '../support/worker-registry-suite.ts';

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

describe('etcd worker registry: nodes starting together', () => {
  it('20 nodes acquiring at once hold 20 distinct IDs after few claims', {
    timeout: 60_000,
  }, async () => {
    const name = `race-${process.pid}-${Date.now()}`;
    let claims = 0;
    const registries = await Promise.all(
      Array.from({ length: 20 }, () =>
        openWorkerRegistry(harness.url(name), {
          ...harness.options(name),
          interleave: (step) => {
            if (step.point === 'before-claim') claims++;
          },
        }),
      ),
    );
    try {
      const leases = await Promise.all(
        registries.map((registry, i) =>
          registry.acquire({ identity: { host: `10.0.0.${i}`, port: 8080 }, maxWorkers: 1024 }),
        ),
      );
      assert.equal(new Set(leases.map((lease) => lease.workerId)).size, 20, 'distinct IDs');
      // Each claim lost is a transaction etcd writes to its log; in order, the n-th node lost n -
      // 1.
      assert.ok(claims < 100, `${claims} claims for 20 IDs`);
      await Promise.all(leases.map((lease) => lease.release({ lastTimestamp: 1, reportedAt: 1 })));
    } finally {
      await Promise.all(registries.map((registry) => registry.close()));
      await harness.cleanup(name);
    }
  });
});
