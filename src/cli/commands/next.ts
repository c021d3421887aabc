import { MonotonicClock } from '../../clocks/monotonic-clock.ts';
import { clockNamed } from '../../clocks/named-clock.ts';
import type { ServerConfig } from '../../config/schema.ts';
import { configKeys } from '../../config/schema.ts';
import { ROLLBACK_POLICIES, type RollbackPolicyName } from '../../core/clock-policy.ts';
import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { getLayout, type Layout } from '../../core/layout.ts';
import type { WorkerRegistry } from '../../ports/worker-registry.ts';
import { openConfiguredRegistry } from '../../backends/open-configured.ts';
import { PinnedWorkerRegistry } from '../../registries/pinned-worker-registry.ts';
import { ID_FAMILIES, IdFamilies, type IdFamily } from '../../service/id-families.ts';
import { localNodeIdentity } from '../../service/node-identity.ts';
import { OpaqueIds, noOpaqueKeys } from '../../service/opaque-ids.ts';
import { SnowflakeWorker, type WorkerRollbackOptions } from '../../service/snowflake-worker.ts';
import { integerFlag, parseCommandArgs } from '../args.ts';
import { configFlagRows, configFromFlags } from '../config-flags.ts';
import { configuredSpread } from '../../config/snowflake.ts';
import { backendFailure } from '../environment-errors.ts';
import type { CliCommand, CliExit, CliIo } from '../io.ts';
import { firstSignal, isSecondSignal } from '../signals.ts';

const MAX_COUNT = 10_000_000;
/** IDs per write: large enough to be fast, small enough to keep memory flat for 10M IDs. */
const CHUNK = 65_536;
/**
 * What `--format` takes: the snowflake IDs of a local generator, the families, and opaque snowflake
 * IDs.
 */
const FORMATS = ['snowflake', ...ID_FAMILIES, 'opaque'] as const;
type Format = (typeof FORMATS)[number];

/**
 * The configuration keys `next` takes as flags: where the worker ID comes from, and how the
 * generator runs (as `idmint serve` reads them). Not the cache file (the weak dependency is a
 * server's, to restart during an outage; a command that prints IDs and exits has no use for it,
 * and must not take a server's file), nor the datacenter and rollback keys, which have this
 * command's own `--datacenter` and `--rollback`.
 */
const NOT_FOR_NEXT = ['snowflake.enabled', 'snowflake.cacheFile', 'snowflake.datacenterId'];
const SNOWFLAKE_KEYS = configKeys().filter(
  (key) =>
    key.key.startsWith('snowflake.') &&
    !NOT_FOR_NEXT.includes(key.key) &&
    !key.key.startsWith('snowflake.rollback.'),
);
const TEXT_FLAG = { type: 'string' } as const;
/** `-l` too: the short form `--layout` had before it became the configuration's flag. */
const LAYOUT_FLAG = { type: 'string', short: 'l' } as const;
/** Flags that only a snowflake generator (plain or opaque) takes. */
const SNOWFLAKE_FLAGS = [
  'worker',
  'datacenter',
  'rollback',
  ...SNOWFLAKE_KEYS.map((key) => key.flag),
];

export const nextCommand: CliCommand = {
  name: 'next',
  summary:
    'print new IDs: snowflake (on a leased worker ID), uuid7, uuid4, ulid, objectid or opaque',
  help: `Usage: idmint next [--format F] [--count N] [--worker W] [--datacenter D] [--layout NAME]
                   [--rollback POLICY]

Prints N new IDs, one per line, from a generator in this process.

Snowflake IDs take their worker ID the way "idmint serve" does: leased from the configured
registry (IDMINT_WORKER_REGISTRY; by default static:0, its state under ./data), held while
the IDs are made and released on exit. A static worker ID held by another process of this host
(a running server) is refused, never shared: pass --worker with one no other process uses.

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
  -w, --worker W       snowflake, opaque: this worker ID instead of the registry's choice: static:W
                       (locked on this host), or W leased from the coordinator; refused while a
                       live process holds W
  -d, --datacenter D   snowflake, opaque: datacenter ID, for layouts with a datacenter field
                       (default IDMINT_DATACENTER_ID, 0)
      --rollback P     snowflake, opaque: clock-rollback policy: ${ROLLBACK_POLICIES.join(', ')}
                       (default IDMINT_ROLLBACK_POLICY, wait)
  -c, --config FILE    config file (also IDMINT_CONFIG): the registry, the layout, opaque.keys
  -h, --help           show this help

Snowflake, opaque: the worker registry and generator settings, as "idmint serve" takes them:
${configFlagRows(SNOWFLAKE_KEYS).join('\n')}

The other families need no coordination.`,

  async run(argv, io) {
    const { values } = parseCommandArgs(
      argv,
      {
        format: { type: 'string', short: 'f' },
        count: { type: 'string', short: 'n' },
        worker: { type: 'string', short: 'w' },
        datacenter: { type: 'string', short: 'd' },
        rollback: { type: 'string' },
        config: { type: 'string', short: 'c' },
        ...Object.fromEntries(
          SNOWFLAKE_KEYS.map((key) => [key.flag, key.flag === 'layout' ? LAYOUT_FLAG : TEXT_FLAG]),
        ),
      },
      { min: 0, max: 0 },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    const format = (values.format ?? 'snowflake') as Format;
    if (!FORMATS.includes(format))
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `--format must be one of ${FORMATS.join(', ')}, got "${values.format}"`,
      );
    const count = integerFlag('count', values.count, 1, 1, MAX_COUNT);
    if (format !== 'snowflake' && format !== 'opaque') {
      const misplaced = SNOWFLAKE_FLAGS.find(
        (flag) => (values as Record<string, unknown>)[flag] !== undefined,
      );
      if (misplaced !== undefined)
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `--${misplaced} belongs to --format snowflake or opaque, not ${format}`,
        );
      const families = new IdFamilies({ clock: new MonotonicClock() });
      for (let done = 0; done < count; done += CHUNK)
        await io.out(
          `${families.next(format as IdFamily, Math.min(CHUNK, count - done)).join('\n')}\n`,
        );
      return 0;
    }
    const config = configFromFlags(values as Record<string, string | undefined>).config;
    const layout = getLayout(config.snowflake.layout);
    const maxWorkerId = layout.maxWorkerId;
    const workerId =
      values.worker === undefined
        ? undefined
        : integerFlag('worker', values.worker, 0, 0, maxWorkerId);
    const datacenter = config.snowflake.datacenterId;
    const datacenterId = integerFlag(
      'datacenter',
      values.datacenter,
      datacenter,
      0,
      layout.maxDatacenterId,
    );
    const rollback = rollbackOf(values.rollback, config);
    // The keys come from the configuration (environment, file), never from a flag of this command.
    const opaque =
      format === 'opaque' ? (OpaqueIds.fromConfig(config.opaque.keys) ?? failNoKeys()) : undefined;
    return withStopSignals(io, async (stopped) => {
      const registry = await openRegistry(config, workerId);
      try {
        const worker = await startWorker(registry, config, { layout, datacenterId, rollback });
        try {
          const chunk = Math.min(CHUNK, worker.maxBatch);
          for (let done = 0; done < count && stopped() === undefined; done += chunk) {
            const ids = await worker.nextBatchAsync(Math.min(chunk, count - done));
            await io.out(`${(opaque === undefined ? ids : opaque.snowflakeIds(ids)).join('\n')}\n`);
          }
        } finally {
          // Fenced, then released with the exact last timestamp: the next holder (a server, the
          // next run) may take the worker ID at once, and starts after these IDs.
          await worker.close();
        }
      } finally {
        await registry.close();
      }
    });
  },
};

/** `--rollback P`, or the configured policy (with its bounds). */
function rollbackOf(flag: string | undefined, config: ServerConfig): WorkerRollbackOptions {
  if (flag === undefined) return config.snowflake.rollback as WorkerRollbackOptions;
  if (!(ROLLBACK_POLICIES as readonly string[]).includes(flag)) {
    const allowed = ROLLBACK_POLICIES.join(', ');
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `--rollback must be one of ${allowed}, got "${flag}"`,
    );
  }
  return { policy: flag as RollbackPolicyName };
}

/**
 * The configured registry, as `idmint serve` opens it but for the cache file. `--worker W`
 * narrows it to W: `static:W` beside the configured static state (the host lock refuses W while
 * another process of the host holds it), or W alone from a coordinator (refused while any live
 * node holds it).
 */
async function openRegistry(
  config: ServerConfig,
  workerId: number | undefined,
): Promise<WorkerRegistry> {
  const s = config.snowflake;
  const isStatic = s.registry.startsWith('static:');
  const url = isStatic && workerId !== undefined ? `static:${workerId}` : s.registry;
  let registry: WorkerRegistry;
  try {
    // No cache file: a one-off command's lease is not worth keeping for a restart.
    registry = await openConfiguredRegistry(s, { url, cache: false });
  } catch (error) {
    throw await registryFailure(error, s.registry);
  }
  return isStatic || workerId === undefined
    ? registry
    : new PinnedWorkerRegistry(registry, workerId);
}

/** A worker on a lease of `registry`, after the same start-up checks as a server's. */
async function startWorker(
  registry: WorkerRegistry,
  config: ServerConfig,
  options: {
    readonly layout: Layout;
    readonly datacenterId: number;
    readonly rollback: WorkerRollbackOptions;
  },
): Promise<SnowflakeWorker> {
  const s = config.snowflake;
  try {
    return await SnowflakeWorker.start({
      registry,
      // This host, port 0: no port is served. The identity only lets a node have its last worker
      // ID back; the registry never hands one ID to two live holders, whatever their identity.
      identity: localNodeIdentity(0),
      clock: clockNamed(s.clock),
      layout: options.layout,
      datacenterId: options.datacenterId,
      rollback: options.rollback,
      sequenceSpread: configuredSpread(s),
      peerClockCheck: s.peerClockCheck,
      maxPeerSkewMs: s.maxPeerSkewMs,
    });
  } catch (error) {
    throw await registryFailure(error, s.registry);
  }
}

/**
 * A registry failure in one line. A worker ID held by another process says what this command
 * can do about it; an unreachable registry names its setting (and a host that does not resolve).
 */
async function registryFailure(error: unknown, url: string): Promise<unknown> {
  if (isIdMintError(error, 'WORKER_IDS_EXHAUSTED')) {
    const hint = 'here: pass --worker <id> with a worker ID no other process uses (on any host)';
    return new IdMintError('WORKER_IDS_EXHAUSTED', `${error.message}; ${hint}`, {
      cause: error,
      ...(error.details === undefined ? {} : { details: error.details }),
    });
  }
  return (
    (await backendFailure(error, [
      { url, role: 'worker-registry', name: 'IDMINT_WORKER_REGISTRY' },
    ])) ?? error
  );
}

/**
 * Runs `work` with SIGINT and SIGTERM caught: the first stops it at its next chunk, so the lease
 * is released before the process ends (by that signal, as an interrupted program should); a
 * second one exits at once (the lease then lapses: a coordinator's by its TTL, a static one's
 * lock with the process, its reservation honoured by the next holder).
 */
async function withStopSignals(
  io: CliIo,
  work: (stopped: () => NodeJS.Signals | undefined) => Promise<void>,
): Promise<CliExit> {
  let received: ReturnType<typeof firstSignal> | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (received === undefined) {
      received = firstSignal(signal);
      return;
    }
    if (!isSecondSignal(received, signal)) return;
    io.err(`idmint next: second signal (${signal}): exiting without releasing the worker ID\n`);
    process.exit(1);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    await work(() => received?.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  return received === undefined ? 0 : { signal: received.signal };
}

function failNoKeys(): never {
  throw noOpaqueKeys('--format opaque');
}
