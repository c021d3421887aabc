// idmint/registries/sql: the worker registry on PostgreSQL, MySQL/MariaDB or SQLite, and the
// dialects and client adapters for passing in a pool of your own.
export { SqlWorkerRegistry, connectSqlWorkerRegistry } from './sql-worker-registry.ts';
export type { ConnectSqlOptions, SqlWorkerRegistryOptions } from './sql-worker-registry.ts';
export type { SqlClient, SqlDialect, SqlRow, SqlValue } from './sql-dialect.ts';
export { postgresClient, postgresDialect } from './postgres-dialect.ts';
export type { PgPoolLike } from './postgres-dialect.ts';
export { mysqlClient, mysqlDialect } from './mysql-dialect.ts';
export type { MysqlConnectionLike, MysqlPoolLike } from './mysql-dialect.ts';
export { sqliteClient, sqliteDialect } from './sqlite-dialect.ts';
export type { SqliteDatabaseLike } from './sqlite-dialect.ts';
