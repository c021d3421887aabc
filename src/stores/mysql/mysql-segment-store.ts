import { MysqlDriver, openMysqlPool, type MysqlPoolLike } from '../../sql/mysql-driver.ts';
import type { SqlServerAddress } from '../../sql/sql-driver.ts';
import {
  SqlSegmentStore,
  type ConnectSegmentStoreOptions,
  type PooledSegmentStoreOptions,
} from '../sql/sql-segment-store.ts';
import { resolveStoreOptions } from '../store-support.ts';

export type {
  MysqlConnectionLike,
  MysqlPoolLike,
  MysqlQueryOptions,
} from '../../sql/mysql-driver.ts';

/** Options for {@link MysqlSegmentStore}: `pool`, `closePool`, `table`, `timeoutMs`. */
export type MysqlSegmentStoreOptions = PooledSegmentStoreOptions<MysqlPoolLike>;

/**
 * Leaf's table on MySQL or MariaDB through `mysql2`. Neither has `UPDATE ... RETURNING`, so an
 * allocation is Leaf's own transaction on one connection: the UPDATE locks the row, the SELECT
 * reads the new max_id and step, COMMIT releases it. Concurrent allocators queue on the row lock.
 */
export class MysqlSegmentStore extends SqlSegmentStore {
  constructor(options: MysqlSegmentStoreOptions) {
    super(new MysqlDriver(options.pool, { closePool: options.closePool === true }), options);
  }

  /**
   * Opens a pool of its own on `address` (parsed by its backend), ended by close(). Loads `mysql2`
   * on first use.
   */
  static async connect(
    address: SqlServerAddress,
    options: ConnectSegmentStoreOptions = {},
  ): Promise<MysqlSegmentStore> {
    const { timeoutMs } = resolveStoreOptions(options);
    const pool = await openMysqlPool(address, { poolSize: options.poolSize ?? 10, timeoutMs });
    return new MysqlSegmentStore({ ...options, pool, closePool: true });
  }
}
