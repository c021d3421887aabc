import { join } from 'node:path';
import { connectSqlWorkerRegistry } from '../../src/registries/sql/sql-worker-registry.ts';
import { tempDir } from '../support/workers.ts';
import { runWorkerRegistrySuite } from '../support/worker-registry-suite.ts';

// Embedded: no service to cut off, so the suite injects coordinator faults at the port instead.
const dir = await tempDir('sqlite-registry');
const file = join(dir.path, 'workers.db');

await runWorkerRegistrySuite({
  backend: 'sqlite',
  services: [],
  ttlMs: 3000,
  open: (name) => connectSqlWorkerRegistry(`sqlite:${file}`, { name, ttlMs: 3000 }),
  cleanup: async () => {},
  teardown: () => dir.dispose(),
});
