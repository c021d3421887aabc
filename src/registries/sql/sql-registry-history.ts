import type { SqlDialect } from '../../sql/sql-driver.ts';

/**
 * The table recording, per registry table, the database history its leases were granted on
 * (docs/workers.md, "When the database's history changes"): `history` is the dialect's live
 * history (PostgreSQL system identifier and timeline, MySQL/MariaDB server_id: the expression the
 * segment store checks, SqlDialect.liveHistory), `settled_at` the database's clock (ms) before
 * which no lease may be granted after the last fence, `fences` how many fences there were.
 */
export const REGISTRY_HISTORY_TABLE = 'idmint_registry_history';

/** The statements of a registry table's history record; `table` is a validated identifier. */
export function historyStatements(table: string, dialect: SqlDialect) {
  const live = dialect.liveHistory;
  const now = dialect.nowMs;
  const record = `${REGISTRY_HISTORY_TABLE} WHERE registry_table = '${table}'`;
  const columns = ['registry_table', 'history', 'fences', 'settled_at'];
  return {
    createHistoryTable:
      `CREATE TABLE IF NOT EXISTS ${REGISTRY_HISTORY_TABLE} (` +
      `registry_table VARCHAR(64) NOT NULL PRIMARY KEY, history VARCHAR(255) NOT NULL, ` +
      `fences BIGINT NOT NULL DEFAULT 0, settled_at BIGINT NOT NULL DEFAULT 0)` +
      dialect.tableOptions,
    // The live history, the record, and whether the table has rows: a record missing where rows
    // are is a restore of the rows without it (or a registry from before the record).
    readHistory:
      `SELECT ${live} AS live, (SELECT history FROM ${record}) AS recorded, ` +
      `(SELECT fences FROM ${record}) AS fences, (SELECT settled_at FROM ${record}) AS ` +
      `settled_at, ${now} AS now_ms, ` +
      `CASE WHEN EXISTS (SELECT 1 FROM ${table}) THEN 1 ELSE 0 END AS used`,
    // An empty registry on a database seen for the first time: recorded as settled already.
    recordHistory: dialect.insertIfAbsent(REGISTRY_HISTORY_TABLE, columns, [
      `'${table}'`,
      '?',
      '0',
      '0',
    ]),
    // A fence: the live history recorded, no lease granted for `?` ms from now. One of any number
    // of nodes fencing at once wins (the record they read is the condition).
    fenceMissing: dialect.insertIfAbsent(REGISTRY_HISTORY_TABLE, columns, [
      `'${table}'`,
      '?',
      '1',
      `${now} + ?`,
    ]),
    fenceChanged:
      `UPDATE ${REGISTRY_HISTORY_TABLE} SET history = ?, fences = fences + 1, ` +
      `settled_at = ${now} + ? WHERE registry_table = '${table}' AND history = ? AND fences = ?`,
    /** True (1) in a statement while the record is the live history and settled. */
    settled:
      `CASE WHEN EXISTS (SELECT 1 FROM ${record} AND history = ${live} AND ` +
      `settled_at <= ${now}) THEN 1 ELSE 0 END`,
    /** The end of the last settle (ms, the database's clock); 0 when there was no fence. */
    settledAt: `COALESCE((SELECT settled_at FROM ${record}), 0)`,
    /** The guard of a renewal: the history recorded is the one the statement runs on. */
    onRecordedHistory: `EXISTS (SELECT 1 FROM ${record} AND history = ${live})`,
  };
}
