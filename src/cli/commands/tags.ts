import { IdMintError } from '../../core/errors.ts';
import { MAX_TAG_DELTA, checkNewTagName, tagNotFound } from '../../core/segment-limits.ts';
import {
  PERIOD_SEPARATOR,
  parsePeriodic,
  type PeriodicOptions,
  type PeriodicSequence,
  type PeriodUnit,
} from '../../core/periodic.ts';
import type { SegmentStore, TagRecord } from '../../ports/segment-store.ts';
import { tagJson } from '../../shared/tag-json.ts';
import { isStoreSet, openConfiguredStore } from '../../backends/open-configured.ts';
import { integerFlag, parseCommandArgs } from '../args.ts';
import {
  configFlagHelp,
  configFlagOptions,
  configFromFlags,
  normalizeBooleanFlags,
} from '../config-flags.ts';
import { backendFailure } from '../environment-errors.ts';
import type { CliCommand, CliIo } from '../io.ts';

const SUBCOMMANDS = ['list', 'create', 'set-step', 'set', 'periods', 'clean'] as const;
/** Flags only `idmint tags create` takes. */
const CREATE_FLAGS = [
  'start-id',
  'opaque',
  'periodic',
  'time-zone',
  'template',
  'seq-start',
  'ordering',
] as const;
/** Flags `idmint tags create` and `idmint tags set` take. */
const CHANGE_FLAGS = ['step', 'description', 'delta', 'remainder'] as const;

export const tagsCommand: CliCommand = {
  name: 'tags',
  summary: "list, create, re-step and change segment tags; list and clean periodic tags' periods",
  help: `Usage: idmint tags list [--json]
       idmint tags create <tag> --step N [--start-id ID] [--description TEXT] [--opaque]
                          [--delta D [--remainder R]] [--ordering cluster] [--json]
       idmint tags create <tag> --step N --periodic day|month --template T [--time-zone Z]
                          [--seq-start N] [--description TEXT] [--json]
       idmint tags set-step <tag> <step> [--json]
       idmint tags set <tag> [--step N] [--description TEXT] [--delta D [--remainder R]] [--json]
       idmint tags periods <tag> [--json]
       idmint tags clean <tag> --older-than N [--json]

Works directly on the segment store the configuration names (segment.store, IDMINT_SEGMENT_STORE;
default sqlite:./data/idmint.db), the same one "idmint serve" uses; no server needs to run. With a
set of databases (segment.stores, IDMINT_SEGMENT_STORES, --stores) a tag is created and re-stepped
in every database, database r at the first ID ≡ r (mod N) at or above --start-id; every database
must answer, and running it again completes a create that one of them missed.
--delta and --remainder are TinyId's: the tag issues only IDs ≡ remainder (mod delta), delta 1 to
64, remainder 0 to delta - 1 (default 0); a change takes effect above the IDs already allocated
(docs/api.md, Tags). A Leaf table needs "idmint db init" first, which adds their columns.
A new step is taken as Leaf takes it: by the first loads after a restart, and as the floor of
the dynamic step from the next range on (docs/segments.md, Steps).

Options:
  -s, --store URL                       the segment store (same as --segment-store)
      --stores URLS                     a set of databases, comma-separated
                                        (same as --segment-stores)
  -t, --table NAME                      its table (same as --segment-table)
      --step N                          IDs per range for a new tag (Leaf's step), 1 to 2147483647
      --start-id ID                     first ID a new tag issues (default 1)
      --description TEXT                free text, up to 256 characters
      --opaque                          a new tag's IDs are served in their opaque form (FF1 under
                                        the servers' IDMINT_OPAQUE_KEYS; docs/formats.md); for good
      --periodic day|month              a new tag whose sequence restarts each day or month, served
                                        as formatted IDs (docs/segments.md, Periodic sequences)
      --template T                      a periodic tag's IDs, e.g. '{yyyyMMdd}{seq:6}'
      --time-zone Z                     where its day or month is read, an IANA zone (default UTC)
      --seq-start N                     first sequence number of each period (default 1)
      --ordering cluster                a new tag one node at a time issues, so that its IDs
                                        increase across the whole cluster (docs/segments.md,
                                        Cluster order); not with --opaque or --periodic; for good
      --older-than N                    clean: delete the rows of the tag's periods more than N
                                        periods before the current one (by this machine's clock);
                                        N at least 1, so the current and previous periods stay
      --delta D                         only every D-th ID (TinyId's delta), 1 to 64
      --remainder R                     the IDs ≡ R (mod D), 0 to D - 1 (default 0)
      --json                            print JSON (one object per tag) instead of a table
${configFlagHelp('segment')}
  -h, --help                            show this help`,

  async run(argv, io) {
    const { values, positionals } = parseCommandArgs(
      normalizeBooleanFlags(argv),
      {
        ...configFlagOptions(),
        store: { type: 'string', short: 's' },
        stores: { type: 'string' },
        table: { type: 'string', short: 't' },
        step: { type: 'string' },
        'start-id': { type: 'string' },
        description: { type: 'string' },
        opaque: { type: 'boolean' },
        periodic: { type: 'string' },
        'time-zone': { type: 'string' },
        template: { type: 'string' },
        'seq-start': { type: 'string' },
        ordering: { type: 'string' },
        'older-than': { type: 'string' },
        delta: { type: 'string' },
        remainder: { type: 'string' },
        json: { type: 'boolean' },
      },
      { min: 1, max: 3, name: 'list|create|set-step|set|periods|clean' },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    const [sub, ...args] = positionals;
    if (!(SUBCOMMANDS as readonly (string | undefined)[]).includes(sub)) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `unknown subcommand "${sub}"; use one of: ${SUBCOMMANDS.join(', ')}`,
      );
    }
    const expected = sub === 'list' ? 0 : sub === 'set-step' ? 2 : 1;
    if (args.length !== expected) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        args.length < expected
          ? `missing argument: idmint tags ${sub} ${sub === 'set-step' ? '<tag> <step>' : '<tag>'}`
          : `unexpected argument "${args[expected]}"`,
      );
    }
    if (sub !== 'create' && CREATE_FLAGS.some((flag) => values[flag] !== undefined)) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `${CREATE_FLAGS.map((flag) => `--${flag}`).join(', ')} belong to "idmint tags create"`,
      );
    }
    if (sub !== 'create' && sub !== 'set' && CHANGE_FLAGS.some((f) => values[f] !== undefined)) {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `--step, --description, --delta and --remainder belong to "idmint tags create" and ` +
          '"idmint tags set"',
      );
    }
    if ((sub === 'clean') !== (values['older-than'] !== undefined))
      throw new IdMintError(
        'INVALID_ARGUMENT',
        sub === 'clean'
          ? 'missing --older-than N: clean deletes the periods more than N periods old'
          : '--older-than belongs to "idmint tags clean"',
      );
    // --store and --table, as for `idmint db init`, are short for --segment-store and
    // --segment-table.
    const flags: Record<string, string | boolean | undefined> = values;
    const { config } = configFromFlags({
      ...flags,
      'segment-store': flags['segment-store'] ?? values.store,
      'segment-stores': flags['segment-stores'] ?? values.stores,
      'segment-table': flags['segment-table'] ?? values.table,
    });
    const set = isStoreSet(config.segment);
    const url = set ? (config.segment.stores[0] as string) : config.segment.store;
    const source = set
      ? values.stores !== undefined
        ? '--stores'
        : flags['segment-stores'] !== undefined
          ? '--segment-stores'
          : 'IDMINT_SEGMENT_STORES'
      : values.store !== undefined
        ? '--store'
        : flags['segment-store'] !== undefined
          ? '--segment-store'
          : 'IDMINT_SEGMENT_STORE';
    // Every store call is bounded by timeoutMs and close() by as much again, so a store that
    // never answers ends this command with one line, never a hang.
    const subcommand = sub as (typeof SUBCOMMANDS)[number];
    let records: TagRecord[];
    try {
      // A set is checked as `idmint serve` checks it, except for listing, which shows it as it is.
      const store = await openConfiguredStore(config.segment, { source, verify: sub !== 'list' });
      try {
        records = await runSubcommand(store, subcommand, args, values);
      } finally {
        await store.close();
      }
    } catch (error) {
      throw (await backendFailure(error, [{ url, role: 'segment-store', name: source }])) ?? error;
    }
    if (records.length === 0 && values.json !== true)
      await io.out(`${nothingToShow(subcommand, args[0] ?? '', values)}\n`);
    else await print(io, records, values.json === true);
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
      if (typeof values['step'] !== 'string')
        throw new IdMintError(
          'INVALID_ARGUMENT',
          'missing --step N: how many IDs each range holds',
        );
      const step = integerFlag('step', values['step'], 0, 1, 2 ** 31 - 1);
      const startId = values['start-id'];
      if (typeof startId === 'string' && !/^(0|[1-9][0-9]{0,18})$/.test(startId)) {
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `--start-id must be a decimal integer from 0 to 9223372036854775807, got "${startId}"`,
        );
      }
      const description = values['description'];
      return [
        await store.createTag({
          tag: checkNewTagName(tag),
          step,
          ...(typeof startId === 'string' ? { startId: BigInt(startId) } : {}),
          ...(typeof description === 'string' ? { description } : {}),
          ...(values['opaque'] === true ? { opaque: true } : {}),
          ...periodicFlags(values),
          ...sequenceFlags(values),
          ...orderingFlag(values['ordering']),
        }),
      ];
    }
    case 'set': {
      const raw = values['step'];
      const description = values['description'];
      const update = {
        ...(typeof raw === 'string' ? { step: integerFlag('step', raw, 0, 1, 2 ** 31 - 1) } : {}),
        ...(typeof description === 'string' ? { description } : {}),
        ...sequenceFlags(values),
      };
      if (Object.keys(update).length === 0)
        throw new IdMintError(
          'INVALID_ARGUMENT',
          'nothing to set: give --step, --description or --delta (with --remainder)',
        );
      return [await store.updateTag(tag, update)];
    }
    case 'periods':
      return periodRows(store, tag);
    case 'clean': {
      const raw = values['older-than'];
      const olderThan = integerFlag(
        'older-than',
        typeof raw === 'string' ? raw : '',
        0,
        1,
        1_000_000,
      );
      const sequence = await periodicTag(store, tag);
      // The period `olderThan` periods before this machine's current one: rows before it go.
      let window = sequence.windowAt(Date.now());
      for (let i = 0; i < olderThan; i++) window = sequence.windowAt(window.start - 1);
      const doomed = (await periodRows(store, tag)).filter(
        (row) => row.tag.slice(tag.length + 1) < window.key,
      );
      const deleteTag = store.deleteTag?.bind(store);
      if (deleteTag === undefined)
        throw new IdMintError('INVALID_ARGUMENT', `the ${store.backend} store cannot delete rows`);
      for (const row of doomed) await deleteTag(row.tag);
      return doomed;
    }
    case 'set-step': {
      const raw = args[1] ?? '';
      const step = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : 0;
      if (step < 1 || step > 2 ** 31 - 1)
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `step must be an integer from 1 to 2147483647, got "${raw}"`,
        );
      const current = await store.getTag(tag);
      // A periodic tag's periods must each hold one range of the step.
      if (current?.periodic !== undefined) parsePeriodic(current.periodic).checkStep(step);
      return [await store.updateTag(tag, { step })];
    }
  }
}

/** The periodic flags of `tags create`, as NewTag's `periodic`; none without --periodic. */
function periodicFlags(values: Readonly<Record<string, string | boolean | undefined>>): {
  periodic?: PeriodicOptions;
} {
  const period = values['periodic'];
  const template = values['template'];
  const seqStart = values['seq-start'];
  const timeZone = values['time-zone'];
  if (period === undefined) {
    if (template !== undefined || seqStart !== undefined || timeZone !== undefined)
      throw new IdMintError(
        'INVALID_ARGUMENT',
        '--template, --time-zone and --seq-start need --periodic day|month',
      );
    return {};
  }
  if (typeof template !== 'string')
    throw new IdMintError(
      'INVALID_ARGUMENT',
      "missing --template T: a periodic tag's IDs, e.g. '{yyyyMMdd}{seq:6}'",
    );
  return {
    periodic: {
      period: period as PeriodUnit,
      timeZone: typeof timeZone === 'string' ? timeZone : 'UTC',
      template,
      ...(typeof seqStart === 'string'
        ? { start: integerFlag('seq-start', seqStart, 0, 0, Number.MAX_SAFE_INTEGER) }
        : {}),
    },
  };
}

/** The tag's option; INVALID_ARGUMENT when it is not a periodic tag. */
async function periodicTag(store: SegmentStore, tag: string): Promise<PeriodicSequence> {
  const record = await store.getTag(tag);
  if (record === undefined) throw tagNotFound(tag);
  if (record.periodic === undefined)
    throw new IdMintError('INVALID_ARGUMENT', `tag "${tag}" is not periodic: it has no periods`);
  return parsePeriodic(record.periodic);
}

/**
 * The sentence printed instead of a table with no rows (a bare header reads as a fault); --json
 * prints nothing, as it does for any empty answer.
 */
function nothingToShow(
  sub: (typeof SUBCOMMANDS)[number],
  tag: string,
  values: Readonly<Record<string, string | boolean | undefined>>,
): string {
  if (sub === 'periods')
    return `tag "${tag}" has no period rows yet: the first ID of a period creates its row`;
  if (sub === 'clean')
    return (
      `nothing to clean: no period of tag "${tag}" is more than ` +
      `${String(values['older-than'])} periods old`
    );
  return 'no tags yet: create one with idmint tags create <tag> --step N';
}

/** The rows of a periodic tag's periods, oldest first (their keys sort as the periods follow). */
async function periodRows(store: SegmentStore, tag: string): Promise<TagRecord[]> {
  await periodicTag(store, tag);
  const prefix = `${tag}${PERIOD_SEPARATOR}`;
  return (await store.listTags()).filter(
    (record) =>
      record.tag.startsWith(prefix) && /^\d{6}(\d{2})?$/.test(record.tag.slice(prefix.length)),
  );
}

/**
 * --ordering as NewTag's `ordering`: `cluster` or nothing (the store refuses what cannot keep it).
 */
function orderingFlag(value: string | boolean | undefined): { ordering?: 'cluster' } {
  if (value === undefined) return {};
  if (value !== 'cluster')
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `--ordering must be "cluster" (one node at a time issues the tag), got ` +
        `${JSON.stringify(value)}`,
    );
  return { ordering: 'cluster' };
}

/**
 * --delta and --remainder as a tag's sequence (the store checks the pair: remainder below delta);
 * a remainder alone has no delta to be a remainder of.
 */
function sequenceFlags(values: Readonly<Record<string, string | boolean | undefined>>): {
  delta?: number;
  remainder?: number;
} {
  const { delta, remainder } = values;
  if (typeof delta !== 'string') {
    if (remainder !== undefined)
      throw new IdMintError('INVALID_ARGUMENT', '--remainder needs --delta: a remainder of what');
    return {};
  }
  const d = integerFlag('delta', delta, 1, 1, MAX_TAG_DELTA);
  const r = integerFlag(
    'remainder',
    typeof remainder === 'string' ? remainder : undefined,
    0,
    0,
    d - 1,
  );
  return { delta: d, remainder: r };
}

async function print(io: CliIo, records: readonly TagRecord[], json: boolean): Promise<void> {
  if (json) {
    await io.out(records.map((record) => `${JSON.stringify(tagJson(record))}\n`).join(''));
    return;
  }
  const header = ['TAG', 'MAX_ID', 'STEP', 'OPAQUE', 'ORDERING', 'PERIODIC', 'DESCRIPTION'];
  const rows = [
    header,
    ...records.map((r) => [
      r.tag,
      r.maxId.toString(),
      String(r.step),
      r.opaque === true ? 'yes' : 'no',
      r.ordering ?? '-',
      periodicCell(r),
      r.description ?? '',
    ]),
  ];
  const last = header.length - 1;
  const widths = header.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length)) + 2);
  await io.out(
    `${rows
      .map((row) =>
        row
          .map((cell, i) => (i < last ? cell.padEnd(widths[i] ?? 0) : cell))
          .join('')
          .trimEnd(),
      )
      .join('\n')}\n`,
  );
}

/**
 * A periodic tag's option in one cell (`day Asia/Shanghai {yyyyMMdd}{seq:6}`), as the JSON shows
 * it: the tag's own row holds max_id 2^63-1 and issues nothing, which reads as a fault without it.
 */
function periodicCell(record: TagRecord): string {
  const periodic = tagJson(record).periodic;
  if (periodic === undefined) return '-';
  const from = (periodic.start ?? 1) === 1 ? '' : ` from ${periodic.start}`;
  return `${periodic.period} ${periodic.timeZone} ${periodic.template}${from}`;
}
