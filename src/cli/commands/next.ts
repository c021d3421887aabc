import { MonotonicClock } from '../../clocks/monotonic-clock.ts';
import { ROLLBACK_POLICIES, type RollbackPolicyName } from '../../core/clock-policy.ts';
import { IdMintError } from '../../core/errors.ts';
import { DEFAULT_LAYOUT, LAYOUT_PRESETS, getLayout } from '../../core/layout.ts';
import { SnowflakeGenerator } from '../../core/snowflake.ts';
import { integerFlag, parseCommandArgs } from '../args.ts';
import type { CliCommand } from '../io.ts';

const MAX_COUNT = 10_000_000;
/** IDs per write: large enough to be fast, small enough to keep memory flat for 10M IDs. */
const CHUNK = 65_536;

export const nextCommand: CliCommand = {
  name: 'next',
  summary: 'print new snowflake IDs from a local generator (no server needed)',
  help: `Usage: idmint next [--count N] [--worker W] [--datacenter D] [--layout NAME] [--rollback POLICY]

Prints N snowflake IDs, one per line, strictly increasing, from a generator in this process.

Options:
  -n, --count N        how many IDs (1 to ${MAX_COUNT}; default 1)
  -w, --worker W       worker ID (0 to the layout's maximum; default 0)
  -d, --datacenter D   datacenter ID, for layouts with a datacenter field (default 0)
  -l, --layout NAME    bit layout: ${LAYOUT_PRESETS.join(', ')} (default ${DEFAULT_LAYOUT})
      --rollback P     clock-rollback policy: ${ROLLBACK_POLICIES.join(', ')} (default wait)
  -h, --help           show this help

Processes that run at the same time must use different worker IDs; the idmint server leases
worker IDs for you.`,

  async run(argv, io) {
    const { values } = parseCommandArgs(
      argv,
      {
        count: { type: 'string', short: 'n' },
        worker: { type: 'string', short: 'w' },
        datacenter: { type: 'string', short: 'd' },
        layout: { type: 'string', short: 'l' },
        rollback: { type: 'string' },
      },
      { min: 0, max: 0 },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    const layout = getLayout(values.layout ?? DEFAULT_LAYOUT);
    const count = integerFlag('count', values.count, 1, 1, MAX_COUNT);
    const workerId = integerFlag('worker', values.worker, 0, 0, layout.maxWorkerId);
    const datacenterId = integerFlag('datacenter', values.datacenter, 0, 0, layout.maxDatacenterId);
    const policy = values.rollback ?? 'wait';
    if (!(ROLLBACK_POLICIES as readonly string[]).includes(policy)) {
      throw new IdMintError('INVALID_ARGUMENT', `--rollback must be one of ${ROLLBACK_POLICIES.join(', ')}, got "${policy}"`);
    }
    const generator = new SnowflakeGenerator({
      clock: new MonotonicClock(),
      layout,
      workerId,
      datacenterId,
      rollback: { policy: policy as RollbackPolicyName },
    });
    for (let done = 0; done < count; done += CHUNK) {
      const ids = generator.nextBatch(Math.min(CHUNK, count - done));
      await io.out(`${ids.join('\n')}\n`);
    }
    return 0;
  },
};
