import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { modulesLoadedBy, packagesIn } from '../../test/support/modules-loaded.ts';
import { fileURLToPath } from 'node:url';
import { isIdMintError } from '../core/errors.ts';
import { DEFAULT_SEGMENT_STORE_URL, openSegmentStore } from './open-segment-store.ts';

describe('openSegmentStore', () => {
  it('opens a SQLite file, creating its directory and the table', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-open-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const store = await openSegmentStore(`sqlite:${join(dir, 'nested', 'deeper', 'ids.db')}`);
    t.after(() => store.close());
    assert.equal(store.backend, 'sqlite');
    assert.ok(existsSync(join(dir, 'nested', 'deeper', 'ids.db')));
    await store.createTag({ tag: 'orders', step: 10 });
    assert.equal((await store.allocate('orders')).start, 1n);
    assert.equal(DEFAULT_SEGMENT_STORE_URL, 'sqlite:./data/idmint.db');
  });

  it('opens sqlite::memory:, with a table name of its own choosing', async () => {
    const store = await openSegmentStore('sqlite::memory:', { table: 'my_ids' });
    await store.createTag({ tag: 'orders', step: 10 });
    assert.deepEqual((await store.listTags()).map((r) => r.tag), ['orders']);
    await store.close();
  });

  it('maps postgres://, postgresql:// and mysql:// to their adapters without connecting', async () => {
    for (const [url, backend] of [
      ['postgres://nobody@127.0.0.1:1/db', 'postgres'],
      ['postgresql://nobody@127.0.0.1:1/db', 'postgres'],
      ['mysql://nobody@127.0.0.1:1/db', 'mysql'],
    ] as const) {
      const store = await openSegmentStore(url, { timeoutMs: 200 });
      assert.equal(store.backend, backend, url);
      await assert.rejects(store.listTags(), (error) => isIdMintError(error, 'STORE_UNAVAILABLE'), url);
      await store.close();
    }
  });

  it('refuses anything else with CONFIG_INVALID naming the value and the allowed forms, password hidden', async () => {
    for (const url of ['mongodb://u:secret@h/db', 'sqlite:', 'sqlite://', 'http://h', 'idmint.db', '', 'rediss://h']) {
      await assert.rejects(openSegmentStore(url, { source: 'IDMINT_SEGMENT_STORE' }), (error: unknown) => {
        assert.ok(isIdMintError(error, 'CONFIG_INVALID'), url);
        assert.match(error.message, /^IDMINT_SEGMENT_STORE ".*" is not a supported store; use one of: sqlite:\.\/data\/idmint\.db .*sqlite::memory:, postgres:\/\/.*mysql:\/\/.*redis:\/\//);
        assert.doesNotMatch(error.message, /secret/);
        return true;
      });
    }
    await assert.rejects(openSegmentStore('sqlite::memory:', { table: 'no way' }), /table must be an identifier/);
  });

  it('never loads pg, mysql2 or ioredis for SQLite, nor when the package is imported', () => {
    const root = new URL('../../', import.meta.url);
    const { urls } = modulesLoadedBy(`
      await import(${JSON.stringify(new URL('src/index.ts', root).href)});
      const { openSegmentStore } = await import(${JSON.stringify(new URL('src/stores/open-segment-store.ts', root).href)});
      const store = await openSegmentStore('sqlite::memory:');
      await store.close();
    `);
    assert.ok(urls.some((url) => url.endsWith('/src/stores/open-segment-store.ts')), 'the hooks saw the modules loaded');
    assert.deepEqual(packagesIn(urls, ['pg', 'mysql2', 'ioredis']), []);
  });
});
