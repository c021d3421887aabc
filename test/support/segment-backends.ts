// The real backends segment mode is tested against, each able to open a store on a table (or key
// prefix) of its own and to drop it afterwards, so suites run in parallel and twice in a row.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { openSegmentStore, type OpenSegmentStoreOptions } from '../../src/stores/open-segment-store.ts';
import type { SegmentStoreFixture } from './segment-store-suite.ts';
import { SERVICES, uniqueName, type ServiceName } from './services.ts';

export interface SegmentBackend {
  /** `sqlite`, `postgres`, `mariadb`, `redis`. */
  readonly name: string;
  /** Services that must be reachable. */
  readonly services: readonly ServiceName[];
  /**
   * Opens a store on a fresh table/prefix (created). `url` overrides the service address (a
   * TcpProxy in front of it). The fixture's `table` is what to pass to another process.
   */
  open(options?: OpenSegmentStoreOptions & { url?: string }): Promise<SegmentStoreFixture & { readonly url: string; readonly table: string }>;
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
  open(options = {}) {
    const dir = mkdtempSync(join(tmpdir(), 'idmint-segments-'));
    return openFixture(`sqlite:${join(dir, 'idmint.db')}`, async () => rmSync(dir, { recursive: true, force: true }), options);
  },
  async sql(url, statement) {
    const db = new DatabaseSync(url.slice('sqlite:'.length));
    try {
      return /^\s*select/i.test(statement) ? (db.prepare(statement).all() as Record<string, unknown>[]) : (db.exec(statement), []);
    } finally {
      db.close();
    }
  },
};

const postgres: SegmentBackend = {
  name: 'postgres',
  services: ['postgres'],
  open: (options) => openFixture(SERVICES.postgres.url, (table) => dropTable(postgres, SERVICES.postgres.url, table), options),
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
  open: (options) => openFixture(SERVICES.mysql.url, (table) => dropTable(mariadb, SERVICES.mysql.url, table), options),
  async sql(url, statement) {
    const mysql = await import('mysql2/promise');
    const connection = await mysql.createConnection({ uri: url, supportBigNumbers: true, bigNumberStrings: true, multipleStatements: true });
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
  open: (options) => openFixture(SERVICES.redis.url, (prefix) => deleteRedisPrefix(SERVICES.redis.url, prefix), options),
};

/** A store on a fresh table (created unless `init: false`) at `options.url ?? url`; dispose drops it with `drop`. */
async function openFixture(url: string, drop: (table: string) => Promise<unknown>, options: OpenSegmentStoreOptions & { url?: string } = {}) {
  const table = options.table ?? uniqueName('seg');
  const storeUrl = options.url ?? url;
  const store = await openSegmentStore(storeUrl, { ...options, table, init: options.init ?? true });
  return {
    store,
    url: storeUrl,
    table,
    async dispose() {
      await store.close();
      await drop(table);
    },
  };
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

export const SEGMENT_BACKENDS = { sqlite, postgres, mariadb, redis } as const;
