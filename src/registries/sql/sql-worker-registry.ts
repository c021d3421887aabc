import { IdMintError } from '../../core/errors.ts';
import { withDeadline } from '../../shared/timeout.ts';
import type {
  AcquireRequest,
  PeerTime,
  WorkerLease,
  WorkerRegistry,
  WorkerReport,
} from '../../ports/worker-registry.ts';
import {
  checkTableName,
  type SqlDialect,
  type SqlDriver,
  type SqlResult,
  type SqlValue,
} from '../../sql/sql-driver.ts';
import {
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_TTL_MS,
  RegistryLease,
  allows,
  checkName,
  checkTtl,
  floorAfterSettle,
  holderToken,
  judgeHistory,
  leaseLost,
  planAcquire,
  registryDoing,
  registrySettling,
  registryUnavailable,
  settleMs,
  workerIdsExhausted,
  type AcquirePlan,
  type Interleave,
  type RegistryHistory,
} from '../common.ts';
import { REGISTRY_HISTORY_TABLE, historyStatements } from './sql-registry-history.ts';
import { BackendCauses, saysNoAnswer } from '../../shared/failure-cause.ts';

/** Rows read per page while looking for a free worker ID; the first page almost always has one. */
const PAGE = 16;

/** Options for {@link SqlWorkerRegistry}. */
export interface SqlWorkerRegistryOptions {
  /**
   * The database: a driver from idmint's SQL layer (`new PostgresDriver(pool)`, `new
   * MysqlDriver(pool)`, `new SqliteDriver(db)`).
   */
  readonly client: SqlDriver;
  /** Cluster name; worker IDs are unique within it. Default `idmint`. */
  readonly name?: string;
  /** Table name (created if missing). Default `worker_node`. */
  readonly table?: string;
  /** Lease TTL in ms, judged by the database's clock. Default 10000. */
  readonly ttlMs?: number;
  /** Where the database is, for error messages. Default the backend name. */
  readonly where?: string;
  /** Close `client` in {@link SqlWorkerRegistry.close}. Default false. */
  readonly ownsClient?: boolean;
  /**
   * Bound on one statement, pool checkout included, in ms. Default 5000. A statement that
   * outlasts it is REGISTRY_UNAVAILABLE and its connection is destroyed, never reused.
   */
  readonly operationTimeoutMs?: number;
  /**
   * The most any holder's `borrow` generator leads its clock (snowflake.rollback.maxLeadMs), in
   * ms; 0 when no holder borrows. After the database moves to a new history no lease is granted
   * for one TTL plus this. Default 0.
   */
  readonly maxLeadMs?: number;
  /** Tests only: pauses at the steps docs/workers.md lists (see {@link Interleave}). */
  readonly interleave?: Interleave;
}

/**
 * Worker IDs leased from a SQL table (PostgreSQL, MySQL/MariaDB or SQLite), one row per worker ID:
 *
 * ```
 * worker_node(name, worker_id, holder, host, port, lease_expires_at, last_timestamp, reported_at,
 * reported_db_at, fence)
 * ```
 *
 * A claim is one conditional statement: an UPDATE of a row whose lease expired (by the database's
 * clock) or was released, or an INSERT of a new row that does nothing if another node inserted it
 * first. Either affects one row for exactly one of any number of nodes racing for the same ID.
 * Renewals and releases match the holder token, so a node whose lease was taken over cannot
 * write. Unlike Baidu's uid-generator, which inserts a new row (a new worker ID) on every start,
 * rows are reused, so the worker-ID space counts live nodes, not restarts.
 */
export class SqlWorkerRegistry implements WorkerRegistry {
  readonly backend: string;
  readonly #client: SqlDriver;
  readonly #name: string;
  readonly #ttlMs: number;
  readonly #settleMs: number;
  readonly #timeoutMs: number;
  readonly #where: string;
  /** Causes of this registry's failures, the last one the system named remembered. */
  readonly #causes = new BackendCauses();
  readonly #ownsClient: boolean;
  readonly #sql: ReturnType<typeof statements>;
  readonly #interleave: Interleave | undefined;
  #initialized: Promise<void> | undefined;

  constructor(options: SqlWorkerRegistryOptions) {
    const dialect = options.client?.dialect;
    if (dialect === undefined)
      throw new IdMintError(
        'INVALID_ARGUMENT',
        'client must be a SQL driver: new PostgresDriver(pool), new MysqlDriver(pool) or ' +
          'new SqliteDriver(db)',
      );
    this.#client = options.client;
    this.backend = dialect.backend;
    this.#name = checkName(options.name ?? 'idmint');
    this.#ttlMs = checkTtl(options.ttlMs ?? DEFAULT_TTL_MS);
    this.#settleMs = settleMs(this.#ttlMs, options.maxLeadMs ?? 0);
    this.#timeoutMs = options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS;
    this.#where = options.where ?? this.backend;
    this.#ownsClient = options.ownsClient ?? false;
    this.#sql = statements(checkTableName(options.table ?? 'worker_node'), dialect);
    this.#interleave = options.interleave;
  }

  /** Creates the table if it is missing. Idempotent; acquire calls it once. */
  init(): Promise<void> {
    this.#initialized ??= this.#createTable().catch((error: unknown) => {
      this.#initialized = undefined;
      throw this.#unavailable(error, registryDoing.table);
    });
    return this.#initialized;
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    const plan = planAcquire(request);
    await this.init();
    const token = holderToken();
    const { host, port } = plan.identity;
    const below = Number.isFinite(plan.below) ? plan.below : Number.MAX_SAFE_INTEGER;
    try {
      await this.#checkHistory();
      for await (const { workerId, exists } of this.#candidates(plan, below)) {
        if (this.#interleave !== undefined)
          await this.#interleave({ point: 'before-claim', backend: this.backend, workerId });
        const { affectedRows } = exists
          ? await this.#query(this.#sql.claim, [
              token,
              host,
              port,
              this.#ttlMs,
              this.#name,
              workerId,
              below,
            ])
          : await this.#query(this.#sql.insert, [
              this.#name,
              workerId,
              token,
              host,
              port,
              this.#ttlMs,
            ]);
        if (affectedRows !== 1) continue; // another node was faster: try the next ID
        // The record as it stands after the claim, never the rows read before it: another node may
        // have acquired, issued and released this ID in between. No one else writes it while the
        // token holds the row.
        // Read with the row, on the server the row is on: whether its history is the recorded
        // one and settled. A failover between the check above and the claim lands here.
        const [row] = (await this.#query(this.#sql.held, [this.#name, workerId, token])).rows;
        if (row === undefined) continue;
        if (Number(row['settled']) !== 1) {
          await this.#query(this.#sql.unclaim, [this.#name, workerId, token]);
          await this.#checkHistory();
          continue;
        }
        return new RegistryLease({
          backend: this.backend,
          workerId,
          lastTimestamp: floorAfterSettle(Number(row['last_timestamp']), Number(row['settled_at'])),
          reportedAt: Number(row['reported_at']),
          ttlMs: this.#ttlMs,
          write: (kind, report) => this.#write(kind, workerId, token, report),
        });
      }
      const [live] = (await this.#query(this.#sql.countLive, [this.#name])).rows;
      throw workerIdsExhausted(this.backend, plan, Number(live?.['n'] ?? 0));
    } catch (error) {
      throw this.#unavailable(error, registryDoing.acquire);
    }
  }

  /**
   * The worker IDs to try, in the order every registry tries them (common.ts, candidateWorkerIds:
   * this identity's free IDs, then other free IDs, then IDs no row names yet, lowest first), with
   * a recorded lastTimestamp below `below`, read from the database a page at a
   * time: a node reads the few rows it tries, never every row of the cluster, however many worker
   * IDs are held. `exists` says whether the ID has a row (claimed by UPDATE) or not (by INSERT).
   * The pages are only a preference: each claim is still one conditional statement, so rows that
   * change between pages cost a lost race, never a shared ID.
   */
  async *#candidates(
    plan: AcquirePlan,
    below: number,
  ): AsyncGenerator<{ workerId: number; exists: boolean }> {
    const tried = new Set<number>();
    // Filters the SQL leaves to JavaScript (exclude, only, the layout's limit): parameters past
    // 2^31 or lists of any length would not bind the same way in every dialect.
    const fits = (workerId: number) => !tried.has(workerId) && allows(plan, workerId, -1);
    if (plan.only !== undefined) {
      const [row] = (await this.#query(this.#sql.one, [this.#name, plan.only])).rows;
      if (row === undefined) {
        if (fits(plan.only)) yield { workerId: plan.only, exists: false };
      } else if (
        Number(row['live']) !== 1 &&
        allows(plan, plan.only, Number(row['last_timestamp']))
      ) {
        yield { workerId: plan.only, exists: true };
      }
      return;
    }
    for (const sql of [this.#sql.mine, this.#sql.free]) {
      const params =
        sql === this.#sql.mine
          ? [this.#name, plan.identity.host, plan.identity.port, below]
          : [this.#name, below];
      // Paged by worker ID: each page starts after the last ID the one before it returned.
      for (let after = -1; ; ) {
        const { rows } = await this.#query(sql, [...params, after]);
        for (const row of rows) {
          after = Number(row['worker_id']);
          if (!fits(after)) continue;
          tried.add(after);
          yield { workerId: after, exists: true };
        }
        if (rows.length < PAGE) break;
      }
    }
    // Runs of IDs no row names: each page gives where runs start and the next named ID after each.
    for (let from = 0; from < plan.maxWorkers; ) {
      const { rows } = await this.#query(this.#sql.gaps, [
        this.#name,
        this.#name,
        from,
        this.#name,
      ]);
      for (const row of rows) {
        const start = Number(row['gap_start']);
        const end = Math.min(
          row['next_used'] === null ? plan.maxWorkers : Number(row['next_used']),
          plan.maxWorkers,
        );
        for (let workerId = start; workerId < end; workerId++)
          if (fits(workerId)) yield { workerId, exists: false };
        from = Math.max(from, end);
      }
      if (rows.length < PAGE) return;
    }
  }

  async peers(): Promise<PeerTime[]> {
    await this.init();
    try {
      const { rows } = await this.#query(this.#sql.peers, [this.#name]);
      return rows.map((row) => ({
        workerId: Number(row['worker_id']),
        reportedAt: Number(row['reported_at']),
        ageMs: Math.max(0, Number(row['age_ms'])),
      }));
    } catch (error) {
      throw this.#unavailable(error, registryDoing.peers);
    }
  }

  async close(): Promise<void> {
    if (this.#ownsClient) await this.#client.close();
  }

  /**
   * Records a report for the holder of `token`, extending (renew) or ending (release) its lease.
   * Exactly one row matches while the lease is this holder's; none once another node took it.
   */
  async #write(
    kind: 'renew' | 'release',
    workerId: number,
    token: string,
    report: WorkerReport,
  ): Promise<number> {
    const { lastTimestamp, reportedAt } = report;
    const params =
      kind === 'renew'
        ? [
            this.#ttlMs,
            lastTimestamp,
            lastTimestamp,
            reportedAt,
            reportedAt,
            this.#name,
            workerId,
            token,
          ]
        : [lastTimestamp, reportedAt, this.#name, workerId, token];
    let matched: number;
    try {
      if (kind === 'renew' && this.#interleave !== undefined)
        await this.#interleave({
          point: 'before-renew-write',
          backend: this.backend,
          workerId,
          report,
        });
      matched = (await this.#query(this.#sql[kind], params)).affectedRows;
    } catch (error) {
      throw this.#unavailable(error, registryDoing[kind](workerId));
    }
    if (matched !== 1)
      throw leaseLost(
        this.backend,
        workerId,
        'its row has another holder, or the database is on a new history',
      );
    return this.#ttlMs;
  }

  /**
   * Grants nothing unless the database's history is the recorded one and settled: records a
   * first history, fences a new one (docs/workers.md, "When the database's history changes"),
   * and throws while a fence settles.
   */
  async #checkHistory(): Promise<void> {
    // Three reads at most: a record or fence by this node or another lands between two.
    for (let attempt = 1; ; attempt++) {
      const [row] = (await this.#query(this.#sql.readHistory, [])).rows;
      const history: RegistryHistory = {
        live: String(row?.['live']),
        recorded: row?.['recorded'] == null ? undefined : String(row['recorded']),
        used: Number(row?.['used']) === 1,
        settledAt: Number(row?.['settled_at'] ?? 0),
        nowMs: Number(row?.['now_ms']),
      };
      const verdict = judgeHistory(history);
      if (verdict === 'settled') return;
      if (verdict === 'settling' || attempt === 3)
        throw registrySettling(this.backend, this.#where, history);
      // Recorded or fenced by this node or another: read again to see which.
      if (verdict === 'record') await this.#query(this.#sql.recordHistory, [history.live]);
      else if (history.recorded === undefined)
        await this.#query(this.#sql.fenceMissing, [history.live, this.#settleMs]);
      else
        await this.#query(this.#sql.fenceChanged, [
          history.live,
          this.#settleMs,
          history.recorded,
          Number(row?.['fences'] ?? 0),
        ]);
    }
  }

  async #createTable(): Promise<void> {
    await this.#createIfMissing(this.#sql.createTable);
    await this.#createIfMissing(this.#sql.createHistoryTable);
  }

  async #createIfMissing(statement: string): Promise<void> {
    try {
      await this.#query(statement, []);
    } catch (error) {
      // No answer at all: asking again would wait out a second timeout (a start that cannot reach
      // the database failed after twice the timeout here, and after four times in all).
      if (saysNoAnswer(this.#unavailable(error, registryDoing.table).message)) throw error;
      // Several nodes creating the table at once can collide inside PostgreSQL's catalog even
      // with IF NOT EXISTS; if the table is there now, the race was lost harmlessly.
      const probe = statement === this.#sql.createTable ? this.#sql.probe : this.#sql.probeHistory;
      await this.#query(probe, []).catch(() => {
        throw error;
      });
    }
  }

  /** One statement on a connection of its own, bounded by the operation timeout. */
  #query(sql: string, params: readonly SqlValue[]): Promise<SqlResult> {
    return withDeadline(
      this.#timeoutMs,
      () => new Error(`no answer within ${this.#timeoutMs} ms`),
      (signal) =>
        this.#client.withConnection((connection) => connection.query(sql, params), {
          transaction: false,
          signal,
        }),
    );
  }

  /** `error` as REGISTRY_UNAVAILABLE in one line, saying what was being done (`doing`). */
  #unavailable(error: unknown, doing: string): IdMintError {
    return registryUnavailable(this.backend, this.#where, error, this.#causes, doing);
  }
}

/** Every statement, written once with `?` and `{now}`, the dialect's clock put in. */
function statements(table: string, dialect: SqlDialect) {
  const sql = (text: string) => text.replaceAll('{now}', dialect.nowMs);
  const live = `holder IS NOT NULL AND lease_expires_at > {now}`;
  const free = `(holder IS NULL OR lease_expires_at <= {now})`;
  const history = historyStatements(table, dialect);
  return {
    ...history,
    probeHistory: `SELECT 1 FROM ${REGISTRY_HISTORY_TABLE} WHERE 1 = 0`,
    createTable: `CREATE TABLE IF NOT EXISTS ${table} (
  name VARCHAR(128) NOT NULL,
  worker_id INTEGER NOT NULL,
  holder VARCHAR(64) NULL,
  host VARCHAR(255) NOT NULL DEFAULT '',
  port INTEGER NOT NULL DEFAULT 0,
  lease_expires_at BIGINT NOT NULL DEFAULT 0,
  last_timestamp BIGINT NOT NULL DEFAULT -1,
  reported_at BIGINT NOT NULL DEFAULT -1,
  reported_db_at BIGINT NOT NULL DEFAULT 0,
  fence BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (name, worker_id)
)`,
    probe: `SELECT 1 FROM ${table} WHERE 1 = 0`,
    // The reads of acquire, each bounded (PAGE rows) and walking the primary key (name, worker_id):
    // one worker ID's row; this identity's free rows; any free rows; the runs of IDs no row names.
    one: sql(
      `SELECT last_timestamp, CASE WHEN ${live} THEN 1 ELSE 0 END AS live FROM ${table} ` +
        `WHERE name = ? AND worker_id = ?`,
    ),
    mine: sql(
      `SELECT worker_id FROM ${table} WHERE name = ? AND host = ? AND port = ? AND ${free} AND
         last_timestamp < ? AND worker_id > ?
       ORDER BY worker_id ${dialect.limit(PAGE)}`,
    ),
    free: sql(
      `SELECT worker_id FROM ${table} WHERE name = ? AND ${free} AND last_timestamp < ? AND ` +
        `worker_id > ? ORDER BY worker_id ${dialect.limit(PAGE)}`,
    ),
    // A run starts at 0 or just after a named ID, where no row is; it ends at the next named ID.
    gaps: `SELECT g.gap_start, (SELECT MIN(n.worker_id) FROM ${table} n WHERE n.name = ? AND
         n.worker_id > g.gap_start) AS next_used
       FROM (SELECT 0 AS gap_start UNION ALL SELECT worker_id + 1 AS gap_start FROM ${table} WHERE
         name = ?) g
       WHERE g.gap_start >= ? AND NOT EXISTS (SELECT 1 FROM ${table} e WHERE e.name = ? AND
         e.worker_id = g.gap_start)
       ORDER BY g.gap_start ${dialect.limit(PAGE)}`,
    countLive: sql(`SELECT COUNT(*) AS n FROM ${table} WHERE name = ? AND ${live}`),
    // The fence column counts claims: a monotonic fencing token for anyone auditing the table.
    claim: sql(
      `UPDATE ${table} SET holder = ?, host = ?, port = ?, lease_expires_at = {now} + ?, fence =
         fence + 1
       WHERE name = ? AND worker_id = ? AND ${free} AND last_timestamp < ?`,
    ),
    insert: sql(
      dialect.insertIfAbsent(
        table,
        ['name', 'worker_id', 'holder', 'host', 'port', 'lease_expires_at', 'fence'],
        ['?', '?', '?', '?', '?', '{now} + ?', '1'],
      ),
    ),
    held: sql(
      `SELECT last_timestamp, reported_at, ${history.settled} AS settled, ${history.settledAt} ` +
        `AS settled_at FROM ${table} WHERE name = ? AND worker_id = ? AND holder = ?`,
    ),
    // A claim that found its history unsettled after all gives the row back as it was.
    unclaim: sql(
      `UPDATE ${table} SET holder = NULL, lease_expires_at = 0 WHERE name = ? AND worker_id = ? ` +
        `AND holder = ?`,
    ),
    // A renewal never lowers the record (one that lands after a later one changes nothing); the
    // larger value is chosen in the statement itself, so it is atomic. CASE rather than GREATEST,
    // which SQLite lacks. Release below stores the exact values.
    renew: sql(
      `UPDATE ${table} SET lease_expires_at = {now} + ?,
         last_timestamp = CASE WHEN last_timestamp > ? THEN last_timestamp ELSE ? END,
         reported_at = CASE WHEN reported_at > ? THEN reported_at ELSE ? END,
         reported_db_at = {now}
       WHERE name = ? AND worker_id = ? AND holder = ? AND ${history.onRecordedHistory}`,
    ),
    release: sql(
      `UPDATE ${table} SET holder = NULL, lease_expires_at = 0, last_timestamp = ?, reported_at =
         ?, reported_db_at = {now}
       WHERE name = ? AND worker_id = ? AND holder = ?`,
    ),
    peers: sql(
      `SELECT worker_id, reported_at, {now} - reported_db_at AS age_ms FROM ${table} WHERE ` +
        `name = ? AND ${live} AND reported_at >= 0`,
    ),
  };
}

/** Options for {@link connectSqlWorkerRegistry}: `operationTimeoutMs` also bounds connecting. */
export type ConnectSqlOptions = Omit<SqlWorkerRegistryOptions, 'client' | 'ownsClient' | 'where'>;

/** Connections per registry: statements are short and a node runs one renewal at a time. */
export const SQL_REGISTRY_POOL_SIZE = 2;

/** What {@link connectSqlWorkerRegistry} needs besides the registry's own options. */
export interface SqlRegistryConnection {
  /** `postgres`, `mysql`, `sqlite`: names the backend in messages before a driver exists. */
  readonly backend: string;
  /** Where the database is, without credentials (`db:5432`, a file), for messages. */
  readonly where: string;
  /** Opens the driver (loading it only now), each statement bounded by `timeoutMs`. */
  open(timeoutMs: number): Promise<SqlDriver>;
}

/**
 * Opens the SQL registry on the driver `connection` opens; its backend (src/backends/) says
 * which. The table is created if missing on first use.
 */
export async function connectSqlWorkerRegistry(
  connection: SqlRegistryConnection,
  options: ConnectSqlOptions = {},
): Promise<SqlWorkerRegistry> {
  const { backend, where } = connection;
  let client: SqlDriver;
  try {
    client = await connection.open(options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS);
  } catch (error) {
    throw registryUnavailable(backend, where, error, new BackendCauses(), registryDoing.connecting);
  }
  // The table is created on first use, not here: a node may open the registry while the database
  // is down (and start from the weak-dependency cache).
  return new SqlWorkerRegistry({ ...options, client, ownsClient: true, where });
}
