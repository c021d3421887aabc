import { join } from 'node:path';
import { runWorkerProcessScenarios } from '../support/worker-process-scenarios.ts';
import { sqlRecord } from '../support/registry-admin.ts';
import {
  runInterleavingSuite,
  runWorkerRegistrySuite,
  type RegistryHarness,
} from '../support/worker-registry-suite.ts';
import { tempDir } from '../support/workers.ts';

// Embedded: no server to cut off, so the suite injects coordinator faults at the port instead.
const dir = await tempDir('sqlite-registry');
const file = join(dir.path, 'workers.db');
const harness: RegistryHarness = {
  backend: 'sqlite',
  services: [],
  ttlMs: 3000,
  url: () => `sqlite:${file}`,
  options: (name) => ({ name, ttlMs: 3000 }),
  cleanup: async () => {},
  record: (name, workerId) => sqlRecord(`sqlite:${file}`, 'worker_node', name, workerId),
};

await runWorkerRegistrySuite(harness);
await runInterleavingSuite(harness);
await runWorkerProcessScenarios(harness);
await dir.dispose();
