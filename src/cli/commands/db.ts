import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { DEFAULT_SEGMENT_STORE_URL, SEGMENT_STORE_URL_FORMS, openSegmentStore } from '../../stores/open-segment-store.ts';
import { redactUrl } from '../../service/connection-url.ts';
import { DEFAULT_SEGMENT_TABLE, DEFAULT_STORE_TIMEOUT_MS } from '../../stores/store-support.ts';
import { integerFlag, parseCommandArgs } from '../args.ts';
import { configFromFlags } from '../config-flags.ts';
import type { CliCommand } from '../io.ts';

export const dbCommand: CliCommand = {
  name: 'db',
  summary: 'create the segment table in a database (idmint db init)',
  help: `Usage: idmint db init [--store URL] [--table NAME] [--timeout MS]

Creates the segment table (Leaf's leaf_alloc layout) if it is missing, and nothing else: no
tags, no other tables. Safe to run any number of times. An existing Leaf table is used as it is.

Options:
  -s, --store URL     the segment store (default: the configured one, IDMINT_SEGMENT_STORE or
                      the config file in IDMINT_CONFIG, else ${DEFAULT_SEGMENT_STORE_URL}), one of:
${SEGMENT_STORE_URL_FORMS.map((form) => `                        ${form}`).join('\n')}
                      Redis keeps tags as hashes and needs no table.
  -t, --table NAME    table name (default: the configured one, else ${DEFAULT_SEGMENT_TABLE})
      --timeout MS    give up on the database after MS milliseconds (default ${DEFAULT_STORE_TIMEOUT_MS})
  -h, --help          show this help`,

  async run(argv, io) {
    const { values, positionals } = parseCommandArgs(
      argv,
      { store: { type: 'string', short: 's' }, table: { type: 'string', short: 't' }, timeout: { type: 'string' } },
      { min: 1, max: 1, name: 'subcommand' },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    if (positionals[0] !== 'init') throw new IdMintError('INVALID_ARGUMENT', `unknown db subcommand "${positionals[0]}"; the only one is: init`);
    // Without flags, the store `idmint serve` would use (environment and IDMINT_CONFIG file).
    const configured = configFromFlags({}).config.segment;
    const url = values.store ?? configured.store;
    const table = values.table ?? configured.table;
    const timeoutMs = integerFlag('timeout', values.timeout, configured.timeoutMs, 1, 600_000);
    const store = await openSegmentStore(url, { table, timeoutMs, init: false, source: '--store' }).catch((error: unknown) => {
      // A store URL given on the command line is a usage error (exit 2), not a failure of the work.
      throw isIdMintError(error, 'CONFIG_INVALID') ? new IdMintError('INVALID_ARGUMENT', error.message) : error;
    });
    try {
      await store.init();
    } finally {
      await store.close();
    }
    await io.out(store.backend === 'redis' ? `redis keeps tags as hashes: no table to create in ${redactUrl(url)}\n` : `table ${table} is ready in ${redactUrl(url)}\n`);
    return 0;
  },
};
