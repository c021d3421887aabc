import { IdMintError } from '../../core/errors.ts';
import { decodeAny, detectFormat } from '../../core/id-formats.ts';
import {
  DEFAULT_LAYOUT,
  LAYOUT_PRESETS,
  decomposeId,
  getLayout,
  type Layout,
} from '../../core/layout.ts';
import { OPAQUE_SNOWFLAKE_DOMAIN } from '../../core/opaque.ts';
import { checkTag, tagNotFound } from '../../core/segment-limits.ts';
import { OpaqueIds, noOpaqueKeys } from '../../service/opaque-ids.ts';
import type { SegmentStore } from '../../ports/segment-store.ts';
import { isStoreSet, openConfiguredStore } from '../../backends/open-configured.ts';
import { parseCommandArgs } from '../args.ts';
import { configFlagOptions, configFromFlags, normalizeBooleanFlags } from '../config-flags.ts';
import { backendFailure } from '../environment-errors.ts';
import type { CliCommand, CliIo } from '../io.ts';

const OPAQUE_SNOWFLAKE = new RegExp(`^[1-9][0-9]{${OPAQUE_SNOWFLAKE_DOMAIN.digits}}$`);

export const decodeCommand: CliCommand = {
  name: 'decode',
  summary:
    'print what is inside an ID: snowflake, UUID, ULID, ObjectId, or an opaque ID (with the keys)',
  help: `Usage: idmint decode <id> [--layout NAME] [--json]
       idmint decode <opaque id> --tag TAG [--store URL] [--table NAME] [--json]

Recognises the ID by its shape and prints its parts:
  a UUID (36 characters)          version, variant; time, counter and random parts of a UUIDv7
  an ObjectId (24 hex digits)     creation second, per-process random value, counter
  a ULID (26 base32 characters)   creation millisecond, random part
  a decimal ID (up to 19 digits)  a snowflake ID: time, worker, sequence under --layout
  25 digits                       an opaque snowflake ID: the snowflake ID behind it and its
                                  parts (needs the opaque keys)
With --tag, the ID is an opaque ID of that segment tag: prints the dense ID behind it. The tag is
read from the configured segment store, and only IDs up to its max_id decode. The keys come from
IDMINT_OPAQUE_KEYS or opaque.keys in the config file; a wrong key, a tampered ID or another tag's
ID is refused (INVALID_ID).

Options:
  -l, --layout NAME   bit layout of snowflake IDs: ${LAYOUT_PRESETS.join(', ')}
                      (default ${DEFAULT_LAYOUT})
  -t, --tag TAG       decode an opaque ID of this segment tag
  -s, --store URL     the segment store (same as --segment-store; default the configured one)
      --table NAME    its table (same as --segment-table)
  -c, --config FILE   config file, JSON or YAML (also IDMINT_CONFIG)
      --json          print one JSON object instead of lines
  -h, --help          show this help`,

  async run(argv, io) {
    const { values, positionals } = parseCommandArgs(
      normalizeBooleanFlags(argv),
      {
        ...configFlagOptions(),
        layout: { type: 'string', short: 'l' },
        tag: { type: 'string', short: 't' },
        store: { type: 'string', short: 's' },
        table: { type: 'string' },
        json: { type: 'boolean' },
      },
      { min: 1, max: 1, name: 'id' },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    const id = positionals[0] ?? '';
    const json = values.json === true;
    const flags: Record<string, string | boolean | undefined> = values;
    if (values.tag !== undefined) return decodeOpaqueSegment(io, id, values.tag, flags, json);
    if (values.store !== undefined || values.table !== undefined)
      throw new IdMintError(
        'INVALID_ARGUMENT',
        '--store and --table belong to --tag (an opaque ID of a segment tag)',
      );
    const layout = getLayout(values.layout ?? DEFAULT_LAYOUT);
    if (OPAQUE_SNOWFLAKE.test(id)) return decodeOpaqueSnowflake(io, id, layout, flags, json);
    const format = detectFormat(id);
    // Decimal, and anything that starts like a number: the snowflake decoder says what is wrong
    // with it ("not a decimal integer", "above the largest ID") better than "no known shape".
    if (format === 'decimal' || (format === undefined && /^-?[0-9]/.test(id)))
      return printSnowflake(io, id, layout, json);
    const decoded = decodeAny(id);
    const fields = {
      ...decoded,
      ...('date' in decoded && decoded.date !== undefined
        ? { date: decoded.date.toISOString() }
        : {}),
    };
    await print(io, fields, json);
    return 0;
  },
};

/** A snowflake ID, as this command has always printed it. */
async function printSnowflake(
  io: CliIo,
  id: string,
  layout: Layout,
  json: boolean,
): Promise<number> {
  const parts = decomposeId(id, layout);
  if (json) {
    await io.out(
      `${JSON.stringify({ id, layout: layout.name, ...parts, date: parts.date.toISOString() })}\n`,
    );
    return 0;
  }
  const rows: [string, string][] = [
    ['id', id],
    ['layout', layout.name],
    ['timestamp', `${parts.timestamp} (${parts.date.toISOString()})`],
    ...(parts.datacenterId === undefined
      ? []
      : [['datacenter', String(parts.datacenterId)] as [string, string]]),
    ['worker', String(parts.workerId)],
    ['sequence', String(parts.sequence)],
  ];
  await io.out(rows.map(([key, value]) => `${key.padEnd(11)}${value}\n`).join(''));
  return 0;
}

/**
 * The keys from the configuration (environment, IDMINT_CONFIG or --config), or OPAQUE_UNAVAILABLE.
 */
function keysFrom(
  flags: Readonly<Record<string, string | boolean | undefined>>,
  what: string,
): OpaqueIds {
  return OpaqueIds.fromConfig(configFromFlags(flags).config.opaque.keys) ?? failNoKeys(what);
}

async function decodeOpaqueSnowflake(
  io: CliIo,
  id: string,
  layout: Layout,
  flags: Readonly<Record<string, string | boolean | undefined>>,
  json: boolean,
): Promise<number> {
  const decoded = keysFrom(flags, 'decoding an opaque snowflake ID').decodeSnowflake(
    id,
    layout,
    Date.now(),
  );
  const parts = decomposeId(decoded.dense, layout);
  await print(
    io,
    {
      format: 'opaque-snowflake',
      id,
      dense: decoded.dense.toString(),
      keyId: decoded.keyId,
      layout: layout.name,
      ...parts,
      date: parts.date.toISOString(),
    },
    json,
  );
  return 0;
}

async function decodeOpaqueSegment(
  io: CliIo,
  id: string,
  tagName: string,
  flags: Readonly<Record<string, string | boolean | undefined>>,
  json: boolean,
): Promise<number> {
  const tag = checkTag(tagName);
  // --store and --table, as for `idmint tags`, are short for --segment-store and --segment-table.
  const { config } = configFromFlags({
    ...flags,
    'segment-store': flags['segment-store'] ?? flags['store'],
    'segment-table': flags['segment-table'] ?? flags['table'],
  });
  const keys = OpaqueIds.fromConfig(config.opaque.keys) ?? failNoKeys('decoding an opaque ID');
  // The store `idmint serve` would use: one database, or the set segment.stores names.
  const set = isStoreSet(config.segment);
  const url = set ? (config.segment.stores[0] as string) : config.segment.store;
  const source = set
    ? flags['segment-stores'] !== undefined
      ? '--segment-stores'
      : 'IDMINT_SEGMENT_STORES'
    : flags['store'] !== undefined
      ? '--store'
      : flags['segment-store'] !== undefined
        ? '--segment-store'
        : 'IDMINT_SEGMENT_STORE';
  let record: Awaited<ReturnType<SegmentStore['getTag']>>;
  try {
    const store = await openConfiguredStore(config.segment, { source, init: false });
    try {
      record = await store.getTag(tag);
    } finally {
      await store.close();
    }
  } catch (error) {
    throw (await backendFailure(error, [{ url, role: 'segment-store', name: source }])) ?? error;
  }
  if (record === undefined) throw tagNotFound(tag);
  if (record.opaque !== true)
    throw new IdMintError(
      'INVALID_ID',
      `tag "${tag}" is not opaque: its IDs are its dense IDs, and none of them is an opaque ID`,
    );
  // Every ID the tag issued is below its max_id: a forged ID that decrypts above it is refused.
  const decoded = keys.decodeSegment(tag, id, record.maxId);
  await print(
    io,
    { format: 'opaque-segment', tag, id, dense: decoded.dense.toString(), keyId: decoded.keyId },
    json,
  );
  return 0;
}

async function print(
  io: CliIo,
  fields: Readonly<Record<string, unknown>>,
  json: boolean,
): Promise<void> {
  if (json) {
    await io.out(`${JSON.stringify(fields)}\n`);
    return;
  }
  const rows = Object.entries(fields).filter(([, value]) => value !== undefined);
  const width = Math.max(...rows.map(([key]) => key.length)) + 2;
  await io.out(rows.map(([key, value]) => `${key.padEnd(width)}${String(value)}\n`).join(''));
}

function failNoKeys(what: string): never {
  throw noOpaqueKeys(what);
}
