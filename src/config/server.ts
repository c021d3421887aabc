import Type from 'typebox';
import { duration, integer, integerOrWord, text } from './keys.ts';

/**
 * The HTTP server: where it listens, and the limits of its API. The bounds here are the server's
 * own (no library component takes these values); each duration stays below the timers' limit.
 */

/** The most processes `serve` runs on one port. */
export const MAX_PROCESSES = 64;

/** Where the server listens: top-level keys, as in most servers' configuration. */
export const LISTEN_KEYS = {
  host: text({
    env: 'IDMINT_HOST',
    default: '127.0.0.1',
    doc: 'Address to listen on; 0.0.0.0 or :: for every interface.',
    pattern: /^[A-Za-z0-9.:%_-]+$/,
    allowed: 'an IP address or host name',
  }),
  // PORT is what container platforms and PaaS (Heroku, Cloud Run, Render ...) set for the process
  // to listen on. IDMINT_PORT wins when both are set: it can only have been set for idmint.
  port: integer({
    env: 'IDMINT_PORT',
    fallbackEnv: 'PORT',
    default: 8080,
    min: 0,
    max: 65535,
    doc:
      'TCP port to listen on; 0 picks a free one (logged at start). PORT is read when ' +
      'IDMINT_PORT is unset.',
  }),
  // 64: far above the cores of any machine one idmint node should span; each process holds a
  // worker ID of its own, and a layout has as few as 32 (twitter: 5 bits).
  processes: integerOrWord({
    env: 'IDMINT_PROCESSES',
    default: 1,
    min: 1,
    max: MAX_PROCESSES,
    word: 'auto',
    meaning: 'the number of CPUs',
    doc:
      'Processes serving the one port (docs/operations.md): each holds its own worker ID and ' +
      'its own segment ranges; a supervisor restarts one that dies.',
  }),
} as const;

export const ApiConfig = Type.Object(
  {
    maxBatch: integer({
      env: 'IDMINT_MAX_BATCH',
      default: 10_000,
      min: 1,
      max: 1_000_000,
      doc:
        'Largest `count` a batch request may ask for; /v1/snowflake is also bounded by what ' +
        'the layout issues in 100 ms.',
    }),
    bodyLimit: integer({
      env: 'IDMINT_BODY_LIMIT',
      default: 16_384,
      min: 256,
      max: 1_048_576,
      doc: 'Largest request body, in bytes (only the tag routes take one).',
    }),
    requestTimeoutMs: duration({
      env: 'IDMINT_REQUEST_TIMEOUT_MS',
      default: 10_000,
      min: 0,
      max: 3_600_000,
      doc: 'Time to receive a whole request before the connection is closed (0: no limit).',
    }),
    keepAliveTimeoutMs: duration({
      env: 'IDMINT_KEEP_ALIVE_TIMEOUT_MS',
      default: 72_000,
      min: 1,
      max: 3_600_000,
      doc:
        'How long an idle keep-alive connection stays open; keep it above your load ' +
        "balancer's idle timeout.",
    }),
    shutdownTimeoutMs: duration({
      env: 'IDMINT_SHUTDOWN_TIMEOUT_MS',
      default: 10_000,
      min: 0,
      max: 600_000,
      doc:
        'On SIGTERM/SIGINT, how long in-flight requests may take before connections are ' +
        'closed anyway.',
    }),
  },
  { additionalProperties: false },
);
