import { buildServer } from '../../server/app.ts';
import { parseCommandArgs } from '../args.ts';
import { configFlagHelp, configFlagOptions, configFromFlags, normalizeBooleanFlags } from '../config-flags.ts';
import type { CliCommand } from '../io.ts';

export const serveCommand: CliCommand = {
  name: 'serve',
  summary: 'run the idmint HTTP server (segment and snowflake mode)',
  help: `Usage: idmint serve [--config FILE] [flags]

Runs the ID server until SIGTERM or SIGINT, then shuts down gracefully: stops accepting, lets
in-flight requests finish, releases the worker-ID lease and closes the store. A second signal
exits at once.

With no configuration at all it listens on 127.0.0.1:8080, keeps segment tags in
./data/idmint.db (SQLite) and issues snowflake IDs as worker 0.

Options:
${configFlagHelp()}
  -h, --help                            show this help`,

  async run(argv, io) {
    const { values } = parseCommandArgs(normalizeBooleanFlags(argv), configFlagOptions(), { min: 0, max: 0 });
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    const { config } = configFromFlags(values);
    // Signals are caught before anything is opened: one that arrives while the store is opened or
    // the lease acquired still leads to a clean shutdown (right after start-up finishes).
    const stop = new Promise<NodeJS.Signals>((resolve) => {
      const first = (signal: NodeJS.Signals) => {
        process.off('SIGTERM', first);
        process.off('SIGINT', first);
        const again = (second: NodeJS.Signals) => {
          io.err(`idmint serve: second signal (${second}): exiting without finishing shutdown\n`);
          process.exit(1);
        };
        process.once('SIGTERM', again);
        process.once('SIGINT', again);
        resolve(signal);
      };
      process.on('SIGTERM', first);
      process.on('SIGINT', first);
    });
    const server = await buildServer(config);
    try {
      await server.listen();
    } catch (error) {
      await server.close();
      throw error;
    }
    const signal = await stop;
    server.log.info({ signal }, 'signal received');
    await server.close();
    return 0;
  },
};
