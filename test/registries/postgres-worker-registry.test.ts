import { sqlServerHarness } from '../support/registry-admin.ts';
import { runWorkerProcessScenarios } from '../support/worker-process-scenarios.ts';
import { runInterleavingSuite, runWorkerRegistrySuite } from '../support/worker-registry-suite.ts';

const { harness, dropTable } = sqlServerHarness('postgres');
await runWorkerRegistrySuite(harness);
await runInterleavingSuite(harness);
await runWorkerProcessScenarios(harness);
await dropTable();
