// The real backends segment mode is tested against, each able to open a store on a table (or key
// prefix) of its own and to drop it afterwards, so suites run in parallel and twice in a row.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import {
  openSegmentStore,
  type OpenSegmentStoreOptions,
} from '../../src/backends/open-segment-store.ts';
import { ISSUER_TABLE } from '../../src/stores/issuer-support.ts';
import { HISTORY_TABLE } from '../../src/stores/store-support.ts';
import type { SegmentStoreFixture } from './segment-store-suite.ts';
import type { SegmentStore } from '../../src/ports/segment-store.ts';
import { SERVICES, uniqueName, type ServiceName } from './services.ts';

type FixtureOptions = OpenSegmentStoreOptions & { url?: string };

/** A fixture on a table of its own, with what tests need to reach it from outside the store. */
export interface BackendFixture extends SegmentStoreFixture {
  readonly url: string;
  readonly table: string;
  setRecordedHistory(value: string | undefined): Promise<void>;
  openAnother(options?: OpenSegmentStoreOptions): Promise<SegmentStore>;
}

export interface SegmentBackend {
  /** `sqlite`, `postgres`, `mariadb`, `redis`. */
  readonly name: string;
  /** Services that must be reachable. */
  readonly services: readonly ServiceName[];
  /**
   * Opens a store on a fresh table/prefix (created). `url` overrides the service address (a
   * TcpProxy in front of it). The fixture's `table` is what to pass to another process.
   */
  open(options?: OpenSegmentStoreOptions & { url?: string }): Promise<BackendFixture>;
  /** Runs raw SQL on the backend (SQL backends only), for DDL and checks outside the store. */
  sql?(url: string, statement: string): Promise<Record<string, unknown>[]>;
}

/** `url` with its port replaced, to go through a TcpProxy. */
export function withPort(url: string, port: number): string {
  const parsed = new URL(url);
  parsed.port = String(port);
  return parsed.toString();
}

const sqlite: SegmentBackend = {
  name: 'sqlite',
  services: [],
  async open(options = {}) {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-segments-'));
    const url = `sqlite:${join(dir, 'idmint.db')}`;
    const remove = async () => rmSync(dir, { recursive: true, force: true });
    const fixture = await openFixture(url, remove, options, (table, value) =>
      setRecordedHistory(url, table, value),
    );
    return { ...fixture, sequentialNodes: true };
  },
  async sql(url, statement) {
    const db = new DatabaseSync(url.slice('sqlite:'.length));
    try {
      if (/^\s*select/i.test(statement))
        return db.prepare(statement).all() as Record<string, unknown>[];
      db.exec(statement);
      return [];
    } finally {
      db.close();
    }
  },
};

const postgres: SegmentBackend = {
  name: 'postgres',
  services: ['postgres'],
  open: (options) => openServerFixture(postgres, SERVICES.postgres.url, options),
  async sql(url, statement) {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query(statement)).rows as Record<string, unknown>[];
    } finally {
      await client.end();
    }
  },
};

const mariadb: SegmentBackend = {
  name: 'mariadb',
  services: ['mysql'],
  open: (options) => openServerFixture(mariadb, SERVICES.mysql.url, options),
  async sql(url, statement) {
    const mysql = await import('mysql2/promise');
    const connection = await mysql.createConnection({
      uri: url,
      supportBigNumbers: true,
      bigNumberStrings: true,
      multipleStatements: true,
    });
    try {
      const [rows] = await connection.query(statement);
      return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : [];
    } finally {
      await connection.end();
    }
  },
};

const redis: SegmentBackend = {
  name: 'redis',
  services: ['redis'],
  open: (options) => openServerFixture(redis, SERVICES.redis.url, options),
};

/**
 * A store on a fresh table (created unless `init: false`) at `options.url ?? url`; dispose drops it
 * with `drop`, and its row of the history table. `setHistory` writes the table's recorded history
 * by hand (undefined: none), as a restore or an operator might.
 */
async function openFixture(
  url: string,
  drop: (table: string) => Promise<unknown>,
  options: (OpenSegmentStoreOptions & { url?: string }) | undefined,
  setHistory: (table: string, value: string | undefined) => Promise<unknown>,
) {
  const table = options?.table ?? uniqueName('seg');
  const storeUrl = options?.url ?? url;
  const store = await openSegmentStore(storeUrl, {
    ...options,
    table,
    init: options?.init ?? true,
  });
  const others: { close(): Promise<void> }[] = [];
  return {
    store,
    url: storeUrl,
    table,
    setRecordedHistory: (value: string | undefined) =>
      setHistory(table, value).then(() => undefined),
    async openAnother(more: OpenSegmentStoreOptions = {}) {
      const other = await openSegmentStore(storeUrl, { ...options, ...more, table, init: false });
      others.push(other);
      return other;
    },
    async dispose() {
      for (const other of others) await other.close().catch(() => undefined);
      await store.close();
      await drop(table);
      await setHistory(table, undefined).catch(() => undefined);
    },
  };
}

/**
 * Writes the recorded history of `table` (a Redis key prefix) in the database at `url` by hand, as
 * a restore or an operator might; undefined deletes the record (the table's row of idmint_history).
 */
export async function setRecordedHistory(
  url: string,
  table: string,
  value: string | undefined,
): Promise<void> {
  if (url.startsWith('redis')) {
    const { Redis } = await import('ioredis');
    const client = new Redis(url);
    try {
      if (value === undefined) await client.del(`${table}:history`);
      else await client.hset(`${table}:history`, 'history', value);
    } finally {
      await client.quit();
    }
    return;
  }
  const backend = url.startsWith('sqlite')
    ? sqlite
    : url.startsWith('postgres')
      ? postgres
      : mariadb;
  const where = `WHERE segment_table = '${table}'`;
  const statement =
    value === undefined
      ? `DELETE FROM ${HISTORY_TABLE} ${where}`
      : `UPDATE ${HISTORY_TABLE} SET history = '${value}' ${where}`;
  await backend.sql?.(url, statement);
}

/** {@link openFixture} on a database server: the table (or Redis prefix) is dropped afterwards. */
function openServerFixture(
  backend: SegmentBackend,
  url: string,
  options: FixtureOptions | undefined,
) {
  const drop = (table: string) =>
    backend.sql === undefined ? deleteRedisPrefix(url, table) : dropTable(backend, url, table);
  return openFixture(url, drop, options, (table, value) => setRecordedHistory(url, table, value));
}

function dropTable(backend: SegmentBackend, url: string, table: string): Promise<unknown> {
  return backend.sql?.(url, `DROP TABLE IF EXISTS ${table}`) ?? Promise.resolve();
}

/** Deletes every key under `prefix:` (only keys this run created: the prefix is unique). */
export async function deleteRedisPrefix(url: string, prefix: string): Promise<void> {
  const { Redis } = await import('ioredis');
  const client = new Redis(url);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await client.del(...keys);
    } while (cursor !== '0');
  } finally {
    await client.quit();
  }
}

/**
 * What a restore of segment table `table` into a database without idmint's own tables leaves
 * for tag `tag`: no history record and no issuer lease, and the tag's max_id back at `maxId`, as
 * an older backup has it. SQLite's file is the fixture's own, so the tables are dropped; on a
 * shared server the table's rows of them are deleted (the same to the store: no record, no lease
 * row); on Redis the prefix's history hash and the tag's lease.
 */
export async function restoreWithoutIdmintTables(
  backend: SegmentBackend,
  url: string,
  table: string,
  tag: string,
  maxId: bigint,
): Promise<void> {
  if (backend.sql === undefined) {
    const { Redis } = await import('ioredis');
    const client = new Redis(url);
    try {
      await client.del(`${table}:history`, `${table}:issuer:${tag}`);
      await client.hset(`${table}:tag:${tag}`, 'max_id', maxId.toString());
    } finally {
      await client.quit();
    }
    return;
  }
  const where = `WHERE segment_table = '${table}'`;
  const statements =
    backend.name === 'sqlite'
      ? [`DROP TABLE ${HISTORY_TABLE}`, `DROP TABLE ${ISSUER_TABLE}`]
      : [`DELETE FROM ${HISTORY_TABLE} ${where}`, `DELETE FROM ${ISSUER_TABLE} ${where}`];
  statements.push(`UPDATE ${table} SET max_id = ${maxId} WHERE biz_tag = '${tag}'`);
  for (const statement of statements) await backend.sql(url, statement);
}

export const SEGMENT_BACKENDS = { sqlite, postgres, mariadb, redis } as const;
