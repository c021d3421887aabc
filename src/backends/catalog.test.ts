import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isIdMintError } from '../core/errors.ts';
import { buildUrl, redactUrl } from '../shared/connection-url.ts';
import type { SqlServerAddress } from '../sql/sql-driver.ts';
import {
  BACKENDS,
  SEGMENT_STORE_URL_FORMS,
  WORKER_REGISTRY_URL_FORMS,
  backendOptions,
  backendUrlProblem as connectionUrlProblem,
  parseBackendUrl,
} from './catalog.ts';
import { postgresBackend } from './postgres/postgres-backend.ts';
import { mysqlBackend } from './mysql/mysql-backend.ts';
import { redisBackend } from './redis/redis-backend.ts';
import { sqlitePathOf } from './sqlite/sqlite-backend.ts';

/** The URL a pg or mysql2 pool is given for `url`: every part encoded (see src/sql/). */
function sqlDriverUrl(url: string): string {
  const address: SqlServerAddress = url.startsWith('postgres')
    ? backendOptions(postgresBackend, url)
    : backendOptions(mysqlBackend, url);
  const scheme = url.startsWith('postgres') ? 'postgresql' : 'mysql';
  return buildUrl({ ...address, scheme, path: address.database });
}

const redisConnectOptions = (url: string) => backendOptions(redisBackend, url);

// Passwords as users paste them: percent-encoded, or raw with the characters that end a URL part.
const TRICKY_PASSWORDS = [
  's3cret',
  'p@ss',
  'pa/ss',
  'a@b/c@d',
  'x:y:z',
  'we?rd#1',
  'Xy@1?k=9',
  '50%off',
  '%41%42',
  'p@ss/w0rd@',
  ' sp ace',
  'ünï/cødé@',
];

describe('the backend catalog reads connection URLs', () => {
  it('redactUrl hides a password and leaves the rest', () => {
    assert.equal(
      redactUrl('postgres://idmint:s3cret@db:5432/ids'),
      'postgres://idmint:***@db:5432/ids',
    );
    assert.equal(redactUrl('redis://:pw@cache:6379/0'), 'redis://:***@cache:6379/0');
    assert.equal(redactUrl('mysql://root@db/test'), 'mysql://root@db/test');
    assert.equal(redactUrl('sqlite:./data/idmint.db'), 'sqlite:./data/idmint.db');
    assert.equal(
      redactUrl('postgres://u@db/ids?sslmode=require&password=hunter2'),
      'postgres://u@db/ids?sslmode=require&password=***',
    );
  });

  for (const password of TRICKY_PASSWORDS) {
    for (const encoded of [false, true]) {
      const written = encoded ? encodeURIComponent(password) : password;
      const how = encoded ? 'percent-encoded' : 'raw';
      it(`reads and hides the password ${JSON.stringify(password)} written ${how}`, () => {
        for (const [url, kind] of [
          [`postgres://idmint:${written}@db.internal:5432/ids`, 'postgres'],
          [`mariadb://idmint:${written}@db.internal:3306/ids`, 'mysql'],
          [`rediss://:${written}@cache.internal:6380/3`, 'redis'],
        ] as const) {
          const parsed = parseBackendUrl(
            url,
            kind === 'postgres' || kind === 'mysql' ? 'segment-store' : 'worker-registry',
          );
          assert.equal(parsed.backend.kind, kind, url);
          const options = parsed.options as { password?: string };
          // A raw password that looks percent-encoded reads as the encoding says, as every URL
          // parser does.
          assert.equal(options.password, encoded ? password : decodeURIComponentOr(password), url);
          assert.equal(
            parsed.target,
            kind === 'redis'
              ? 'cache.internal:6380'
              : `db.internal:${kind === 'postgres' ? 5432 : 3306}`,
          );
          const redacted = redactUrl(url);
          assert.ok(
            !redacted.includes(written) && !redacted.includes(password),
            `${redacted} shows the password`,
          );
          assert.match(redacted, /^[a-z]+:\/\/(idmint)?:\*\*\*@(db|cache)\.internal:\d+\/(ids|3)$/);
        }
      });
    }
  }

  it('gives pg, mysql2 and ioredis the same password, encoded as each needs', () => {
    const url = sqlDriverUrl('postgresql://idmint:p@ss/w0rd@db:5432/ids?sslmode=require');
    assert.equal(url, 'postgresql://idmint:p%40ss%2Fw0rd@db:5432/ids?sslmode=require');
    const parsed = new URL(url);
    assert.equal(decodeURIComponent(parsed.password), 'p@ss/w0rd');
    assert.equal(sqlDriverUrl('mariadb://root@127.0.0.1/test'), 'mysql://root@127.0.0.1/test');
    assert.equal(
      sqlDriverUrl('postgres://me@/ids?host=/run/postgresql'),
      'postgresql://me@/ids?host=/run/postgresql',
    );
    assert.deepEqual(redisConnectOptions('rediss://default:p@ss@cache:6380/2'), {
      host: 'cache',
      port: 6380,
      username: 'default',
      password: 'p@ss',
      db: 2,
      tls: {},
    });
    assert.deepEqual(redisConnectOptions('redis://127.0.0.1'), {
      host: '127.0.0.1',
      port: 6379,
      db: 0,
    });
    assert.deepEqual(redisConnectOptions('redis://[::1]:6379/'), {
      host: '::1',
      port: 6379,
      db: 0,
    });
  });

  it('accepts every form the docs list, for the setting it belongs to', () => {
    const store: [string, string][] = [
      ['sqlite:./data/idmint.db', 'sqlite'],
      ['sqlite::memory:', 'sqlite'],
      ['postgres://u@h/ids', 'postgres'],
      ['postgresql://u:p@h:5433/ids?sslmode=verify-full', 'postgres'],
      ['postgres:///ids?host=/run/postgresql', 'postgres'],
      ['mysql://root@db/test', 'mysql'],
      ['mariadb://root@db:3307/test', 'mysql'],
      ['redis://cache:6379/0', 'redis'],
      ['rediss://cache/15', 'redis'],
    ];
    for (const [url, kind] of store)
      assert.equal(parseBackendUrl(url, 'segment-store').backend.kind, kind, url);
    const registry: [string, string][] = [
      ['static:0', 'static'],
      ['zookeeper://zk1:2181,zk2:2181/orders', 'zookeeper'],
      ['etcd://etcd:2379/ids', 'etcd'],
      ['redis://cache:6379/1', 'redis'],
      ['rediss://:pw@cache:6380/1', 'redis'],
      ['postgres://u@h/ids', 'postgres'],
      ['mariadb://u@h/ids', 'mysql'],
      ['sqlite:./data/workers.db', 'sqlite'],
    ];
    for (const [url, kind] of registry)
      assert.equal(parseBackendUrl(url, 'worker-registry').backend.kind, kind, url);
    const zookeeper = parseBackendUrl('zookeeper://zk1:2181,[::1]/orders', 'worker-registry');
    assert.equal(zookeeper.backend.kind, 'zookeeper');
    assert.deepEqual(zookeeper.options, {
      hosts: [{ host: 'zk1', port: 2181 }, { host: '::1' }],
      name: 'orders',
    });
    assert.equal(zookeeper.target, 'zk1:2181,[::1]:2181');
    assert.equal(SEGMENT_STORE_URL_FORMS.length, 5);
    assert.equal(WORKER_REGISTRY_URL_FORMS.length, 7);
  });

  const refused: [string, 'segment-store' | 'worker-registry', RegExp][] = [
    [
      'redis://h:6379/99',
      'segment-store',
      /the Redis database must be a number from 0 to 15, got "99"/,
    ],
    ['redis://h:6379/16', 'worker-registry', /from 0 to 15, got "16"/],
    ['redis://h:6379/abc', 'segment-store', /from 0 to 15, got "abc"/],
    ['redis://h:6379/-1', 'segment-store', /from 0 to 15, got "-1"/],
    ['redis://h:6379/0?db=3', 'segment-store', /takes no \?options/],
    ['redis://a:1,b:2/0', 'segment-store', /takes one/],
    ['redis://h:99999/0', 'segment-store', /bad port "99999": ports are 1 to 65535/],
    ['redis://h:0/0', 'segment-store', /bad port "0"/],
    ['redis://h x/0', 'segment-store', /bad host "h x"/],
    ['postgres://u@h', 'segment-store', /names no database/],
    ['postgres:///ids', 'segment-store', /is not a postgres:\/\/ URL/],
    ['mysql:///ids?host=/run/mysqld', 'segment-store', /is not a mysql:\/\/ URL/],
    ['postgres://u:s3cret@host:5432', 'worker-registry', /names no database/],
    ['mysql://h/a/b', 'segment-store', /names no database/],
    ['postgres:/h/db', 'segment-store', /must start with postgres:\/\//],
    ['mongodb://u:secret@h/db', 'segment-store', /not a segment store URL/],
    ['zookeeper://h:2181/x', 'segment-store', /not a segment store URL/],
    ['static:1', 'segment-store', /not a segment store URL/],
    ['http://h/x', 'worker-registry', /not a worker registry URL/],
    ['', 'worker-registry', /not a worker registry URL/],
    ['sqlite:', 'segment-store', /sqlite: needs a file/],
    ['sqlite://', 'worker-registry', /sqlite: needs a file/],
    ['static:', 'worker-registry', /static: needs a worker ID/],
    ['static:-1', 'worker-registry', /static: needs a worker ID/],
    ['zookeeper://h:2181', 'worker-registry', /needs a name|is not a zookeeper/],
    ['zookeeper://h:2181/a/b', 'worker-registry', /needs a name/],
    ['etcd://u:p@h:2379/x', 'worker-registry', /takes no user or password/],
    ['etcd:// /x', 'worker-registry', /bad host|is not an etcd/],
  ];
  for (const [url, role, problem] of refused) {
    it(`refuses ${JSON.stringify(url)} as a ${role} URL: ${problem.source}`, () => {
      assert.match(connectionUrlProblem(url, role) ?? 'accepted', problem);
      assert.throws(
        () => parseBackendUrl(url, role, 'IDMINT_SETTING'),
        (error: unknown) => {
          assert.ok(isIdMintError(error, 'CONFIG_INVALID'));
          assert.ok(
            error.message.startsWith(`IDMINT_SETTING ${JSON.stringify(redactUrl(url))}: `),
            error.message,
          );
          assert.match(error.message, problem);
          // The accepted forms follow when the form is wrong; a value out of range says what is
          // allowed itself.
          const forms =
            role === 'segment-store' ? SEGMENT_STORE_URL_FORMS : WORKER_REGISTRY_URL_FORMS;
          for (const form of forms)
            assert.equal(
              error.message.includes(form),
              !/from 0 to 15|bad port/.test(problem.source),
              `${form} in ${error.message}`,
            );
          assert.doesNotMatch(error.message, /secret/);
          return true;
        },
      );
    });
  }

  it('sqlitePathOf reads every spelling of a sqlite: URL alike', () => {
    assert.equal(sqlitePathOf('sqlite:./data/idmint.db'), './data/idmint.db');
    assert.equal(sqlitePathOf('sqlite:/var/lib/idmint.db'), '/var/lib/idmint.db');
    assert.equal(sqlitePathOf('sqlite:///var/lib/idmint.db'), '/var/lib/idmint.db');
    assert.equal(sqlitePathOf('sqlite://idmint.db'), 'idmint.db');
    assert.equal(sqlitePathOf('sqlite::memory:'), ':memory:');
    for (const url of ['sqlite:', 'sqlite://', 'postgres://h/db', 'idmint.db'])
      assert.equal(sqlitePathOf(url), undefined, url);
  });
});

describe('the catalog lists each backend once, as it describes itself', () => {
  it('names every scheme once, and each backend plays the roles it lists forms for', () => {
    const schemes = BACKENDS.flatMap((backend) => backend.schemes);
    assert.deepEqual(schemes, [...new Set(schemes)]);
    assert.deepEqual(
      BACKENDS.map((backend) => [backend.kind, backend.roles.join(' ')]),
      [
        ['sqlite', 'segment-store worker-registry'],
        ['postgres', 'segment-store worker-registry'],
        ['mysql', 'segment-store worker-registry'],
        ['redis', 'segment-store worker-registry'],
        ['static', 'worker-registry'],
        ['zookeeper', 'worker-registry'],
        ['etcd', 'worker-registry'],
      ],
    );
  });

  it('opens only the roles a backend plays, and says so otherwise', async () => {
    const url = BACKENDS.find((backend) => backend.kind === 'static')?.read('static:1');
    assert.ok(url !== undefined && !('refused' in url));
    await assert.rejects(url.openStore({}), /static is no segment store/);
  });

  it('reads a URL into typed options the adapter takes as they are', () => {
    assert.deepEqual(
      backendOptions(postgresBackend, 'postgresql://me:p@ss@db:5433/ids?sslmode=require'),
      {
        user: 'me',
        password: 'p@ss',
        host: { host: 'db', port: 5433 },
        database: 'ids',
        query: 'sslmode=require',
      },
    );
    assert.throws(
      () => backendOptions(postgresBackend, 'mysql://u:s3cret@db/ids'),
      (error: unknown) =>
        isIdMintError(error, 'CONFIG_INVALID') &&
        /not a postgres URL/.test(error.message) &&
        !error.message.includes('s3cret'),
    );
  });
});

function decodeURIComponentOr(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => decodeURIComponent(run));
  }
}
