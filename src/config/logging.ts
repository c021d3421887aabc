import Type from 'typebox';
import { integer, oneOf, onOff } from './keys.ts';

/** What the server tells its operators: Prometheus metrics and JSON log lines. */

/** pino's levels, most severe first, and `silent`. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const MetricsConfig = Type.Object(
  {
    enabled: onOff({
      env: 'IDMINT_METRICS',
      default: true,
      doc: 'Serve Prometheus metrics at `/metrics`.',
    }),
    // A bound on the series per scrape whatever the number of tags (docs/operations.md, Sizing).
    maxTagSeries: integer({
      env: 'IDMINT_METRICS_MAX_TAG_SERIES',
      default: 500,
      min: 0,
      max: 100_000,
      doc:
        'Tags in use with metric series of their own (`tag` label); the others are summed ' +
        'under `tag="_other"`. Idle tags have no series.',
    }),
  },
  { additionalProperties: false },
);

export const LogConfig = Type.Object(
  {
    level: oneOf({
      env: 'IDMINT_LOG_LEVEL',
      default: 'info',
      values: LOG_LEVELS,
      doc: 'Least severe log level written (JSON lines on stdout).',
    }),
    requests: onOff({
      env: 'IDMINT_LOG_REQUESTS',
      default: false,
      doc: 'Log one line per request. Off by default: at these request rates it costs throughput.',
    }),
  },
  { additionalProperties: false },
);
