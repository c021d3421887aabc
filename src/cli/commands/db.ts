import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { DEFAULT_SEGMENT_STORE_URL, SEGMENT_STORE_URL_FORMS, openSegmentStore, openSegmentStores } from '../../stores/open-segment-store.ts';
import { redactUrl } from '../../shared/connection-url.ts';
import { DEFAULT_SEGMENT_TABLE, DEFAULT_STORE_TIMEOUT_MS } from '../../stores/store-support.ts';
import { integerFlag, parseCommandArgs } from '../args.ts';
import { configFromFlags } from '../config-flags.ts';
import { backendFailure } from '../environment-errors.ts';
import type { SetJoinReport } from '../../stores/multi/multi-segment-store.ts';
import type { CliCommand, CliIo } from '../io.ts';

export const dbCommand: CliCommand = {
  name: 'db',
  summary: 'create the segment table in a database (idmint db init)',
  help: `Usage: idmint db init [--store URL] [--table NAME] [--timeout MS]
       idmint db init --stores URL,URL,... [--replace INDEX] [--table NAME] [--timeout MS]

Creates the segment table (Leaf's leaf_alloc layout) if it is missing, and nothing else: no
tags, no other tables. Safe to run any number of times. An existing Leaf table is used as it is.

With a set of databases (--stores, or segment.stores / IDMINT_SEGMENT_STORES), it forms the set:
each table gets the id_offset and id_increment columns, and every tag a row in every database,
database r issuing IDs ≡ r (mod N), each above every ID any of them issued before. Run it after
creating a set, after adding a database to it (N to N+1) or to join a Leaf table to it; every
database must answer. Each database records the set's members, so none can be left out later,
whatever state a run cut short leaves: run it again with the same list. Safe while nodes run:
nodes still configured with the old list are refused from then on (restart them with the new
one). docs/segments.md, Several databases.

Options:
  -s, --store URL     the segment store (default: the configured one, IDMINT_SEGMENT_STORE or
                      the config file in IDMINT_CONFIG, else ${DEFAULT_SEGMENT_STORE_URL}), one of:
${SEGMENT_STORE_URL_FORMS.map((form) => `                        ${form}`).join('\n')}
                      Redis keeps tags as hashes and needs no table.
      --stores URLS   a set of databases, comma-separated, in their order (default: the
                      configured segment.stores); replaces --store
      --replace INDEX the database at INDEX of --stores is an empty one replacing the set's
                      database there, lost for good (never use that one again): its rows start
                      above every ID the lost one can have issued
  -t, --table NAME    table name (default: the configured one, else ${DEFAULT_SEGMENT_TABLE})
      --timeout MS    give up on the database after MS milliseconds (default ${DEFAULT_STORE_TIMEOUT_MS})
  -h, --help          show this help`,

  async run(argv, io) {
    const { values, positionals } = parseCommandArgs(
      argv,
      {
        store: { type: 'string', short: 's' },
        stores: { type: 'string' },
        replace: { type: 'string' },
        table: { type: 'string', short: 't' },
        timeout: { type: 'string' },
      },
      { min: 1, max: 1, name: 'subcommand' },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    if (positionals[0] !== 'init') throw new IdMintError('INVALID_ARGUMENT', `unknown db subcommand "${positionals[0]}"; the only one is: init`);
    // Without flags, the store `idmint serve` would use (environment and IDMINT_CONFIG file).
    const configured = configFromFlags({}).config.segment;
    if (values.store !== undefined && values.stores !== undefined) throw new IdMintError('INVALID_ARGUMENT', '--store and --stores name the database(s) twice: give one of them');
    const urls = values.stores !== undefined ? values.stores.split(',').map((url) => url.trim()).filter((url) => url !== '') : values.store === undefined ? configured.stores : [];
    if (values.replace !== undefined && urls.length === 0) {
      throw new IdMintError('INVALID_ARGUMENT', '--replace names a database of a set: give the set with --stores');
    }
    if (urls.length > 0) {
      const timeoutMs = integerFlag('timeout', values.timeout, configured.timeoutMs, 1, 600_000);
      const source = values.stores !== undefined ? '--stores' : 'IDMINT_SEGMENT_STORES';
      const options = { source, table: values.table ?? configured.table, timeoutMs };
      if (values.replace === undefined) return initSet(urls, options, io);
      return initSet(urls, { ...options, replace: integerFlag('replace', values.replace, 0, 0, urls.length - 1) }, io);
    }
    const url = values.store ?? configured.store;
    const table = values.table ?? configured.table;
    const timeoutMs = integerFlag('timeout', values.timeout, configured.timeoutMs, 1, 600_000);
    const source = values.store !== undefined ? '--store' : 'IDMINT_SEGMENT_STORE';
    const store = await openSegmentStore(url, { table, timeoutMs, init: false, source }).catch(async (error: unknown) => {
      // A store URL given on the command line is a usage error (exit 2), not a failure of the work.
      if (isIdMintError(error, 'CONFIG_INVALID')) throw new IdMintError('INVALID_ARGUMENT', error.message);
      throw (await backendFailure(error, [{ url, role: 'segment-store', name: source }])) ?? error;
    });
    try {
      await store.init();
    } catch (error) {
      throw (await backendFailure(error, [{ url, role: 'segment-store', name: source }])) ?? error;
    } finally {
      await store.close();
    }
    await io.out(store.backend === 'redis' ? `redis keeps tags as hashes: no table to create in ${redactUrl(url)}\n` : `table ${table} is ready in ${redactUrl(url)}\n`);
    return 0;
  },
};

/** `idmint db init` for a set of databases: tables and columns, then every tag joined to the set. */
async function initSet(
  urls: readonly string[],
  options: { readonly source: string; readonly table: string; readonly timeoutMs: number; readonly replace?: number },
  io: CliIo,
): Promise<number> {
  const { source, table, timeoutMs, replace } = options;
  const setting = [{ url: urls[0] ?? '', role: 'segment-store' as const, name: source }];
  const store = await openSegmentStores(urls, { table, timeoutMs, init: false, verify: false, source }).catch(async (error: unknown) => {
    if (isIdMintError(error, 'CONFIG_INVALID')) throw new IdMintError('INVALID_ARGUMENT', error.message);
    throw (await backendFailure(error, setting)) ?? error;
  });
  let report: SetJoinReport;
  try {
    report = await store.join(replace === undefined ? {} : { replace });
  } catch (error) {
    throw (await backendFailure(error, setting)) ?? error;
  } finally {
    await store.close();
  }
  const lines = [
    `a set of ${urls.length} database${urls.length === 1 ? '' : 's'} is ready in table ${table}; database r issues IDs ≡ r (mod ${urls.length}):`,
    ...urls.map((url, index) => `  ${index}  ${redactUrl(url)}${index === replace ? '  (replaces the lost one)' : ''}`),
    ...report.tags.map((tag) => `tag ${tag.tag}: ${tag.action === 'unchanged' ? 'already in the set' : tag.action === 'completed' ? `rows added above ${tag.maxId}` : `re-formed above ${tag.maxId}`}`),
  ];
  await io.out(`${lines.join('\n')}\n`);
  return 0;
}
