import assert from 'node:assert/strict';
import { it } from 'node:test';
import { redactUrl, sqlitePathOf } from './connection-url.ts';

it('redactUrl hides a password and leaves the rest', () => {
  assert.equal(redactUrl('postgres://idmint:s3cret@db:5432/ids'), 'postgres://idmint:***@db:5432/ids');
  assert.equal(redactUrl('redis://:pw@cache:6379/0'), 'redis://:***@cache:6379/0');
  assert.equal(redactUrl('mysql://root@db/test'), 'mysql://root@db/test');
  assert.equal(redactUrl('sqlite:./data/idmint.db'), 'sqlite:./data/idmint.db');
});

it('sqlitePathOf reads every spelling of a sqlite: URL the same way, and refuses the rest', () => {
  assert.equal(sqlitePathOf('sqlite:./data/idmint.db'), './data/idmint.db');
  assert.equal(sqlitePathOf('sqlite:/var/lib/idmint.db'), '/var/lib/idmint.db');
  assert.equal(sqlitePathOf('sqlite:///var/lib/idmint.db'), '/var/lib/idmint.db');
  assert.equal(sqlitePathOf('sqlite://idmint.db'), 'idmint.db');
  assert.equal(sqlitePathOf('sqlite::memory:'), ':memory:');
  for (const url of ['sqlite:', 'sqlite://', 'postgres://h/db', 'idmint.db']) assert.equal(sqlitePathOf(url), undefined, url);
});
