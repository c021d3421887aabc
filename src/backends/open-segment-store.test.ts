import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { modulesLoadedBy, packagesIn } from '../../test/support/modules-loaded.ts';
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
    assert.deepEqual(
      (await store.listTags()).map((r) => r.tag),
      ['orders'],
    );
    await store.close();
  });

  it('maps each URL scheme to its adapter without connecting', async () => {
    for (const [url, backend] of [
      ['postgres://nobody@127.0.0.1:1/db', 'postgres'],
      ['postgresql://nobody@127.0.0.1:1/db', 'postgres'],
      ['mysql://nobody@127.0.0.1:1/db', 'mysql'],
      ['mariadb://nobody@127.0.0.1:1/db', 'mysql'],
      ['redis://127.0.0.1:1/0', 'redis'],
      ['rediss://127.0.0.1:1/15', 'redis'],
    ] as const) {
      const store = await openSegmentStore(url, { timeoutMs: 200 });
      assert.equal(store.backend, backend, url);
      await assert.rejects(
        store.listTags(),
        (error) => isIdMintError(error, 'STORE_UNAVAILABLE'),
        url,
      );
      await store.close();
    }
  });

  it('refuses anything else (CONFIG_INVALID) naming setting, value and forms', async () => {
    for (const url of [
      'mongodb://u:secret@h/db',
      'sqlite:',
      'sqlite://',
      'http://h',
      'idmint.db',
      '',
      'postgres://u:secret@h',
    ]) {
      await assert.rejects(
        openSegmentStore(url, { source: 'IDMINT_SEGMENT_STORE' }),
        (error: unknown) => {
          assert.ok(isIdMintError(error, 'CONFIG_INVALID'), url);
          assert.match(
            error.message,
            new RegExp(
              '^IDMINT_SEGMENT_STORE ".*": .*; accepted forms: sqlite:\\./data/idmint\\.db ' +
                '.*sqlite::memory:, postgres://.*mysql://.*mariadb://.*redis://.*rediss://',
            ),
          );
          assert.doesNotMatch(error.message, /secret/);
          return true;
        },
      );
    }
    await assert.rejects(
      openSegmentStore('sqlite::memory:', { table: 'no way' }),
      /table must be an identifier/,
    );
  });

  it('a Redis database out of 0..15 is refused before connecting', async () => {
    for (const [url, got] of [
      ['redis://127.0.0.1:1/99', '99'],
      ['redis://127.0.0.1:1/abc', 'abc'],
      ['redis://127.0.0.1:1/16', '16'],
    ]) {
      await assert.rejects(openSegmentStore(url ?? ''), (error: unknown) => {
        assert.ok(isIdMintError(error, 'CONFIG_INVALID'));
        assert.match(
          error.message,
          new RegExp(`the Redis database must be a number from 0 to 15, got "${got}"`),
        );
        return true;
      });
    }
  });

  it('names setting and reason when a SQLite file cannot be opened', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-open-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'plain-file'), '');
    mkdirSync(join(dir, 'a-directory.db'));
    const cases: [string, RegExp][] = [
      [join(dir, 'plain-file', 'ids.db'), /plain-file is not a directory/],
      [join(dir, 'a-directory.db'), /it is a directory/],
    ];
    for (const [path, reason] of cases) {
      await assert.rejects(
        openSegmentStore(`sqlite:${path}`, { source: 'IDMINT_SEGMENT_STORE' }),
        (error: unknown) => {
          assert.ok(isIdMintError(error, 'STORE_UNAVAILABLE'), String(error));
          assert.ok(
            error.message.startsWith(`cannot open SQLite file ${path} (IDMINT_SEGMENT_STORE): `),
            error.message,
          );
          assert.match(error.message, reason);
          return true;
        },
      );
    }
  });

  it('never loads pg, mysql2 or ioredis for SQLite, nor when the package is imported', () => {
    const root = new URL('../../', import.meta.url);
    const { urls } = modulesLoadedBy(`
      await import(${JSON.stringify(new URL('src/index.ts', root).href)});
      const { openSegmentStore } = await import(${JSON.stringify(
        new URL('src/backends/open-segment-store.ts', root).href,
      )});
      const store = await openSegmentStore('sqlite::memory:');
      await store.close();
    `);
    assert.ok(
      urls.some((url) => url.endsWith('/src/backends/open-segment-store.ts')),
      'the hooks saw the modules loaded',
    );
    assert.deepEqual(packagesIn(urls, ['pg', 'mysql2', 'ioredis']), []);
  });
});
