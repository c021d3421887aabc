// idmint/registries/sql: the worker registry on PostgreSQL, MySQL/MariaDB or SQLite, and the
// drivers of idmint's SQL layer (src/sql/) for passing in a pool or database of your own.
export { SqlWorkerRegistry, connectSqlWorkerRegistry } from './sql-worker-registry.ts';
export type {
  ConnectSqlOptions,
  SqlRegistryConnection,
  SqlWorkerRegistryOptions,
} from './sql-worker-registry.ts';
export type {
  SqlConnection,
  SqlConnectionOptions,
  SqlDialect,
  SqlDriver,
  SqlResult,
  SqlRow,
  SqlServerAddress,
  SqlValue,
} from '../../sql/sql-driver.ts';
export { PostgresDriver, postgresDialect } from '../../sql/postgres-driver.ts';
export type { PgClientLike, PgPoolLike } from '../../sql/postgres-driver.ts';
export { MysqlDriver, mysqlDialect } from '../../sql/mysql-driver.ts';
export type { MysqlConnectionLike, MysqlPoolLike } from '../../sql/mysql-driver.ts';
export { SqliteDriver, sqliteDialect } from '../../sql/sqlite-driver.ts';
export type { SqliteDatabaseLike } from '../../sql/sqlite-driver.ts';
