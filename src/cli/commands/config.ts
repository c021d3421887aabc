import { IdMintError } from '../../core/errors.ts';
import { originText, redacted, showValue } from '../../config/load.ts';
import { configKeys } from '../../config/schema.ts';
import { parseCommandArgs } from '../args.ts';
import {
  configFlagHelp,
  configFlagOptions,
  configFromFlags,
  normalizeBooleanFlags,
} from '../config-flags.ts';
import type { CliCommand } from '../io.ts';

export const configCommand: CliCommand = {
  name: 'config',
  summary: 'check the server configuration without starting (idmint config check)',
  help: `Usage: idmint config check [--config FILE] [--json] [flags]

Reads the configuration exactly as "idmint serve" would (file < environment < flags), validates
it, and prints every key with its value and where the value came from. Tokens and passwords in
URLs are never printed.
Exits 0 when the configuration is valid, 2 with a one-line message naming the key otherwise.

Options:
      --json                            print the keys as one JSON object instead of a table
${configFlagHelp()}
  -h, --help                            show this help`,

  async run(argv, io) {
    const { values, positionals } = parseCommandArgs(
      normalizeBooleanFlags(argv),
      { ...configFlagOptions(), json: { type: 'boolean' } },
      { min: 0, max: 1, name: 'check' },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    if (positionals[0] !== 'check') {
      throw new IdMintError(
        'INVALID_ARGUMENT',
        positionals[0] === undefined
          ? 'missing subcommand: idmint config check'
          : `unknown subcommand "${positionals[0]}"; use: idmint config check`,
      );
    }
    const { config, origins } = configFromFlags(values);
    const rows = configKeys().map((key) => {
      const raw = key.key
        .split('.')
        .reduce<unknown>((node, part) => (node as Record<string, unknown>)[part], config);
      // Backend URLs may carry a password: never printed, like tokens.
      const value = redacted(raw);
      const origin = originText(origins.get(key.key) ?? 'default');
      return {
        key: key.key,
        value: showValue(key, value),
        json: key.spec.secret === true ? showValue(key, value) : value,
        origin,
      };
    });
    if (values.json === true) {
      const keys = Object.fromEntries(
        rows.map((r) => [r.key, { value: r.json, origin: r.origin }]),
      );
      await io.out(`${JSON.stringify({ valid: true, keys })}\n`);
      return 0;
    }
    const width = Math.max(...rows.map((r) => r.key.length)) + 2;
    const valueWidth = Math.min(48, Math.max(...rows.map((r) => r.value.length))) + 2;
    const value = (r: (typeof rows)[number]) =>
      r.value.length >= valueWidth ? `${r.value}  ` : r.value.padEnd(valueWidth);
    const lines = rows.map((r) => `${r.key.padEnd(width)}${value(r)}${r.origin}`);
    await io.out(`configuration is valid\n\n${lines.join('\n')}\n`);
    return 0;
  },
};
