import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { MAX_SEGMENT_ID } from '../../core/segment-limits.ts';
import {
  DEFAULT_SEGMENT_STORE_URL,
  SEGMENT_STORE_URL_FORMS,
} from '../../backends/open-segment-store.ts';
import { openConfiguredStore, segmentFenceMargin } from '../../backends/open-configured.ts';
import { redactUrl } from '../../shared/connection-url.ts';
import {
  DEFAULT_SEGMENT_TABLE,
  DEFAULT_STORE_TIMEOUT_MS,
  FENCE_RANGES_BOUNDS,
  HISTORY_TABLE,
  describeMargin,
} from '../../stores/store-support.ts';
import type {
  FenceMargin,
  FenceReport,
  FenceRequest,
  SegmentStore,
  StoreHistory,
  StoreHistoryEvent,
} from '../../ports/segment-store.ts';
import { integerFlag, parseCommandArgs } from '../args.ts';
import { configFromFlags } from '../config-flags.ts';
import { backendFailure } from '../environment-errors.ts';
import type { MultiSegmentStore, SetJoinReport } from '../../stores/multi/multi-segment-store.ts';
import type { CliCommand } from '../io.ts';
import { ISSUER_TABLE } from '../../stores/issuer-support.ts';

const SUBCOMMANDS = ['init', 'history', 'fence', 'import'] as const;

export const dbCommand: CliCommand = {
  name: 'db',
  summary:
    'create the segment table (db init), show its history (db history), fence it (db fence), ' +
    "import TinyId's tags and tokens (db import)",
  help: `Usage: idmint db init [--store URL | --stores URL,... [--replace INDEX]] [--table NAME]
                      [--timeout MS]
       idmint db history [--store URL | --stores URL,...] [--table NAME] [--timeout MS]
       idmint db fence [--margin IDS | --ranges N] [--tag TAG] [--if-fences N]
                       [--store URL | --stores URL,...] [--table NAME] [--timeout MS]
       idmint db import --from-tinyid URL [--tokens-file PATH] [--dry-run]
                       [--store URL | --stores URL,...] [--table NAME] [--timeout MS]

init: creates the segment table (Leaf's leaf_alloc layout) if it is missing, adds idmint's columns
to one that lacks them (opaque, periodic, delta and remainder, ordering), creates idmint's history
table (${HISTORY_TABLE}) and issuer lease table (${ISSUER_TABLE}, for cluster-ordered tags), and
records the database's history; nothing else: no tags. Safe to run any number of times. An
existing Leaf table is used as it is; one idmint has no record of is fenced once (every tag raised
by the margin), since idmint cannot know what happened to it before.

With a set of databases (--stores, or segment.stores / IDMINT_SEGMENT_STORES), init forms the set:
each table gets the id_offset and id_increment columns, and every tag a row in every database,
database r issuing IDs ≡ r (mod N), each above every ID any of them issued before. Run it after
creating a set, after adding a database to it (N to N+1) or to join a Leaf table to it; every
database must answer. Each database records the set's members, so none can be left out later,
whatever state a run cut short leaves: run it again with the same list. Safe while nodes run:
nodes still configured with the old list are refused from then on (restart them with the new
one). docs/segments.md, Several databases.

history: the database's history now (PostgreSQL's system and timeline, MySQL/MariaDB's server_id,
Redis's replication ID), the one recorded for the table, and how many fences it has had. Where they
differ, the next allocation fences every tag first.

fence: raises every tag's max_id (or one tag's) by a margin and records the history, at once, for
what the database cannot reveal: a restore from a dump or backup that kept its history, a hand
edit of max_id. A promotion or a restart of Redis is fenced by the nodes themselves. Each run
fences once more (safe: nothing is ever lowered); with --if-fences N it fences only while the
table has had exactly N fences (as db history shows), so a retried run does nothing twice.
docs/operations.md, After a failover or a restore.

import: TinyId's tables (tiny_id_info, tiny_id_token) from its MySQL/MariaDB or PostgreSQL
database at --from-tinyid, once, so TinyId's clients switch by being pointed at idmint. Runs init
first, then makes each biz_type a tag whose next ID is the first of its class above TinyId's
max_id (above every ID TinyId issued), with TinyId's delta and remainder and step
ceil(step / delta) (TinyId's step is a width); a tag that exists is raised and re-sequenced,
never lowered. Writes tiny_id_token's rows to --tokens-file (default: the configured
auth.tinyidTokenFile), mode 0600. Safe to run again: a second run changes nothing, a run after
TinyId issued more raises. --dry-run prints the plan and changes nothing. docs/api.md, Moving
from TinyId.

Options:
  -s, --store URL     the segment store (default: the configured one, IDMINT_SEGMENT_STORE or
                      the config file in IDMINT_CONFIG, else ${DEFAULT_SEGMENT_STORE_URL}), one of:
${SEGMENT_STORE_URL_FORMS.map((form) => `                        ${form}`).join('\n')}
                      Redis keeps tags as hashes and needs no table.
      --stores URLS   a set of databases, comma-separated, in their order (default: the
                      configured segment.stores); replaces --store
      --replace INDEX init: the database at INDEX of --stores is an empty one replacing the set's
                      database there, lost for good (never use that one again): its rows start
                      above every ID the lost one can have issued
  -t, --table NAME    table name (default: the configured one, else ${DEFAULT_SEGMENT_TABLE})
      --timeout MS    give up on the database after MS milliseconds
                      (default ${DEFAULT_STORE_TIMEOUT_MS})
      --margin IDS    fence: raise each tag by exactly IDS (1 to ${MAX_SEGMENT_ID})
      --ranges N      fence: raise each tag by N of its largest ranges, max(segment.maxStep, its
                      step), ${FENCE_RANGES_BOUNDS.min} to ${FENCE_RANGES_BOUNDS.max}
                      (default: the configured segment.fenceRanges)
      --tag TAG       fence: only this tag
      --if-fences N   fence: only if the table has had exactly N fences
      --from-tinyid URL  import: TinyId's database, mysql://... or postgres://...
      --tokens-file PATH import: where tiny_id_token's rows go (auth.tinyidTokenFile)
      --dry-run       import: print the plan, change nothing
  -h, --help          show this help`,

  async run(argv, io) {
    const { values, positionals } = parseCommandArgs(
      argv,
      {
        store: { type: 'string', short: 's' },
        stores: { type: 'string' },
        table: { type: 'string', short: 't' },
        timeout: { type: 'string' },
        replace: { type: 'string' },
        margin: { type: 'string' },
        ranges: { type: 'string' },
        tag: { type: 'string' },
        'if-fences': { type: 'string' },
        'from-tinyid': { type: 'string' },
        'tokens-file': { type: 'string' },
        'dry-run': { type: 'boolean' },
      },
      { min: 1, max: 1, name: 'subcommand' },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    const sub = positionals[0] as (typeof SUBCOMMANDS)[number];
    if (!SUBCOMMANDS.includes(sub)) {
      const known = SUBCOMMANDS.join(', ');
      const message = `unknown db subcommand "${positionals[0]}"; the subcommands are: ${known}`;
      throw new IdMintError('INVALID_ARGUMENT', message);
    }
    for (const flag of ['margin', 'ranges', 'tag', 'if-fences'] as const) {
      if (sub !== 'fence' && values[flag] !== undefined) {
        throw new IdMintError('INVALID_ARGUMENT', `--${flag} belongs to "idmint db fence"`);
      }
    }
    for (const flag of ['from-tinyid', 'tokens-file', 'dry-run'] as const) {
      if (sub !== 'import' && values[flag] !== undefined) {
        throw new IdMintError('INVALID_ARGUMENT', `--${flag} belongs to "idmint db import"`);
      }
    }
    const fromTinyId = values['from-tinyid'];
    if (sub === 'import' && fromTinyId === undefined) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        "idmint db import needs --from-tinyid URL: TinyId's database",
      );
    }
    if (sub !== 'init' && values.replace !== undefined) {
      throw new IdMintError('INVALID_ARGUMENT', '--replace belongs to "idmint db init"');
    }
    if (values.store !== undefined && values.stores !== undefined) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        '--store and --stores name the database(s) twice: give one of them',
      );
    }
    // Without flags, the store `idmint serve` would use (environment and IDMINT_CONFIG file).
    const loaded = configFromFlags({}).config;
    const configured = loaded.segment;
    const fence = fenceMarginFlags(values.margin, values.ranges, segmentFenceMargin(configured));
    const rawIfFences = values['if-fences'];
    const ifFences =
      rawIfFences === undefined
        ? undefined
        : integerFlag('if-fences', rawIfFences, 0, 0, 2 ** 53 - 1);
    const table = values.table ?? configured.table;
    const timeoutMs = integerFlag('timeout', values.timeout, configured.timeoutMs, 1, 600_000);
    const listed = values.stores
      ?.split(',')
      .map((url) => url.trim())
      .filter((url) => url !== '');
    const urls = listed ?? (values.store === undefined ? configured.stores : []);
    const set = urls.length > 0;
    if (values.replace !== undefined && !set) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        '--replace names a database of a set: give the set with --stores',
      );
    }
    const replacing = values.replace;
    const replace =
      replacing === undefined
        ? undefined
        : integerFlag('replace', replacing, 0, 0, urls.length - 1);
    const url = set ? (urls[0] as string) : (values.store ?? configured.store);
    const source = set
      ? values.stores !== undefined
        ? '--stores'
        : 'IDMINT_SEGMENT_STORES'
      : values.store !== undefined
        ? '--store'
        : 'IDMINT_SEGMENT_STORE';
    const setting = [{ url, role: 'segment-store' as const, name: source }];
    // What the store fences of itself (init, or an allocation finding a new history) is told here.
    const fenced: StoreHistoryEvent[] = [];
    const onHistory = (event: StoreHistoryEvent) => fenced.push(event);
    // init and import run init() themselves; history and fence open the store as every command
    // does (SQLite's embedded store is initialized when opened, a server's is not). The flags
    // stand in for the configured database(s), table and timeout; the rest (the pool size) is as
    // configured.
    const dryRun = values['dry-run'] === true;
    // TinyId's tables are read before the store is opened: a wrong URL changes nothing.
    // Loaded only for import: no other command pays for TinyId's module and its drivers' code.
    const importer = sub === 'import' ? await import('../tinyid-import.ts') : undefined;
    const tinyId =
      fromTinyId === undefined || importer === undefined
        ? undefined
        : await importer.readTinyIdTables(fromTinyId, timeoutMs);
    const tokensFile = values['tokens-file'] ?? loaded.auth.tinyidTokenFile;
    if (tinyId !== undefined && tinyId.tokens.length > 0 && tokensFile === '') {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `tiny_id_token has ${tinyId.tokens.length} rows: give --tokens-file PATH ` +
          '(then set auth.tinyidTokenFile to it) so its clients keep their tokens',
      );
    }
    const noInit = sub === 'init' || sub === 'import';
    const opening = openConfiguredStore(
      { ...configured, store: url, stores: set ? urls : [], table, timeoutMs },
      { fence, source, onHistory, verify: false, ...(noInit ? { init: false } : {}) },
    );
    const store: SegmentStore = await opening.catch(async (error: unknown) => {
      // A store URL given on the command line is a usage error (exit 2), not a failure of the work.
      if (isIdMintError(error, 'CONFIG_INVALID'))
        throw new IdMintError('INVALID_ARGUMENT', error.message);
      throw (await backendFailure(error, setting)) ?? error;
    });
    const request: FenceRequest = {
      margin: fence,
      ...(values.tag === undefined ? {} : { tag: values.tag }),
      ...(ifFences === undefined ? {} : { ifFences }),
    };
    let lines: string[];
    try {
      if (sub === 'history') lines = historyLines(await store.history(), table);
      else if (sub === 'fence')
        lines = fenceLines(await store.fence(request), table, fence, ifFences);
      else if (importer !== undefined && tinyId !== undefined)
        lines = await importer.importTinyId(store, tinyId, {
          dryRun,
          tokensFile,
          setSize: set ? urls.length : 1,
          from: redactUrl(fromTinyId ?? ''),
        });
      else if (set) lines = await initSet(store as MultiSegmentStore, urls, table, replace);
      else lines = await initOne(store, url, table);
    } catch (error) {
      throw (await backendFailure(error, setting)) ?? error;
    } finally {
      await store.close();
    }
    const told = fenced
      .filter((event) => event.action === 'fenced' && (event.tags ?? 0) > 0)
      .map(fencedLine);
    await io.out(`${[...lines, ...told].join('\n')}\n`);
    return 0;
  },
};

/** The margin --margin or --ranges names, else the configured one. */
function fenceMarginFlags(
  margin: string | undefined,
  ranges: string | undefined,
  configured: FenceMargin,
): FenceMargin {
  if (margin !== undefined && ranges !== undefined) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      '--margin and --ranges both size the fence: give one of them',
    );
  }
  if (margin !== undefined) {
    const ids = /^[1-9][0-9]{0,18}$/.test(margin) ? BigInt(margin) : 0n;
    if (ids < 1n || ids > MAX_SEGMENT_ID) {
      const allowed = `an integer from 1 to ${MAX_SEGMENT_ID}`;
      throw new IdMintError('INVALID_ARGUMENT', `--margin must be ${allowed}, got "${margin}"`);
    }
    return { ids };
  }
  if (ranges === undefined || 'ids' in configured) return configured;
  const { min, max } = FENCE_RANGES_BOUNDS;
  return { ranges: integerFlag('ranges', ranges, 0, min, max), maxStep: configured.maxStep };
}

/** "no fence" (a table recorded empty: see recordedFences), "1 fence", "3 fences". */
function fences(count: number): string {
  if (count === 0) return 'no fence';
  return `${count} fence${count === 1 ? '' : 's'}`;
}

/** `idmint db init` for one database: the tables, and the history recorded (fenced when new). */
async function initOne(store: SegmentStore, url: string, table: string): Promise<string[]> {
  await store.init();
  const [history] = await store.history();
  const where = redactUrl(url);
  const ready =
    store.backend === 'redis'
      ? `redis keeps tags as hashes: no table to create in ${where}`
      : `table ${table} is ready in ${where}`;
  if (history === undefined) return [ready];
  return [ready, `history: ${history.live} (recorded; ${fences(history.fences)} so far)`];
}

/**
 * `idmint db init` for a set of databases: tables and columns, then every tag joined to the set
 * (`replace`: the index of an empty database replacing a lost one).
 */
async function initSet(
  store: MultiSegmentStore,
  urls: readonly string[],
  table: string,
  replace?: number,
): Promise<string[]> {
  // join() runs each database's init first: its history is recorded (fenced where new) as alone.
  const report: SetJoinReport = await store.join(replace === undefined ? {} : { replace });
  const n = urls.length;
  return [
    `a set of ${n} database${n === 1 ? '' : 's'} is ready in table ${table}; database r ` +
      `issues IDs ≡ r (mod ${n}):`,
    ...urls.map(
      (url, index) =>
        `  ${index}  ${redactUrl(url)}${index === replace ? '  (replaces the lost one)' : ''}`,
    ),
    ...report.tags.map((tag) => {
      if (tag.action === 'unchanged') return `tag ${tag.tag}: already in the set`;
      return (
        `tag ${tag.tag}: ${tag.action === 'completed' ? 'rows added' : 're-formed'} above ` +
        `${tag.maxId}`
      );
    }),
  ];
}

/** Where a line is about: the table, and in a set the database. */
function place(table: string, database: string | undefined): string {
  return database === undefined ? `table ${table}` : `table ${table} in ${database}`;
}

function historyLines(histories: readonly StoreHistory[], table: string): string[] {
  return histories.map((history) => {
    const state =
      history.recorded === history.live
        ? `recorded, ${fences(history.fences)} so far`
        : history.recorded === undefined
          ? 'none recorded: the next allocation fences every tag (a first sight)'
          : `recorded ${history.recorded}: a new history, the next allocation fences every ` +
            `tag first`;
    return `${place(table, history.database)}: history ${history.live} (${state})`;
  });
}

function fenceLines(
  reports: readonly FenceReport[],
  table: string,
  margin: FenceMargin,
  expected?: number,
): string[] {
  return reports.map((report) => {
    const where = place(table, report.database);
    if (!report.fenced) {
      const had = `it has had ${fences(report.fences)}, not ${expected} (--if-fences)`;
      return `${where}: not fenced: ${had}; nothing changed`;
    }
    const tags = `${report.tags} tag${report.tags === 1 ? '' : 's'}`;
    return (
      `${where}: ${tags} raised by ${describeMargin(margin)}; fence ${report.fences}, history ` +
      `${report.history}`
    );
  });
}

/** A fence the store made of itself (init on a table with no record, or on a new history). */
function fencedLine(event: StoreHistoryEvent): string {
  const what =
    event.from === undefined ? 'no history was recorded' : `a new history (was ${event.from})`;
  const tags = `${event.tags ?? 0} tag${event.tags === 1 ? '' : 's'}`;
  return `${place(event.table, event.database)}: ${what}: ${tags} fenced by ${event.margin}`;
}
