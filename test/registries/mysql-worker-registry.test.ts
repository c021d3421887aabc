import { connectSqlWorkerRegistry } from '../../src/registries/sql/sql-worker-registry.ts';
import { dropSqlTable, viaProxy } from '../support/registry-admin.ts';
import { SERVICES, hostPort, uniqueName } from '../support/services.ts';
import { runWorkerRegistrySuite } from '../support/worker-registry-suite.ts';

const url = SERVICES.mysql.url;
const table = uniqueName('worker_node');

await runWorkerRegistrySuite({
  backend: 'mysql',
  services: ['mysql'],
  ttlMs: 3000,
  target: hostPort(url),
  open: (name, proxy) => connectSqlWorkerRegistry(viaProxy(url, proxy), { name, table, ttlMs: 3000, operationTimeoutMs: 1500 }),
  // Every test has its own name in the table; the table goes at the end.
  cleanup: async () => {},
  teardown: () => dropSqlTable(url, table),
});
