// idmint/registries/sql: the worker registry on PostgreSQL, MySQL/MariaDB or SQLite, and the
// drivers of idmint's SQL layer (src/sql/) for passing in a pool or database of your own.
export { SqlWorkerRegistry, connectSqlWorkerRegistry } from './sql-worker-registry.ts';
export type { ConnectSqlOptions, SqlWorkerRegistryOptions } from './sql-worker-registry.ts';
export type { SqlConnection, SqlConnectionOptions, SqlDialect, SqlDriver, SqlResult, SqlRow, SqlValue } from '../../sql/sql-driver.ts';
/** @deprecated The registry's name for {@link SqlDriver} before the SQL layer was shared. */
export type { SqlDriver as SqlClient } from '../../sql/sql-driver.ts';
export { PostgresDriver, postgresClient, postgresDialect } from '../../sql/postgres-driver.ts';
export type { PgClientLike, PgPoolLike } from '../../sql/postgres-driver.ts';
export { MysqlDriver, mysqlClient, mysqlDialect } from '../../sql/mysql-driver.ts';
export type { MysqlConnectionLike, MysqlPoolLike } from '../../sql/mysql-driver.ts';
export { SqliteDriver, sqliteClient, sqliteDialect } from '../../sql/sqlite-driver.ts';
export type { SqliteDatabaseLike } from '../../sql/sqlite-driver.ts';
