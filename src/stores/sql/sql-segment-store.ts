import { IdMintError } from '../../core/errors.ts';
import { MAX_SEGMENT_ID, checkDescription, checkStep, checkTag, idSpaceExhausted, tagNotFound } from '../../core/segment-limits.ts';
import type { NewTag, SegmentRange, SegmentStore, TagRecord, TagUpdate } from '../../ports/segment-store.ts';
import type { SqlConnection, SqlDriver, SqlRow, SqlValue } from '../../sql/sql-driver.ts';
import { byTag, checkNewTag, checkRelease, resolveStoreOptions, storeCall, tagRecord, toBigInt, toStep, type SegmentStoreOptions } from '../store-support.ts';

const COLUMNS = 'biz_tag, max_id, step, description, update_time';

/**
 * A SegmentStore on Leaf's `leaf_alloc` table, for any SQL backend: SQLite, PostgreSQL, MySQL and
 * MariaDB each provide a {@link SqlDriver} (src/sql/); the statements are shared.
 *
 * Allocation is one atomic step: `UPDATE ... SET max_id = max_id + step ... RETURNING` where the
 * dialect has it (SQLite, PostgreSQL); otherwise the same UPDATE and a SELECT of the row inside
 * one transaction, the row locked by the UPDATE until commit (MySQL, MariaDB: Leaf's own way).
 * The UPDATE's WHERE clause refuses a step that would pass 2^63-1, so nothing changes then.
 */
export class SqlSegmentStore implements SegmentStore {
  readonly backend: string;
  /** The table this store uses. */
  readonly table: string;
  readonly #driver: SqlDriver;
  readonly #timeoutMs: number;
  readonly #sql: ReturnType<typeof statements>;

  constructor(driver: SqlDriver, options: SegmentStoreOptions = {}) {
    const { table, timeoutMs } = resolveStoreOptions(options);
    this.backend = driver.dialect.backend;
    this.table = table;
    this.#driver = driver;
    this.#timeoutMs = timeoutMs;
    this.#sql = statements(table, driver.dialect.nowTimestamp);
  }

  init(): Promise<void> {
    return this.#call('init', false, async (db) => {
      try {
        await db.query(this.#sql.createTable, []);
      } catch (error) {
        // Two `IF NOT EXISTS` racing on PostgreSQL: the loser trips over the winner's catalog row.
        if (!this.#driver.dialect.isDuplicateKey(error)) throw error;
      }
    });
  }

  async allocate(tag: string, step?: number): Promise<SegmentRange> {
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    const bound = step ?? null;
    const returning = this.#driver.dialect.supportsReturning;
    return this.#call('allocate', !returning, async (db) => {
      let row: SqlRow | undefined;
      if (returning) {
        row = (await db.query(this.#sql.allocateReturning, [bound, tag, bound])).rows[0];
      } else if ((await db.query(this.#sql.allocate, [bound, tag, bound])).affectedRows === 1) {
        row = (await db.query(this.#sql.readMaxId, [tag])).rows[0];
      }
      if (row === undefined) throw await this.#whyNotAllocated(db, tag, step);
      const end = toBigInt(row['max_id'], 'max_id');
      const tagStep = toStep(row['step']);
      const used = step ?? tagStep;
      return { tag, start: end - BigInt(used), end, step: used, tagStep };
    });
  }

  async release(tag: string, from: bigint, to: bigint): Promise<boolean> {
    checkTag(tag);
    checkRelease(from, to);
    return this.#call('release', false, async (db) => (await db.query(this.#sql.release, [from, tag, to])).affectedRows === 1);
  }

  listTags(): Promise<TagRecord[]> {
    return this.#call('listTags', false, async (db) => (await db.query(this.#sql.list, [])).rows.map(asRecord).sort(byTag));
  }

  async getTag(tag: string): Promise<TagRecord | undefined> {
    checkTag(tag);
    return this.#call('getTag', false, (db) => this.#read(db, tag));
  }

  async createTag(tag: NewTag): Promise<TagRecord> {
    const values = checkNewTag(tag);
    return this.#call('createTag', false, async (db) => {
      try {
        await db.query(this.#sql.insert, [values.tag, values.startId, values.step, values.description]);
      } catch (error) {
        if (this.#driver.dialect.isDuplicateKey(error)) throw new IdMintError('TAG_EXISTS', `tag "${values.tag}" already exists`, { details: { tag: values.tag } });
        throw error;
      }
      return (await this.#read(db, values.tag)) ?? failRead(values.tag);
    });
  }

  async updateTag(tag: string, update: TagUpdate): Promise<TagRecord> {
    checkTag(tag);
    const sets: string[] = [];
    const params: SqlValue[] = [];
    if (update.step !== undefined) {
      sets.push('step = ?');
      params.push(checkStep(update.step));
    }
    if (update.description !== undefined) {
      sets.push('description = ?');
      params.push(checkDescription(update.description));
    }
    return this.#call('updateTag', false, async (db) => {
      if (sets.length > 0) await db.query(`UPDATE ${this.table} SET ${sets.join(', ')}, update_time = ${this.#driver.dialect.nowTimestamp} WHERE biz_tag = ?`, [...params, tag]);
      // Read back rather than trust affectedRows: MySQL counts only rows whose values changed.
      const record = await this.#read(db, tag);
      if (record === undefined) throw tagNotFound(tag);
      return record;
    });
  }

  close(): Promise<void> {
    return this.#driver.close();
  }

  #call<T>(operation: string, transaction: boolean, run: (db: SqlConnection) => Promise<T>): Promise<T> {
    return storeCall(this.backend, operation, this.#timeoutMs, (signal) => this.#driver.withConnection(run, { transaction, signal }));
  }

  async #read(db: SqlConnection, tag: string): Promise<TagRecord | undefined> {
    const row = (await db.query(this.#sql.get, [tag])).rows[0];
    return row === undefined ? undefined : asRecord(row);
  }

  /** The guarded UPDATE matched no row: no such tag, or the step would pass 2^63-1. */
  async #whyNotAllocated(db: SqlConnection, tag: string, step: number | undefined): Promise<IdMintError> {
    const row = (await db.query(this.#sql.readMaxId, [tag])).rows[0];
    if (row === undefined) return tagNotFound(tag);
    const maxId = toBigInt(row['max_id'], 'max_id');
    const used = step ?? toStep(row['step']);
    // Otherwise the tag was created between the two statements: the caller may simply retry.
    return maxId > MAX_SEGMENT_ID - BigInt(used) ? idSpaceExhausted(tag, maxId, used) : tagNotFound(tag);
  }
}

function statements(table: string, now: string) {
  const step = 'COALESCE(?, step)';
  const allocate = `UPDATE ${table} SET max_id = max_id + ${step}, update_time = ${now} WHERE biz_tag = ? AND max_id <= ${MAX_SEGMENT_ID} - ${step}`;
  return {
    // Leaf's columns and types, so Leaf's own table works unchanged and vice versa.
    createTable: `CREATE TABLE IF NOT EXISTS ${table} (biz_tag varchar(128) NOT NULL PRIMARY KEY, max_id bigint NOT NULL DEFAULT 1, step int NOT NULL, description varchar(256) DEFAULT NULL, update_time timestamp NULL DEFAULT NULL)`,
    allocate,
    allocateReturning: `${allocate} RETURNING max_id, step`,
    readMaxId: `SELECT max_id, step FROM ${table} WHERE biz_tag = ?`,
    release: `UPDATE ${table} SET max_id = ?, update_time = ${now} WHERE biz_tag = ? AND max_id = ?`,
    list: `SELECT ${COLUMNS} FROM ${table}`,
    get: `SELECT ${COLUMNS} FROM ${table} WHERE biz_tag = ?`,
    insert: `INSERT INTO ${table} (biz_tag, max_id, step, description, update_time) VALUES (?, ?, ?, ?, ${now})`,
  };
}

function asRecord(row: SqlRow): TagRecord {
  return tagRecord({ biz_tag: row['biz_tag'], max_id: row['max_id'], step: row['step'], description: row['description'], update_time: row['update_time'] });
}

function failRead(tag: string): never {
  throw new IdMintError('STORE_UNAVAILABLE', `tag "${tag}" was created but could not be read back`);
}

/** Options of a store on a connection pool (PostgreSQL, MySQL). */
export interface PooledSegmentStoreOptions<Pool> extends SegmentStoreOptions {
  /** The driver's pool (or anything shaped like the part idmint uses). */
  readonly pool: Pool;
  /** End the pool on close(). Default false: a pool you pass in is yours to end. */
  readonly closePool?: boolean;
}

/** Options of a store that opens its own pool from a URL. */
export interface ConnectSegmentStoreOptions extends SegmentStoreOptions {
  /** Connections in the pool. Default 10. */
  readonly poolSize?: number;
}
