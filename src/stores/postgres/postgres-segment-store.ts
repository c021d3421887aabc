import { PostgresDriver, openPostgresPool, type PgPoolLike } from '../../sql/postgres-driver.ts';
import type { SqlServerAddress } from '../../sql/sql-driver.ts';
import {
  SqlSegmentStore,
  type ConnectSegmentStoreOptions,
  type PooledSegmentStoreOptions,
} from '../sql/sql-segment-store.ts';
import { resolveStoreOptions } from '../store-support.ts';

export type { PgClientLike, PgPoolLike, PgTypesLike } from '../../sql/postgres-driver.ts';

/** Options for {@link PostgresSegmentStore}: `pool`, `closePool`, `table`, `timeoutMs`. */
export type PostgresSegmentStoreOptions = PooledSegmentStoreOptions<PgPoolLike>;

/**
 * Leaf's table on PostgreSQL through `pg`. Allocation is one `UPDATE ... RETURNING` statement,
 * atomic under any number of concurrent allocators.
 */
export class PostgresSegmentStore extends SqlSegmentStore {
  constructor(options: PostgresSegmentStoreOptions) {
    super(new PostgresDriver(options.pool, { closePool: options.closePool === true }), options);
  }

  /**
   * Opens a pool of its own on `address` (parsed by its backend), ended by close(). Loads `pg` on
   * first use.
   */
  static async connect(
    address: SqlServerAddress,
    options: ConnectSegmentStoreOptions = {},
  ): Promise<PostgresSegmentStore> {
    const { timeoutMs } = resolveStoreOptions(options);
    const pool = await openPostgresPool(address, { poolSize: options.poolSize ?? 10, timeoutMs });
    return new PostgresSegmentStore({ ...options, pool, closePool: true });
  }
}
