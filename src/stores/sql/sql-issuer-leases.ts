import { IdMintError } from '../../core/errors.ts';
import { checkTag } from '../../core/segment-limits.ts';
import type { IssuerBusy, IssuerLease, IssuerLeases } from '../../ports/issuer-lease.ts';
import type { SqlConnection, SqlDialect } from '../../sql/sql-driver.ts';
import {
  CLAIM_ATTEMPTS,
  ISSUER_TABLE,
  checkClaim,
  checkHolding,
  issuerBusy,
  issuerLeaseLost,
  issuerTagNotFound,
  type IssuerInterleave,
} from '../issuer-support.ts';
import { HISTORY_TABLE, toBigInt } from '../store-support.ts';

/** Runs `run` on one connection of the store (a transaction when asked), within its timeout. */
export type SqlCall = <T>(
  operation: string,
  transaction: boolean,
  run: (db: SqlConnection) => Promise<T>,
  absent?: () => T,
) => Promise<T>;

/** What {@link SqlIssuerLeases} needs from its segment store. */
export interface SqlIssuerLeasesOptions {
  readonly backend: string;
  readonly dialect: SqlDialect;
  /** The segment table whose tags the leases are of. */
  readonly table: string;
  readonly call: SqlCall;
  /** The store's history check: records the live history, fencing it first when it is new. */
  readonly verifyHistory: () => Promise<void>;
  readonly interleave?: IssuerInterleave;
}

/**
 * Issuer leases in {@link ISSUER_TABLE}, one row per (segment table, tag), beside the segment
 * table in the same database:
 *
 * ```
 * idmint_issuer(segment_table, biz_tag, node, address, epoch, expires_at)
 * ```
 *
 * `expires_at` is in ms by the database's clock (`dialect.nowMs`), and every comparison with it
 * reads that clock in the statement itself, so no node's clock times a lease. A claim is one
 * conditional UPDATE (`epoch = epoch + 1 ... WHERE expires_at <= now OR node = ?`): the database
 * runs it on the row under its lock, so of any number of claimers racing on an expired lease
 * exactly one matches the row. The row is made first by an insert that does nothing when it
 * exists (epoch 0, expired), a statement of its own: on MySQL an INSERT IGNORE's shared lock on
 * an existing row, upgraded by the UPDATE in the same transaction, deadlocks two claimers. The
 * epoch is read back with RETURNING, or in the UPDATE's transaction while it holds the row lock
 * (MySQL, MariaDB). Renewal and release match node and epoch, so a late write of an old holding
 * finds a row whose epoch moved on and changes nothing. Rows are never deleted (a tag deleted and
 * created again goes on from its old epoch, never reusing one).
 */
export class SqlIssuerLeases implements IssuerLeases {
  readonly #backend: string;
  readonly #table: string;
  readonly #supportsReturning: boolean;
  readonly #call: SqlCall;
  readonly #interleave: IssuerInterleave | undefined;
  readonly #sql: ReturnType<typeof issuerStatements>;
  readonly #dialect: SqlDialect;
  readonly #verifyHistory: () => Promise<void>;

  constructor(options: SqlIssuerLeasesOptions) {
    this.#backend = options.backend;
    this.#table = options.table;
    this.#dialect = options.dialect;
    this.#supportsReturning = options.dialect.supportsReturning;
    this.#call = options.call;
    this.#interleave = options.interleave;
    this.#verifyHistory = options.verifyHistory;
    this.#sql = issuerStatements(options.table, options.dialect);
  }

  /** The CREATE TABLE of {@link ISSUER_TABLE}, for init. */
  get createTable(): string {
    return this.#sql.createTable;
  }

  async claimIssuer(
    tag: string,
    node: string,
    address: string,
    ttlMs: number,
  ): Promise<{ readonly held: true; readonly lease: IssuerLease } | IssuerBusy> {
    checkClaim(tag, node, address, ttlMs);
    // A database on a new history is fenced first, so that the settling guard sees the change.
    await this.#verifyHistory();
    for (let attempt = 1; ; attempt++) {
      await this.#prepareRow(tag);
      await this.#interleave?.({ point: 'before-claim', backend: this.#backend, tag, node });
      const epoch = await this.#call(
        'claimIssuer',
        !this.#supportsReturning,
        (db) => this.#claimOnce(db, tag, node, address, ttlMs),
        () => undefined,
      );
      if (epoch !== undefined) return { held: true, lease: { tag, node, address, epoch, ttlMs } };
      const holder = await this.currentIssuer(tag);
      if (holder !== undefined) return holder;
      if (await this.#settling(ttlMs)) throw historySettling(this.#backend, tag, ttlMs);
      // The live lease the claim lost to expired before the read: claim again. Three tries: each
      // lost to a lease live at the claim and expired a moment later, which takes a whole TTL.
      if (attempt >= CLAIM_ATTEMPTS)
        throw new IdMintError(
          'STORE_UNAVAILABLE',
          `${this.#backend} store: the issuer lease of tag "${tag}" changed hands during each ` +
            `of ${CLAIM_ATTEMPTS} claims`,
          { details: { backend: this.#backend, tag } },
        );
    }
  }

  /**
   * TAG_NOT_FOUND unless the tag's row exists; then makes the lease's row where there is none
   * (expired, epoch 0), creating the table where it is missing (a database `idmint db init` ran
   * on before idmint had issuer leases).
   */
  async #prepareRow(tag: string): Promise<void> {
    const found = await this.#call(
      'claimIssuer',
      false,
      async (db) => (await db.query(this.#sql.tagExists, [tag])).rows.length > 0,
      () => false,
    );
    if (!found) throw issuerTagNotFound(tag);
    await this.#call('claimIssuer', false, async (db) => {
      try {
        await db.query(this.#sql.insertRow, [tag]);
      } catch (error) {
        if (!this.#dialect.isMissingTable(error)) throw error;
        await this.#createTable(db);
        await db.query(this.#sql.insertRow, [tag]);
      }
    });
  }

  /** Creates {@link ISSUER_TABLE} if missing; two racing creations are not an error. */
  async #createTable(db: SqlConnection): Promise<void> {
    try {
      await db.query(this.#sql.createTable, []);
    } catch (error) {
      // Two `IF NOT EXISTS` racing on PostgreSQL: the loser trips over the winner's catalog row.
      if (!this.#dialect.isDuplicateKey(error)) throw error;
    }
  }

  /** Whether claims of `ttlMs` still wait for a new history to settle (see issuerStatements). */
  #settling(ttlMs: number): Promise<boolean> {
    return this.#call(
      'claimIssuer',
      false,
      async (db) => (await db.query(this.#sql.settling, [ttlMs])).rows.length > 0,
    );
  }

  /** The claim's conditional write: the new epoch, or undefined when a live lease stood. */
  async #claimOnce(
    db: SqlConnection,
    tag: string,
    node: string,
    address: string,
    ttlMs: number,
  ): Promise<bigint | undefined> {
    const params = [node, address, ttlMs, tag, node, ttlMs];
    if (this.#supportsReturning) {
      const row = (await db.query(this.#sql.claimReturning, params)).rows[0];
      return row === undefined ? undefined : toBigInt(row['epoch'], 'epoch');
    }
    if ((await db.query(this.#sql.claim, params)).affectedRows !== 1) return undefined;
    // In the UPDATE's transaction, which holds the row's lock until commit: this epoch is ours.
    const row = (await db.query(this.#sql.readEpoch, [tag])).rows[0];
    return toBigInt(row?.['epoch'], 'epoch');
  }

  async renewIssuer(tag: string, node: string, epoch: bigint, ttlMs: number): Promise<void> {
    checkHolding(tag, node, epoch, ttlMs);
    await this.#interleave?.({ point: 'before-renew-write', backend: this.#backend, tag, node });
    const renewed = await this.#call(
      'renewIssuer',
      false,
      async (db) => (await db.query(this.#sql.renew, [ttlMs, tag, node, epoch])).affectedRows === 1,
      () => false,
    ).catch((error: unknown) => {
      if (this.#dialect.isMissingTable((error as { cause?: unknown }).cause)) return false;
      throw error;
    });
    if (!renewed) throw issuerLeaseLost(this.#backend, tag, epoch);
  }

  async releaseIssuer(tag: string, node: string, epoch: bigint): Promise<void> {
    checkHolding(tag, node, epoch);
    await this.#call(
      'releaseIssuer',
      false,
      async (db) => {
        await db.query(this.#sql.release, [tag, node, epoch]);
      },
      () => undefined,
    ).catch((error: unknown) => {
      if (!this.#dialect.isMissingTable((error as { cause?: unknown }).cause)) throw error;
    });
  }

  async currentIssuer(tag: string): Promise<IssuerBusy | undefined> {
    checkTag(tag);
    return this.#call(
      'currentIssuer',
      false,
      async (db) => {
        let row: Record<string, unknown> | undefined;
        try {
          row = (await db.query(this.#sql.live, [tag])).rows[0];
        } catch (error) {
          // No table: no lease was ever claimed in this database.
          if (this.#dialect.isMissingTable(error)) return undefined;
          throw error;
        }
        if (row === undefined) return undefined;
        const epoch = toBigInt(row['epoch'], 'epoch');
        return issuerBusy(row['node'], row['address'], epoch, row['remaining_ms']);
      },
      () => undefined,
    );
  }
}

/**
 * Every statement, written once with `?` and `{now}` (the database's clock in ms, read where the
 * statement runs). The segment table's name is a validated identifier, a literal here.
 */
/** STORE_UNAVAILABLE for a claim refused while a new history settles: retry after `ttlMs`. */
function historySettling(backend: string, tag: string, ttlMs: number): IdMintError {
  return new IdMintError(
    'STORE_UNAVAILABLE',
    `${backend} store: no claim of tag "${tag}" for ${ttlMs} ms after its database moved to a ` +
      "new history (a failover or a restore may have lost the last holder's lease)",
    { details: { backend, tag, ttlMs } },
  );
}

function issuerStatements(table: string, dialect: SqlDialect) {
  const sql = (text: string) => text.replaceAll('{now}', dialect.nowMs);
  const row = `${ISSUER_TABLE} WHERE segment_table = '${table}' AND biz_tag = ?`;
  // A new history (a failover to a replica that lagged, a restore) may have lost the latest claim
  // or renewal: its holder may still be issuing, unknown to the database. So for one TTL after a
  // fence that moved the history on (`fences` of 1 or more), no claim lands. That includes the
  // first record of a table that had rows: a restore into a database without idmint's own tables
  // lost the record and the leases with it. Only a table recorded empty (a fresh `idmint db init`,
  // `fences` 0: see recordedFences) had no leases to lose. The fence's update_time may be in whole
  // seconds (MySQL, SQLite), its instant up to 1 s later: settled only once update_time is below
  // the second of now - ttl - 1 s, so at least a TTL after the fence on every dialect. The TTL is
  // the claimer's: nodes of one cluster share it.
  const settling = sql(
    `SELECT 1 AS settling FROM ${HISTORY_TABLE} WHERE segment_table = '${table}' AND ` +
      `fences >= 1 AND update_time > ${dialect.timestampFromMs('({now} - ? - 1000)')}`,
  );
  const claim = sql(
    `UPDATE ${ISSUER_TABLE} SET node = ?, address = ?, epoch = epoch + 1, ` +
      `expires_at = {now} + ? WHERE segment_table = '${table}' AND biz_tag = ? ` +
      `AND (expires_at <= {now} OR node = ?) AND NOT EXISTS (${settling})`,
  );
  return {
    createTable:
      `CREATE TABLE IF NOT EXISTS ${ISSUER_TABLE} (` +
      'segment_table varchar(64) NOT NULL, biz_tag varchar(128) NOT NULL, ' +
      "node varchar(255) NOT NULL DEFAULT '', address varchar(255) NOT NULL DEFAULT '', " +
      'epoch bigint NOT NULL DEFAULT 0, expires_at bigint NOT NULL DEFAULT 0, ' +
      `PRIMARY KEY (segment_table, biz_tag))${dialect.tableOptions}`,
    tagExists: `SELECT 1 AS found FROM ${table} WHERE biz_tag = ?`,
    insertRow: dialect.insertIfAbsent(
      ISSUER_TABLE,
      ['segment_table', 'biz_tag', 'node', 'address', 'epoch', 'expires_at'],
      [`'${table}'`, '?', "''", "''", '0', '0'],
    ),
    claim,
    claimReturning: `${claim} RETURNING epoch`,
    settling,
    readEpoch: `SELECT epoch FROM ${row}`,
    // Never earlier than it was: a renewal the holder never heard back from (given up on, or
    // sent twice by a retry) may land last, after one it heard that granted more.
    renew: sql(
      `UPDATE ${ISSUER_TABLE} SET expires_at = ${dialect.greatest('expires_at', '{now} + ?')} ` +
        `WHERE segment_table = '${table}' AND biz_tag = ? AND node = ? AND epoch = ? ` +
        'AND expires_at > {now}',
    ),
    // The epoch stays: the next claim raises it, so no holding's epoch is ever given again.
    release:
      `UPDATE ${ISSUER_TABLE} SET expires_at = 0 WHERE segment_table = '${table}' ` +
      'AND biz_tag = ? AND node = ? AND epoch = ?',
    live: sql(
      `SELECT node, address, epoch, expires_at - {now} AS remaining_ms FROM ${row} ` +
        'AND expires_at > {now}',
    ),
  };
}
