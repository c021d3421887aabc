import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildUrl, isRefusal, redactUrl, splitUrl, urlScheme } from './connection-url.ts';

// Backend URL forms are tested with the catalog (src/backends/catalog.test.ts); this is the
// generic tokenizer every backend reads its URL with.
describe('connection URL tokenizing', () => {
  it('splits a URL into scheme, credentials, hosts, path and query', () => {
    assert.equal(urlScheme('PostgreSQL://h/db'), 'postgresql');
    assert.equal(urlScheme('no scheme'), undefined);
    assert.deepEqual(splitUrl('x://u:p@ss@h1:1,[::1]/a%20b?k=v', { pathNames: 'name' }), {
      scheme: 'x',
      hasUserinfo: true,
      user: 'u',
      password: 'p@ss',
      hosts: [{ host: 'h1', port: 1 }, { host: '::1' }],
      path: '/a%20b',
      query: 'k=v',
    });
  });

  it('refuses a bad port without listing forms, and a bad form with them', () => {
    const port = splitUrl('x://h:70000/db');
    assert.ok(isRefusal(port) && !port.showForms && /ports are 1 to 65535/.test(port.refused));
    const form = splitUrl('x:/h/db');
    assert.ok(isRefusal(form) && form.showForms && /must start with x:\/\//.test(form.refused));
  });

  it('rebuilds a URL with every part encoded, and redacts passwords', () => {
    const built = buildUrl({
      scheme: 'postgresql',
      user: 'me',
      password: 'a@b/c',
      host: { host: 'db', port: 5432 },
      path: 'ids',
      query: '',
    });
    assert.equal(built, 'postgresql://me:a%40b%2Fc@db:5432/ids');
    assert.equal(redactUrl('x://me:a@b/c@db:5432/ids'), 'x://me:***@db:5432/ids');
  });
});
