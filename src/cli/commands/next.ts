import { MonotonicClock } from '../../clocks/monotonic-clock.ts';
import { ROLLBACK_POLICIES, type RollbackPolicyName } from '../../core/clock-policy.ts';
import { IdMintError } from '../../core/errors.ts';
import { DEFAULT_LAYOUT, LAYOUT_PRESETS, getLayout } from '../../core/layout.ts';
import { SnowflakeGenerator } from '../../core/snowflake.ts';
import { ID_FAMILIES, IdFamilies, type IdFamily } from '../../service/id-families.ts';
import { OpaqueIds, noOpaqueKeys } from '../../service/opaque-ids.ts';
import { integerFlag, parseCommandArgs } from '../args.ts';
import { configFromFlags } from '../config-flags.ts';
import type { CliCommand } from '../io.ts';

const MAX_COUNT = 10_000_000;
/** IDs per write: large enough to be fast, small enough to keep memory flat for 10M IDs. */
const CHUNK = 65_536;
/** What `--format` takes: the snowflake IDs of a local generator, the families, and opaque snowflake IDs. */
const FORMATS = ['snowflake', ...ID_FAMILIES, 'opaque'] as const;
type Format = (typeof FORMATS)[number];
/** Flags that only a snowflake generator (plain or opaque) takes. */
const SNOWFLAKE_FLAGS = ['worker', 'datacenter', 'layout', 'rollback'] as const;

export const nextCommand: CliCommand = {
  name: 'next',
  summary: 'print new IDs from a local generator: snowflake, uuid7, uuid4, ulid, objectid or opaque (no server needed)',
  help: `Usage: idmint next [--format F] [--count N] [--worker W] [--datacenter D] [--layout NAME] [--rollback POLICY]

Prints N new IDs, one per line, from a generator in this process.

Options:
  -f, --format F       what to print (default snowflake):
                         snowflake  64-bit snowflake IDs, strictly increasing
                         uuid7      UUIDv7 (RFC 9562), strictly increasing
                         uuid4      UUIDv4 (RFC 9562), random
                         ulid       ULIDs, strictly increasing (the spec's monotonic rule)
                         objectid   MongoDB ObjectIds, 24 hex digits
                         opaque     opaque snowflake IDs: 25 digits, FF1 under the keys in
                                    IDMINT_OPAQUE_KEYS (or opaque.keys in the config file)
  -n, --count N        how many IDs (1 to ${MAX_COUNT}; default 1)
  -w, --worker W       snowflake, opaque: worker ID (0 to the layout's maximum; default 0)
  -d, --datacenter D   snowflake, opaque: datacenter ID, for layouts with a datacenter field (default 0)
  -l, --layout NAME    snowflake, opaque: bit layout: ${LAYOUT_PRESETS.join(', ')} (default ${DEFAULT_LAYOUT})
      --rollback P     snowflake, opaque: clock-rollback policy: ${ROLLBACK_POLICIES.join(', ')} (default wait)
  -c, --config FILE    config file with opaque.keys (also IDMINT_CONFIG)
  -h, --help           show this help

Processes that make snowflake IDs at the same time must use different worker IDs; the idmint
server leases worker IDs for you. The other families need no coordination.`,

  async run(argv, io) {
    const { values } = parseCommandArgs(
      argv,
      {
        format: { type: 'string', short: 'f' },
        count: { type: 'string', short: 'n' },
        worker: { type: 'string', short: 'w' },
        datacenter: { type: 'string', short: 'd' },
        layout: { type: 'string', short: 'l' },
        rollback: { type: 'string' },
        config: { type: 'string', short: 'c' },
      },
      { min: 0, max: 0 },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    const format = (values.format ?? 'snowflake') as Format;
    if (!FORMATS.includes(format)) throw new IdMintError('INVALID_ARGUMENT', `--format must be one of ${FORMATS.join(', ')}, got "${values.format}"`);
    const count = integerFlag('count', values.count, 1, 1, MAX_COUNT);
    if (format !== 'snowflake' && format !== 'opaque') {
      const misplaced = SNOWFLAKE_FLAGS.find((flag) => values[flag] !== undefined);
      if (misplaced !== undefined) throw new IdMintError('INVALID_ARGUMENT', `--${misplaced} belongs to --format snowflake or opaque, not ${format}`);
      const families = new IdFamilies({ clock: new MonotonicClock() });
      for (let done = 0; done < count; done += CHUNK) await io.out(`${families.next(format as IdFamily, Math.min(CHUNK, count - done)).join('\n')}\n`);
      return 0;
    }
    const layout = getLayout(values.layout ?? DEFAULT_LAYOUT);
    const workerId = integerFlag('worker', values.worker, 0, 0, layout.maxWorkerId);
    const datacenterId = integerFlag('datacenter', values.datacenter, 0, 0, layout.maxDatacenterId);
    const policy = values.rollback ?? 'wait';
    if (!(ROLLBACK_POLICIES as readonly string[]).includes(policy)) {
      throw new IdMintError('INVALID_ARGUMENT', `--rollback must be one of ${ROLLBACK_POLICIES.join(', ')}, got "${policy}"`);
    }
    // The keys come from the configuration (environment, file), never from a flag of this command.
    const opaque = format === 'opaque' ? (OpaqueIds.fromConfig(configFromFlags({ config: values.config }).config.opaque.keys) ?? failNoKeys()) : undefined;
    const generator = new SnowflakeGenerator({
      clock: new MonotonicClock(),
      layout,
      workerId,
      datacenterId,
      rollback: { policy: policy as RollbackPolicyName },
    });
    for (let done = 0; done < count; done += CHUNK) {
      const ids = generator.nextBatch(Math.min(CHUNK, count - done));
      await io.out(`${(opaque === undefined ? ids : opaque.snowflakeIds(ids)).join('\n')}\n`);
    }
    return 0;
  },
};

function failNoKeys(): never {
  throw noOpaqueKeys('--format opaque');
}
