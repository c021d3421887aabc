import cluster from 'node:cluster';
import { buildServer, type IdMintServer } from '../../server/app.ts';
import type { ServerConfig } from '../../config/schema.ts';
import { isStoreSet } from '../../backends/open-configured.ts';
import { withTimeout } from '../../shared/timeout.ts';
import { parseCommandArgs } from '../args.ts';
import {
  configFlagHelp,
  configFlagOptions,
  configFromFlags,
  normalizeBooleanFlags,
} from '../config-flags.ts';
import { backendFailure, listenFailure, type BackendSetting } from '../environment-errors.ts';
import type { CliCommand, CliExit, CliIo } from '../io.ts';
import { processCount, processSlot, slotFlags } from '../process-slots.ts';
import { firstSignal, isSecondSignal } from '../signals.ts';
import { supervise, type ListeningMessage } from '../supervisor.ts';

/**
 * After SIGTERM or SIGINT during start-up, how long the start-up may take to wind down (stop at
 * its next step, close what it opened) before the process exits anyway. A step in flight is
 * bounded by its own timeout, which may be minutes; an operator's Ctrl-C must not wait for it.
 */
const STARTUP_STOP_GRACE_MS = 2000;

export const serveCommand: CliCommand = {
  name: 'serve',
  summary: 'run the idmint HTTP server (segment and snowflake mode)',
  help: `Usage: idmint serve [--config FILE] [flags]

Runs the ID server until SIGTERM or SIGINT, then shuts down gracefully: stops accepting, lets
in-flight requests finish, releases the worker-ID lease and gives unissued segment IDs back to
the store, and exits 0. A second signal exits at once (the same signal again within a second
counts as a copy of the first: npm start passes a terminal's Ctrl-C on). A signal during
start-up (a store or registry slow to answer) stops it within a few seconds; the process then
ends by that signal.

With no configuration at all it listens on 127.0.0.1:8080, keeps segment tags in
./data/idmint.db (SQLite) and issues snowflake IDs as worker 0.

With --processes N (or auto: one per CPU) a supervisor runs N processes on the one port, each
with its own worker ID (static:K gives K to K+N-1) and segment ranges, restarts one that dies
(after 100 ms, doubling), gives up on one that ends 6 times in a row without serving 30 s, and
passes SIGTERM/SIGINT on to all of them; a second signal kills them all (docs/operations.md).

Exit status: 0 after a graceful shutdown; 2 for an invalid configuration; 1 when the environment
is at fault (port in use, host not of this machine, store or registry unreachable) or after a
forced stop; 3 when the supervisor of --processes gave up on a process that kept ending.

Options:
${configFlagHelp()}
  -h, --help                            show this help`,

  async run(argv, io) {
    const { values } = parseCommandArgs(normalizeBooleanFlags(argv), configFlagOptions(), {
      min: 0,
      max: 0,
    });
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    const loaded = configFromFlags(values).config;
    // --processes N: this process supervises N children, each of which runs the rest of this
    // function in a slot of its own (src/cli/process-slots.ts) with what must not be shared.
    const slot = cluster.isWorker ? processSlot() : undefined;
    if (slot === undefined) {
      const processes = processCount(loaded);
      if (processes > 1) return supervise(loaded, processes);
    }
    const config =
      slot === undefined
        ? loaded
        : configFromFlags({ ...values, ...slotFlags(loaded, slot) }).config;
    // A child whose supervisor is gone (killed with SIGKILL) shuts down as on SIGTERM rather
    // than serve on with no one to restart or stop it.
    if (slot !== undefined) process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
    // Its stderr is a pipe to the supervisor (which relays it): once the supervisor is gone, a
    // line written while shutting down has nowhere to go, and must not crash the shutdown.
    if (slot !== undefined) process.stderr.on('error', () => {});
    // Signals are caught before anything is opened. One during start-up aborts it; one while
    // serving starts the graceful shutdown; a second one exits at once (but for a copy of the
    // first).
    const startup = new AbortController();
    const stop = new Promise<NodeJS.Signals>((resolve) => {
      const first = (signal: NodeJS.Signals) => {
        const received = firstSignal(signal);
        process.off('SIGTERM', first);
        process.off('SIGINT', first);
        const again = (second: NodeJS.Signals) => {
          if (!isSecondSignal(received, second)) return;
          io.err(`idmint serve: second signal (${second}): exiting without finishing shutdown\n`);
          process.exit(1);
        };
        process.on('SIGTERM', again);
        process.on('SIGINT', again);
        startup.abort(new Error(`${signal} during start-up`));
        resolve(signal);
      };
      process.on('SIGTERM', first);
      process.on('SIGINT', first);
    });

    const building = buildServer(config, {
      signal: startup.signal,
      ...(slot === undefined ? {} : { processSlot: slot }),
    });
    const started = await Promise.race([
      building.then((server) => ({ server })),
      stop.then((signal) => ({ signal })),
    ]).catch(async (error: unknown) => {
      throw (await backendFailure(error, backendSettings(config))) ?? error;
    });
    if ('signal' in started) return stopStartup(building, started.signal, io);

    const { server } = started;
    try {
      const url = await server.listen();
      if (slot !== undefined)
        process.send?.({ type: 'idmint-listening', url } satisfies ListeningMessage);
    } catch (error) {
      await server.close();
      throw listenFailure(error, config.host, config.port) ?? error;
    }
    const signal = await stop;
    server.log.info({ signal }, 'signal received');
    await server.close();
    return 0;
  },
};

/** The backend URLs serve opens, with the variables that set them. */
function backendSettings(config: ServerConfig): BackendSetting[] {
  const { segment, snowflake } = config;
  const set = isStoreSet(segment);
  return [
    {
      url: set ? (segment.stores[0] ?? '') : segment.store,
      role: 'segment-store',
      name: set ? 'IDMINT_SEGMENT_STORES' : 'IDMINT_SEGMENT_STORE',
      timeoutMs: segment.timeoutMs,
      set,
    },
    {
      url: snowflake.registry,
      role: 'worker-registry',
      name: 'IDMINT_WORKER_REGISTRY',
      timeoutMs: snowflake.registryTimeoutMs,
    },
  ];
}

/**
 * A signal arrived while the server was starting: start-up stops at its next step and closes
 * what it opened. If it has not within {@link STARTUP_STOP_GRACE_MS} (a step still waiting on a
 * slow store), the process ends anyway: a lease acquired meanwhile expires on its own, as a
 * killed node's does, and no ID was served.
 */
async function stopStartup(
  building: Promise<IdMintServer>,
  signal: NodeJS.Signals,
  io: CliIo,
): Promise<CliExit> {
  const deadline = Date.now() + STARTUP_STOP_GRACE_MS;
  const left = () => Math.max(0, deadline - Date.now());
  const timedOut = () => new Error('start-up did not stop in time');
  const server = await withTimeout(building, left(), timedOut).catch(() => undefined);
  if (server !== undefined)
    await withTimeout(server.close(), left(), timedOut).catch(() => undefined);
  io.err(`idmint serve: ${signal} during start-up: stopped before serving\n`);
  return { signal };
}
