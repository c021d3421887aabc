import { IdMintError } from '../../core/errors.ts';
import type { SegmentStore, TagRecord } from '../../ports/segment-store.ts';
import { tagJson } from '../../server/routes/tags.ts';
import { openSegmentStore } from '../../stores/open-segment-store.ts';
import { integerFlag, parseCommandArgs } from '../args.ts';
import { configFlagHelp, configFlagOptions, configFromFlags, normalizeBooleanFlags } from '../config-flags.ts';
import type { CliCommand, CliIo } from '../io.ts';

const SUBCOMMANDS = ['list', 'create', 'set-step'] as const;

export const tagsCommand: CliCommand = {
  name: 'tags',
  summary: 'list, create and re-step segment tags in the configured store',
  help: `Usage: idmint tags list [--json]
       idmint tags create <tag> --step N [--start-id ID] [--description TEXT] [--json]
       idmint tags set-step <tag> <step> [--json]

Works directly on the segment store the configuration names (segment.store, IDMINT_SEGMENT_STORE;
default sqlite:./data/idmint.db), the same one "idmint serve" uses; no server needs to run.
A new step applies from the next range a server loads.

Options:
  -s, --store URL                       the segment store (same as --segment-store)
  -t, --table NAME                      its table (same as --segment-table)
      --step N                          IDs per range for a new tag (Leaf's step), 1 to 2147483647
      --start-id ID                     first ID a new tag issues (default 1)
      --description TEXT                free text, up to 256 characters
      --json                            print JSON (one object per tag) instead of a table
${configFlagHelp()}
  -h, --help                            show this help`,

  async run(argv, io) {
    const { values, positionals } = parseCommandArgs(
      normalizeBooleanFlags(argv),
      {
        ...configFlagOptions(),
        store: { type: 'string', short: 's' },
        table: { type: 'string', short: 't' },
        step: { type: 'string' },
        'start-id': { type: 'string' },
        description: { type: 'string' },
        json: { type: 'boolean' },
      },
      { min: 1, max: 3, name: 'list|create|set-step' },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    const [sub, ...args] = positionals;
    if (!(SUBCOMMANDS as readonly (string | undefined)[]).includes(sub)) {
      throw new IdMintError('INVALID_ARGUMENT', `unknown subcommand "${sub}"; use one of: ${SUBCOMMANDS.join(', ')}`);
    }
    const expected = sub === 'list' ? 0 : sub === 'create' ? 1 : 2;
    if (args.length !== expected) {
      throw new IdMintError('INVALID_ARGUMENT', args.length < expected ? `missing argument: idmint tags ${sub} ${sub === 'create' ? '<tag>' : '<tag> <step>'}` : `unexpected argument "${args[expected]}"`);
    }
    if (sub !== 'create' && (values.step !== undefined || values['start-id'] !== undefined || values.description !== undefined)) {
      throw new IdMintError('INVALID_ARGUMENT', `--step, --start-id and --description belong to "idmint tags create"`);
    }
    // --store and --table, as for `idmint db init`, are short for --segment-store and --segment-table.
    const flags: Record<string, string | boolean | undefined> = values;
    const { config } = configFromFlags({ ...flags, 'segment-store': flags['segment-store'] ?? values.store, 'segment-table': flags['segment-table'] ?? values.table });
    const { store: url, table, timeoutMs, poolSize } = config.segment;
    const store = await openSegmentStore(url, { table, timeoutMs, poolSize, source: 'segment.store' });
    try {
      const records = await runSubcommand(store, sub as (typeof SUBCOMMANDS)[number], args, values);
      await print(io, records, values.json === true);
    } finally {
      await store.close();
    }
    return 0;
  },
};

async function runSubcommand(
  store: SegmentStore,
  sub: (typeof SUBCOMMANDS)[number],
  args: readonly string[],
  values: Readonly<Record<string, string | boolean | undefined>>,
): Promise<TagRecord[]> {
  const tag = args[0] ?? '';
  switch (sub) {
    case 'list':
      return store.listTags();
    case 'create': {
      if (typeof values['step'] !== 'string') throw new IdMintError('INVALID_ARGUMENT', 'missing --step N: how many IDs each range holds');
      const step = integerFlag('step', values['step'], 0, 1, 2 ** 31 - 1);
      const startId = values['start-id'];
      if (typeof startId === 'string' && !/^(0|[1-9][0-9]{0,18})$/.test(startId)) {
        throw new IdMintError('INVALID_ARGUMENT', `--start-id must be a decimal integer from 0 to 9223372036854775807, got "${startId}"`);
      }
      const description = values['description'];
      return [
        await store.createTag({
          tag,
          step,
          ...(typeof startId === 'string' ? { startId: BigInt(startId) } : {}),
          ...(typeof description === 'string' ? { description } : {}),
        }),
      ];
    }
    case 'set-step': {
      const raw = args[1] ?? '';
      const step = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : 0;
      if (step < 1 || step > 2 ** 31 - 1) throw new IdMintError('INVALID_ARGUMENT', `step must be an integer from 1 to 2147483647, got "${raw}"`);
      return [await store.updateTag(tag, { step })];
    }
  }
}

async function print(io: CliIo, records: readonly TagRecord[], json: boolean): Promise<void> {
  if (json) {
    await io.out(records.map((record) => `${JSON.stringify(tagJson(record))}\n`).join(''));
    return;
  }
  const rows = [['TAG', 'MAX_ID', 'STEP', 'DESCRIPTION'], ...records.map((r) => [r.tag, r.maxId.toString(), String(r.step), r.description ?? ''])];
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((row) => (row[i] ?? '').length)) + 2);
  await io.out(rows.map((row) => row.map((cell, i) => (i < 3 ? cell.padEnd(widths[i] ?? 0) : cell)).join('').trimEnd()).join('\n') + '\n');
}
