import assert from 'node:assert/strict';
import { it } from 'node:test';
import { isIdMintError } from '../../src/core/errors.ts';
import { openWorkerRegistry } from '../../src/backends/open-worker-registry.ts';
import {
  deleteZooKeeperNamespace,
  seedZooKeeperRecord,
  zooKeeperRecord,
} from '../support/registry-admin.ts';
import { SERVICES, describeWithServices, hostPort, uniqueName } from '../support/services.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';
import { runWorkerProcessScenarios } from '../support/worker-process-scenarios.ts';
import {
  runInterleavingSuite,
  runWorkerRegistrySuite,
  type RegistryHarness,
} from '../support/worker-registry-suite.ts';

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
  record: (name, workerId) => zooKeeperRecord(address, name, workerId),
  seedRecord: (name, identity, workerId, record) =>
    seedZooKeeperRecord(address, name, `${identity.host}:${identity.port}`, workerId, record),
};

await runWorkerRegistrySuite(harness);
await runInterleavingSuite(harness);
await runWorkerProcessScenarios(harness);

await describeWithServices('zookeeper worker registry, operation timeout', ['zookeeper'], () => {
  it('a claim that gets no answer fails within the operation timeout, as every other call does', {
    timeout: 30_000,
  }, async () => {
    const proxy = await TcpProxy.start(hostPort(address));
    const name = uniqueName('t');
    let hungAt = 0;
    const registry = await openWorkerRegistry(`zookeeper://${proxy.address}/${name}`, {
      ttlMs: 4000,
      operationTimeoutMs: 1000,
      // ZooKeeper stops answering just as the claim is sent.
      interleave: (step) => {
        if (step.point !== 'before-claim' || hungAt !== 0) return;
        hungAt = Date.now();
        proxy.hang();
      },
    });
    try {
      await assert.rejects(
        registry.acquire({ identity: { host: '10.0.0.1', port: 8080 }, maxWorkers: 1 }),
        (error) => {
          assert.ok(isIdMintError(error, 'REGISTRY_UNAVAILABLE'), String(error));
          assert.equal(
            error.message,
            `zookeeper worker registry at ${proxy.address}, acquiring a worker ID: timed out ` +
              'after 1000 ms',
          );
          return true;
        },
      );
      const waited = Date.now() - hungAt;
      assert.ok(
        hungAt > 0 && waited < 2500,
        `the claim was given up ${waited} ms after ZooKeeper stopped answering; the ` +
          `operation timeout is 1000 ms`,
      );
    } finally {
      proxy.cut();
      await registry.close();
      await proxy.close();
      await deleteZooKeeperNamespace(address, name);
    }
  });
});
