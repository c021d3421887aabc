import { DEFAULT_LAYOUT, LAYOUT_PRESETS, decomposeId, getLayout } from '../../core/layout.ts';
import { parseCommandArgs } from '../args.ts';
import type { CliCommand } from '../io.ts';

export const decodeCommand: CliCommand = {
  name: 'decode',
  summary: 'print the time, worker and sequence inside a snowflake ID',
  help: `Usage: idmint decode <id> [--layout NAME] [--json]

Splits a snowflake ID into its parts.

Options:
  -l, --layout NAME   bit layout the ID was made with: ${LAYOUT_PRESETS.join(', ')} (default ${DEFAULT_LAYOUT})
      --json          print one JSON object: timestamp (ms since 1970), date, workerId, sequence,
                      and datacenterId where the layout has one
  -h, --help          show this help`,

  async run(argv, io) {
    const { values, positionals } = parseCommandArgs(
      argv,
      { layout: { type: 'string', short: 'l' }, json: { type: 'boolean' } },
      { min: 1, max: 1, name: 'id' },
    );
    if (values.help === true) {
      await io.out(`${this.help}\n`);
      return 0;
    }
    const layout = getLayout(values.layout ?? DEFAULT_LAYOUT);
    const id = positionals[0] ?? '';
    const parts = decomposeId(id, layout);
    if (values.json === true) {
      await io.out(`${JSON.stringify({ id, layout: layout.name, ...parts, date: parts.date.toISOString() })}\n`);
      return 0;
    }
    const rows: [string, string][] = [
      ['id', id],
      ['layout', layout.name],
      ['timestamp', `${parts.timestamp} (${parts.date.toISOString()})`],
      ...(parts.datacenterId === undefined ? [] : [['datacenter', String(parts.datacenterId)] as [string, string]]),
      ['worker', String(parts.workerId)],
      ['sequence', String(parts.sequence)],
    ];
    await io.out(rows.map(([key, value]) => `${key.padEnd(11)}${value}\n`).join(''));
    return 0;
  },
};
