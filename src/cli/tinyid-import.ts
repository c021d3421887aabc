import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { IdMintError, isIdMintError } from '../core/errors.ts';
import {
  MAX_SEGMENT_ID,
  checkSequence,
  checkStep,
  checkTag,
  type TagSequence,
} from '../core/segment-limits.ts';
import type { SegmentStore, TagRecord } from '../ports/segment-store.ts';
import { isRefusal, redactUrl, urlScheme } from '../shared/connection-url.ts';
import { failureCause } from '../shared/failure-cause.ts';
import { parseSqlServerUrl } from '../backends/sql-backend.ts';
import { MysqlDriver } from '../sql/mysql-driver.ts';
import { PostgresDriver } from '../sql/postgres-driver.ts';
import type { SqlDriver } from '../sql/sql-driver.ts';
import type { TinyIdTokenRow } from '../config/tinyid-tokens.ts';

/**
 * `idmint db import --from-tinyid URL`: TinyId's tables (`tiny_id_info`, `tiny_id_token`, as
 * tinyid-server/db.sql creates them) brought into idmint once, so TinyId's clients switch by
 * being pointed at idmint, with no setting of theirs changed.
 *
 * Each biz_type becomes a tag (created, or raised and re-sequenced) whose next ID is the first of
 * its class above TinyId's `max_id`: TinyId writes `max_id` (the end of a segment) before it
 * serves the segment, so every ID TinyId ever issued is at most `max_id`. Nothing is lowered, so a
 * second run changes nothing and a run after TinyId issued more only raises. Tokens go to the
 * file `auth.tinyidTokenFile` reads (see config/tinyid-tokens.ts for why a file).
 */

/** One row of TinyId's `tiny_id_info`, as read. */
export interface TinyIdInfoRow {
  readonly bizType: string;
  /** TinyId's last ID handed to a segment: every ID it issued is at most this. */
  readonly maxId: bigint;
  /** TinyId's step: a width in IDs' numbers, `delta` apart. */
  readonly step: number;
  readonly delta: number;
  readonly remainder: number;
}

/** TinyId's tables as read. */
export interface TinyIdTables {
  readonly info: readonly TinyIdInfoRow[];
  readonly tokens: readonly TinyIdTokenRow[];
}

/** What the import does to one biz_type. */
export type TagPlan =
  | {
      readonly action: 'create';
      readonly tag: string;
      readonly from: TinyIdInfoRow;
      readonly startId: bigint;
      readonly step: number;
      readonly sequence: TagSequence;
    }
  | {
      readonly action: 'change' | 'unchanged';
      readonly tag: string;
      readonly from: TinyIdInfoRow;
      readonly startId: bigint;
      readonly step: number;
      readonly sequence: TagSequence;
      readonly current: TagRecord;
      /** True when max_id is below startId and must be raised to it. */
      readonly raise: boolean;
      /** True when step, delta or remainder differ from TinyId's. */
      readonly resequence: boolean;
    }
  | { readonly action: 'refuse'; readonly tag: string; readonly reason: string };

/** Reads TinyId's two tables from its database (MySQL/MariaDB or PostgreSQL). */
export async function readTinyIdTables(url: string, timeoutMs: number): Promise<TinyIdTables> {
  const scheme = urlScheme(url)?.toLowerCase();
  const mysql = scheme === 'mysql' || scheme === 'mariadb';
  const postgres = scheme === 'postgres' || scheme === 'postgresql';
  const shown = JSON.stringify(redactUrl(url));
  if (!mysql && !postgres) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `--from-tinyid names TinyId's database: a mysql:// or postgres:// URL, got ${shown}`,
    );
  }
  // Read as the segment store's URLs are (src/backends/), so the same forms are accepted.
  const address = mysql
    ? parseSqlServerUrl(url, { defaultPort: 3306 })
    : parseSqlServerUrl(url, { defaultPort: 5432, hostInQuery: true });
  if (isRefusal(address))
    throw new IdMintError('INVALID_ARGUMENT', `--from-tinyid ${shown}: ${address.refused}`);
  const options = { poolSize: 1, timeoutMs };
  return readTables(mysql, address, options, timeoutMs).catch((error: unknown) => {
    if (isIdMintError(error)) throw error;
    const code = (error as { code?: unknown }).code;
    // MySQL's ER_NO_SUCH_TABLE, PostgreSQL's undefined_table: a database, but not TinyId's.
    if (code === 'ER_NO_SUCH_TABLE' || code === '42P01')
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `--from-tinyid ${shown}: no TinyId tables there (${(error as Error).message})`,
        { cause: error },
      );
    const cause = failureCause(error) ?? (error instanceof Error ? error.message : String(error));
    throw new IdMintError('STORE_UNAVAILABLE', `--from-tinyid ${shown}: ${cause}`, {
      cause: error,
    });
  });
}

/** TinyId's two tables, read in one connection. */
async function readTables(
  mysql: boolean,
  address: Exclude<ReturnType<typeof parseSqlServerUrl>, { refused: string }>,
  options: { poolSize: number; timeoutMs: number },
  timeoutMs: number,
): Promise<TinyIdTables> {
  const driver: SqlDriver = mysql
    ? await MysqlDriver.open(address, options)
    : await PostgresDriver.open(address, options);
  try {
    return await driver.withConnection(
      async (db) => {
        const info = await db.query(
          'SELECT biz_type, max_id, step, delta, remainder FROM tiny_id_info ORDER BY id',
          [],
        );
        const tokens = await db.query('SELECT token, biz_type FROM tiny_id_token ORDER BY id', []);
        return {
          info: info.rows.map((row) => ({
            bizType: String(row['biz_type']),
            maxId: BigInt(String(row['max_id'])),
            // TinyId's step column is nullable (DEFAULT '0'): a null step issues nothing there.
            step: Number(row['step'] ?? 0),
            delta: Number(row['delta']),
            remainder: Number(row['remainder']),
          })),
          tokens: tokens.rows.map((row) => ({
            token: String(row['token']),
            bizType: String(row['biz_type']),
          })),
        };
      },
      { transaction: false, signal: AbortSignal.timeout(timeoutMs) },
    );
  } finally {
    await driver.close();
  }
}

/**
 * The first ID above every ID TinyId issued for `row`, in its class: the least `x > max_id` with
 * `x ≡ remainder (mod delta)`.
 */
export function firstIdAbove(row: Pick<TinyIdInfoRow, 'maxId' | 'delta' | 'remainder'>): bigint {
  const delta = BigInt(row.delta);
  const above = row.maxId + 1n;
  const offset = (((BigInt(row.remainder) - above) % delta) + delta) % delta;
  return above + offset;
}

/**
 * TinyId's step is a width (a segment `(max_id, max_id + step]` holds `step / delta` IDs); an
 * idmint step counts IDs: `ceil(step / delta)` gives segments as wide as TinyId's.
 */
export function idmintStep(row: Pick<TinyIdInfoRow, 'step' | 'delta'>): number {
  return Math.ceil(row.step / row.delta);
}

/** What importing `info` into a store whose tags are `current` would do, row by row. */
export function planTags(
  info: readonly TinyIdInfoRow[],
  current: ReadonlyMap<string, TagRecord>,
): TagPlan[] {
  return info.map((row): TagPlan => {
    let tag: string;
    let sequence: TagSequence;
    let step: number;
    try {
      tag = checkTag(row.bizType);
      sequence = checkSequence(row.delta, row.remainder);
      if (row.step < 1) throw new IdMintError('INVALID_ARGUMENT', `step ${row.step} issues no ID`);
      step = checkStep(idmintStep(row));
      if (row.maxId < 0n) throw new IdMintError('INVALID_ARGUMENT', `max_id ${row.maxId} < 0`);
    } catch (error) {
      if (!isIdMintError(error)) throw error;
      return { action: 'refuse', tag: row.bizType, reason: error.message };
    }
    const startId = firstIdAbove(row);
    if (startId > MAX_SEGMENT_ID - BigInt(step) * BigInt(sequence.delta)) {
      return { action: 'refuse', tag, reason: `max_id ${row.maxId} leaves no room for a range` };
    }
    const existing = current.get(tag);
    if (existing === undefined)
      return { action: 'create', tag, from: row, startId, step, sequence };
    const raise = existing.maxId < startId;
    const resequence =
      existing.step !== step ||
      (existing.delta ?? 1) !== sequence.delta ||
      (existing.remainder ?? 0) !== sequence.remainder;
    const action = raise || resequence ? 'change' : 'unchanged';
    return {
      action,
      tag,
      from: row,
      startId,
      step,
      sequence,
      current: existing,
      raise,
      resequence,
    };
  });
}

function sequenceText(step: number, delta: number, remainder: number): string {
  return `step ${step}, delta ${delta}, remainder ${remainder}`;
}

/** The plan of one tag, as `db import` prints it. */
export function planLine(plan: TagPlan, done: boolean): string {
  if (plan.action === 'refuse') return `tag ${plan.tag}: refused: ${plan.reason}`;
  const tinyId = `TinyId's max_id ${plan.from.maxId}, step ${plan.from.step}`;
  const shape = sequenceText(plan.step, plan.sequence.delta, plan.sequence.remainder);
  if (plan.action === 'create') {
    const verb = done ? 'created' : 'create';
    return `tag ${plan.tag}: ${verb}, first ID ${plan.startId}, ${shape} (${tinyId})`;
  }
  if (plan.action === 'unchanged')
    return `tag ${plan.tag}: unchanged, next ID at or above ${plan.current.maxId} (${tinyId})`;
  const changes: string[] = [];
  if (plan.raise) changes.push(`max_id ${plan.current.maxId} -> ${plan.startId}`);
  if (plan.resequence) {
    const { step, delta, remainder } = plan.current;
    const was = sequenceText(step, delta ?? 1, remainder ?? 0);
    changes.push(`${was} -> ${shape}`);
  }
  return `tag ${plan.tag}: ${done ? 'changed' : 'change'} ${changes.join('; ')} (${tinyId})`;
}

/**
 * Carries out one tag's plan on `store`, a set of `setSize` databases (1: a store of its own);
 * resolves true when it changed anything. A refused or unchanged plan does nothing.
 *
 * In a set every database's row is raised, each to the first ID of its own class at or above
 * startId: the merged record the plan saw holds the highest row only, and a lower one could still
 * reach IDs TinyId issued. A row already above is left alone, so a second run changes nothing.
 */
export async function applyTagPlan(
  store: SegmentStore,
  plan: TagPlan,
  setSize = 1,
): Promise<boolean> {
  if (plan.action === 'refuse') return false;
  if (plan.action === 'unchanged' && setSize === 1) return false;
  const { delta, remainder } = plan.sequence;
  if (plan.action === 'create') {
    await store.createTag({
      tag: plan.tag,
      step: plan.step,
      startId: plan.startId,
      description: 'imported from TinyId (tiny_id_info)',
      delta,
      remainder,
    });
    return true;
  }
  // The class first, then the position: either order is safe on a store of its own (every later
  // ID is above max_id), and a raised row is then already in its final class.
  if (plan.resequence) await store.updateTag(plan.tag, { step: plan.step, delta, remainder });
  let raised = false;
  if (setSize === 1) {
    if (plan.raise) raised = await store.raise(plan.tag, plan.startId);
  } else {
    const n = BigInt(setSize);
    for (let r = 0n; r < n; r++) {
      const atLeast = plan.startId + ((((r - plan.startId) % n) + n) % n);
      if (await store.raise(plan.tag, atLeast)) raised = true;
    }
  }
  return plan.resequence || raised;
}

/** The token file's text for `rows`: tiny_id_token's rows in its order, one a line. */
export function tokenFileText(rows: readonly TinyIdTokenRow[]): string {
  const lines = rows.map(
    (row) => `  ${JSON.stringify({ token: row.token, bizType: row.bizType })}`,
  );
  return `[\n${lines.join(',\n')}\n]\n`;
}

/**
 * What writing the token file would do: 'unchanged' when it holds exactly `text` already (a
 * second run rewrites nothing), else 'write'.
 */
export function tokenFilePlan(path: string, text: string): 'write' | 'unchanged' {
  return existsSync(path) && readFileSync(path, 'utf8') === text ? 'unchanged' : 'write';
}

/**
 * The token file, written readable by its owner only (it holds secrets) and whole or not at all:
 * `prepare` writes a temporary file beside it (so a path that cannot be written stops the import
 * before any tag changes), `commit` renames it over the file, `discard` removes it.
 */
export function prepareTokenFile(path: string, text: string): { commit(): void; discard(): void } {
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, text, { mode: 0o600 });
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `the token file ${JSON.stringify(path)} cannot be written (${reason})`,
    );
  }
  return {
    commit: () => renameSync(temporary, path),
    discard: () => rmSync(temporary, { force: true }),
  };
}

/**
 * `idmint db import --from-tinyid`: the plan for every biz_type (refused rows stop the import
 * before anything changes), then, unless a dry run, init, the tags and the token file.
 */
export async function importTinyId(
  store: SegmentStore,
  tables: TinyIdTables,
  options: { dryRun: boolean; tokensFile: string; setSize: number; from: string },
): Promise<string[]> {
  const { dryRun, tokensFile, setSize } = options;
  if (!dryRun) await store.init();
  const current = new Map<string, TagRecord>();
  for (const row of tables.info) {
    const record = await store.getTag(row.bizType).catch((error: unknown) => {
      // A biz_type idmint cannot name is refused by the plan, with its reason.
      if (isIdMintError(error, 'INVALID_ARGUMENT')) return undefined;
      throw error;
    });
    if (record !== undefined) current.set(record.tag, record);
  }
  const plans = planTags(tables.info, current);
  const refused = plans.filter((plan) => plan.action === 'refuse');
  const lines = [
    `TinyId's database ${options.from}: ${tables.info.length} tags, ` +
      `${tables.tokens.length} token rows`,
  ];
  const tokenText = tokenFileText(tables.tokens);
  const tokens = tables.tokens.length === 0 ? undefined : tokenFilePlan(tokensFile, tokenText);
  if (dryRun || refused.length > 0) {
    lines.push(...plans.map((plan) => planLine(plan, false)));
    if (tokens !== undefined)
      lines.push(`tokens: ${tokens === 'write' ? 'write' : 'unchanged'} ${tokensFile}`);
    if (refused.length > 0) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `${refused.length} of TinyId's tags cannot be imported, so nothing was: ` +
          `${lines
            .slice(1)
            .filter((line) => line.includes(': refused: '))
            .join('; ')}`,
      );
    }
    lines.push('dry run: nothing changed');
    return lines;
  }
  const file = tokens === 'write' ? prepareTokenFile(tokensFile, tokenText) : undefined;
  try {
    for (const plan of plans) lines.push(await applyPlan(store, plan, setSize));
  } catch (error) {
    file?.discard();
    throw error;
  }
  file?.commit();
  if (tokens !== undefined)
    lines.push(`tokens: ${tokens === 'write' ? 'written to' : 'unchanged in'} ${tokensFile}`);
  return lines;
}

/** Carries out one tag's plan and says what it did. */
async function applyPlan(store: SegmentStore, plan: TagPlan, setSize: number): Promise<string> {
  const changed = await applyTagPlan(store, plan, setSize);
  // In a set the plan saw the highest row only: a lower one may have been raised (or not).
  if (changed && plan.action === 'unchanged')
    return `tag ${plan.tag}: changed: rows of the set below ${plan.startId} raised`;
  if (!changed && plan.action === 'change') return `tag ${plan.tag}: unchanged`;
  return planLine(plan, true);
}
