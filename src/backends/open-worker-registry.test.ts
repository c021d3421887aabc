import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { modulesLoadedBy, packagesIn } from '../../test/support/modules-loaded.ts';
import { fileURLToPath } from 'node:url';
import { isIdMintError } from '../core/errors.ts';
import { WORKER_REGISTRY_FORMS, openWorkerRegistry } from './open-worker-registry.ts';
import { StaticWorkerRegistry } from '../registries/static/static-worker-registry.ts';

describe('openWorkerRegistry', () => {
  it('opens static:<id> with its state file under the state directory', async () => {
    const registry = await openWorkerRegistry('static:7', { stateDir: '/tmp/idmint-state' });
    assert.ok(registry instanceof StaticWorkerRegistry);
    assert.equal(registry.workerId, 7);
    assert.equal(registry.stateFile, '/tmp/idmint-state/idmint-worker-7.json');
    assert.equal((await openWorkerRegistry('static:0')).backend, 'static');
    assert.equal(
      ((await openWorkerRegistry('static:0')) as StaticWorkerRegistry).stateFile,
      'data/idmint-worker-0.json',
    );
  });

  it('gives static:<id> its host lock under the lock directory, per cluster', async () => {
    const open = async (url: string, options = {}) =>
      (await openWorkerRegistry(url, options)) as StaticWorkerRegistry;
    const named = await open('static:7', { lockDir: '/var/lib/locks', name: 'orders' });
    assert.equal(named.hostLock, '/var/lib/locks/orders/worker-7');
    assert.equal((await open('static:0')).hostLock, '/tmp/idmint/idmint/worker-0');
    await assert.rejects(open('static:0', { name: 'a/b' }), (error) =>
      isIdMintError(error, 'INVALID_ARGUMENT'),
    );
  });

  for (const value of [
    '',
    'static:',
    'static:-1',
    'static:x',
    'zookeeper://host:2181',
    'zookeeper://host:2181/a/b',
    'etcd://h:2379',
    'etcd:// /x',
    'http://h/x',
    'sqlite:',
    'mongodb://h/x',
    'postgres://h:5432',
  ]) {
    it(`rejects ${JSON.stringify(value)} naming the value and every allowed form`, async () => {
      await assert.rejects(
        openWorkerRegistry(value, { key: 'IDMINT_WORKER_REGISTRY' }),
        (error) => {
          assert.ok(isIdMintError(error, 'CONFIG_INVALID'));
          assert.ok(error.message.startsWith(`IDMINT_WORKER_REGISTRY "${value}": `), error.message);
          for (const form of WORKER_REGISTRY_FORMS)
            assert.ok(error.message.includes(form), `${form} missing`);
          return true;
        },
      );
    });
  }

  it('never echoes a password', async () => {
    await assert.rejects(openWorkerRegistry('postgres://user:s3cret@host:5432'), (error) => {
      assert.ok(isIdMintError(error, 'CONFIG_INVALID'));
      assert.ok(!error.message.includes('s3cret') && error.message.includes('user:***@'));
      return true;
    });
  });

  it('loads no driver for the static registry, only its own for another', () => {
    // In a fresh process: which packages does opening each URL load?
    const dir = mkdtempSync(join(tmpdir(), 'idmint-lazy-'));
    const factory = fileURLToPath(new URL('./open-worker-registry.ts', import.meta.url));
    const probe = (url: string) => {
      const { urls } = modulesLoadedBy(
        `const { openWorkerRegistry } = await import(${JSON.stringify(factory)});
         const options = { stateDir: ${JSON.stringify(dir)}, lockDir: ${JSON.stringify(dir)} };
         const registry = await openWorkerRegistry(${JSON.stringify(url)}, options);
         if (registry.backend === 'static') {
           const identity = { host: 'h', port: 1 };
           const lease = await registry.acquire({ identity, maxWorkers: 1024 });
           await lease.release({ lastTimestamp: 1, reportedAt: 1 });
         }
         await registry.close();`,
      );
      return packagesIn(urls, [
        'etcd3',
        'node-zookeeper-client',
        'ioredis',
        'pg',
        'mysql2',
        'node:sqlite',
      ]);
    };
    try {
      // The static registry's lease is an OS lock taken through node:sqlite, built into Node.
      assert.deepEqual(probe('static:3'), ['node:sqlite']);
      assert.deepEqual(probe(`sqlite:${join(dir, 'w.db')}`), ['node:sqlite']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
