import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isIdMintError } from '../../src/core/errors.ts';
import { StaticWorkerRegistry } from '../../src/registries/static/static-worker-registry.ts';
import { runWorkerProcessScenarios } from '../support/worker-process-scenarios.ts';
import { tempDir } from '../support/workers.ts';

const dir = await tempDir('static-registry');
const identity = { host: '10.0.0.1', port: 8080 };

describe('static worker registry', () => {
  it('hands out the configured ID, and keeps every report in its state file across restarts', async () => {
    const stateDir = join(dir.path, 'a');
    const registry = new StaticWorkerRegistry({ workerId: 7, stateDir });
    const lease = await registry.acquire({ identity, maxWorkers: 1024 });
    assert.deepEqual([lease.workerId, lease.lastTimestamp, lease.reportedAt, lease.ttlMs], [7, -1, -1, 3000]);
    assert.equal(await lease.renew({ lastTimestamp: 5000, reportedAt: 2000 }), 3000);
    assert.deepEqual(JSON.parse(await readFile(registry.stateFile, 'utf8')), { workerId: 7, lastTimestamp: 5000, reportedAt: 2000 });
    await lease.release({ lastTimestamp: 2500, reportedAt: 2600 });
    const restarted = await new StaticWorkerRegistry({ workerId: 7, stateDir }).acquire({ identity, maxWorkers: 1024 });
    assert.deepEqual([restarted.lastTimestamp, restarted.reportedAt], [2500, 2600]);
    assert.deepEqual(await registry.peers(), []);
  });

  it('refuses to start over from nothing when the state file is damaged', async () => {
    const stateDir = join(dir.path, 'b');
    const registry = new StaticWorkerRegistry({ workerId: 1, stateDir });
    await mkdir(stateDir, { recursive: true });
    await writeFile(registry.stateFile, '{"workerId":1,"lastTim'); // torn by hand: the registry writes atomically
    await assert.rejects(registry.acquire({ identity, maxWorkers: 2 }), (error) => {
      assert.ok(isIdMintError(error, 'REGISTRY_UNAVAILABLE'));
      assert.ok(error.message.includes(registry.stateFile));
      return true;
    });
    await writeFile(registry.stateFile, '{"workerId":2,"lastTimestamp":1,"reportedAt":1}');
    await assert.rejects(registry.acquire({ identity, maxWorkers: 4 }), (error) => isIdMintError(error, 'REGISTRY_UNAVAILABLE'), 'a file of another worker ID');
  });

  it('rejects an ID the layout cannot hold, and honours what switch-worker asks for', async () => {
    const registry = new StaticWorkerRegistry({ workerId: 64, stateDir: join(dir.path, 'c') });
    await assert.rejects(registry.acquire({ identity, maxWorkers: 64 }), (error) => isIdMintError(error, 'CONFIG_INVALID') && /0 to 63/.test(error.message));
    await assert.rejects(registry.acquire({ identity, maxWorkers: 1024, exclude: [64] }), (error) => isIdMintError(error, 'WORKER_IDS_EXHAUSTED'));
    const lease = await registry.acquire({ identity, maxWorkers: 1024 });
    await lease.release({ lastTimestamp: 10_000, reportedAt: 10_000 });
    await assert.rejects(registry.acquire({ identity, maxWorkers: 1024, lastTimestampBelow: 9000 }), (error) => isIdMintError(error, 'WORKER_IDS_EXHAUSTED'));
  });
});

// A killed static node restarts at once, but waits out the horizon it had reserved; a node
// restarted with its clock set back is refused.
await runWorkerProcessScenarios(
  {
    backend: 'static',
    services: [],
    ttlMs: 3000,
    url: () => 'static:0',
    options: (name) => ({ stateDir: join(dir.path, name) }),
    cleanup: async () => {},
  },
  { configured: true },
);
await dir.dispose();
