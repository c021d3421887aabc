// Run by test/sql-drivers.test.ts in a process of its own, with --expose-gc and a young generation
// large enough that no collection runs by itself during the reads:
//   node --expose-gc --min-semi-space-size=64 --max-semi-space-size=64 young-survivors.ts
//   <postgres|mariadb> <url>
// Reads QUERIES result sets of ROWS rows through the driver, drops them, then collects the young
// generation once and prints the bytes still held as one JSON line: rows a driver keeps reachable
// after their query is done (they all survive the collection and get copied) show here.
import { backendOptions } from '../../src/backends/catalog.ts';
import { mysqlBackend } from '../../src/backends/mysql/mysql-backend.ts';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.ts';
import { MysqlDriver } from '../../src/sql/mysql-driver.ts';
import { PostgresDriver } from '../../src/sql/postgres-driver.ts';
import type { SqlDriver } from '../../src/sql/sql-driver.ts';

const QUERIES = 100;
const ROWS = 500;
const [backend, url] = process.argv.slice(2);
const gc = (globalThis as { gc?: (options?: { type: 'minor' | 'major' }) => void }).gc;
if (gc === undefined || url === undefined)
  throw new Error('run with --expose-gc: young-survivors.ts <postgres|mariadb> <url>');
const options = { poolSize: 1, timeoutMs: 5000 };
const driver: SqlDriver =
  backend === 'postgres'
    ? await PostgresDriver.open(backendOptions(postgresBackend, url), options)
    : await MysqlDriver.open(backendOptions(mysqlBackend, url), options);
const sql =
  backend === 'postgres'
    ? `SELECT 'tag-' || g AS biz_tag, 1000 AS step FROM generate_series(1, ${ROWS}) g`
    : `WITH RECURSIVE s (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ${ROWS}) ` +
      `SELECT CONCAT('tag-', n) AS biz_tag, 1000 AS step FROM s`;
const read = () =>
  driver.withConnection((connection) => connection.query(sql, []), {
    transaction: false,
    signal: AbortSignal.timeout(5000),
  });
// Warm up (connections, compiled code, the driver's caches), then start from a collected heap.
for (let i = 0; i < 10; i++) await read();
gc({ type: 'major' });
const before = process.memoryUsage().heapUsed;
let rows = 0;
for (let i = 0; i < QUERIES; i++) rows += (await read()).rows.length;
gc({ type: 'minor' });
const heldBytes = process.memoryUsage().heapUsed - before;
await driver.close();
process.stdout.write(`${JSON.stringify({ rows, heldBytes })}\n`);
