import { readFileSync } from 'node:fs';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino, type DestinationStream, type Logger } from 'pino';
import { getLayout } from '../core/layout.ts';
import type { SnowflakeWorkerEvent } from '../service/snowflake-worker.ts';
import { openBackends, type BackendOptions, type Backends } from './backends.ts';
import type { ServerConfig } from './config.ts';
import { Authorizer, installAuth } from './plugins/auth.ts';
import { installErrorHandling, sendError, toIdMintError } from './plugins/errors.ts';
import { IssuedCounts, ServerMetrics } from './plugins/metrics.ts';
import { installOpenApi } from './plugins/openapi.ts';
import { READINESS_SCHEMA, healthRoutes, type ReadinessCheck } from './routes/health.ts';
import { segmentRoutes } from './routes/segment.ts';
import { snowflakeRoutes } from './routes/snowflake.ts';
import { tagRoutes } from './routes/tags.ts';

/** Options beside the configuration, for embedding and tests. */
export interface ServerOptions extends BackendOptions {
  /** Where JSON log lines go; default standard output. */
  readonly logStream?: DestinationStream;
}

/** A built server: the Fastify app with its ID sources, not yet listening. */
export interface IdMintServer {
  /** The Fastify instance; tests call `app.inject()`. */
  readonly app: FastifyInstance;
  readonly config: ServerConfig;
  readonly log: Logger;
  /** Binds `config.host:config.port`; resolves to the URL (with the real port when port is 0). */
  listen(): Promise<string>;
  /**
   * Graceful shutdown: readiness turns false, no new connections are accepted, in-flight
   * requests finish (for at most `api.shutdownTimeoutMs`), then the worker lease is released and
   * the store closed. Idempotent; every call resolves when shutdown is complete.
   */
  close(): Promise<void>;
}

/** How loud each lease event is: losing the lease stops snowflake IDs, so it is an error. */
const WORKER_EVENT_LEVELS: Readonly<Record<SnowflakeWorkerEvent['type'], 'info' | 'warn' | 'error'>> = {
  acquired: 'info',
  released: 'info',
  recovered: 'info',
  'waiting-for-clock': 'warn',
  'peer-clock-skew': 'warn',
  'peer-check-skipped': 'warn',
  'renew-failed': 'warn',
  'switched-worker': 'warn',
  'lease-lost': 'error',
  'recovery-failed': 'error',
  'switch-failed': 'error',
};

/**
 * How idmint's Fastify routes requests, shared with the benchmark's bare route so the two differ
 * only in the work a route does (HEAD routes alone cost a bare route about a quarter of its req/s).
 */
export const ROUTING_OPTIONS = {
  // A HEAD on an ID route would draw an ID and throw it away.
  exposeHeadRoutes: false,
  // Tags are up to 128 characters; longer ones must reach the check and get a 400, not a 404.
  routerOptions: { maxParamLength: 256, ignoreTrailingSlash: true },
} as const;

const { version: VERSION } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

/**
 * Builds the server from a validated configuration: opens the segment store and leases a worker
 * ID (so a server that returns is ready to issue), then assembles the routes. Does not listen.
 */
export async function buildServer(config: ServerConfig, options: ServerOptions = {}): Promise<IdMintServer> {
  const log = pino(
    { level: config.log.level, base: { service: 'idmint', pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime },
    options.logStream ?? pino.destination({ dest: 1, sync: true }),
  );
  const metrics = config.metrics.enabled ? new ServerMetrics() : undefined;
  const backends = await openBackends(config, {
    ...options,
    onWorkerEvent: (event) => {
      const fields = { workerId: event.workerId, ...(event.error === undefined ? {} : { code: event.error.code }) };
      if (WORKER_EVENT_LEVELS[event.type] === 'info') log.info(fields, event.message);
      else if (WORKER_EVENT_LEVELS[event.type] === 'warn') log.warn(fields, event.message);
      else log.error(fields, event.message);
    },
    onSegmentEvent: (event) => {
      metrics?.segmentEvent(event);
      // Failed loads are bounded by retryAfterMs per tag, refreshes by tagRefreshMs: few lines.
      if (event.error !== undefined) {
        log.warn({ tag: event.type === 'load' ? event.tag : undefined, code: event.error.code, err: event.error.message }, event.type === 'load' ? 'segment range load failed' : 'tag list refresh failed');
      }
    },
  });
  const state: ServerState = { draining: false };
  let app: FastifyInstance;
  try {
    app = await createApp(config, backends, log, state, metrics);
    await app.ready();
  } catch (error) {
    await backends.close();
    throw error;
  }

  let closing: Promise<void> | undefined;
  return {
    app,
    config,
    log,
    async listen() {
      const url = await app.listen({ host: config.host, port: config.port });
      const { segments, snowflake } = backends;
      log.info(
        {
          url,
          segment: segments === undefined ? 'off' : { store: segments.store.backend },
          snowflake: snowflake === undefined ? 'off' : { registry: snowflake.state().backend, workerId: snowflake.workerId, layout: snowflake.layout.name },
        },
        'idmint listening',
      );
      return url;
    },
    close() {
      closing ??= shutdown(app, backends, config, log, state);
      return closing;
    },
  };
}

/** What changes over a server's life. */
interface ServerState {
  /** Set when shutdown starts: readiness fails from then on. */
  draining: boolean;
}

async function shutdown(app: FastifyInstance, backends: Backends, config: ServerConfig, log: Logger, state: ServerState): Promise<void> {
  log.info('idmint shutting down');
  state.draining = true;
  // Node closes connections that are idle when close() starts; a keep-alive connection busy with
  // a request then would stay open until its idle timeout, so keep reaping idle ones.
  const reaper = setInterval(() => app.server.closeIdleConnections(), 100);
  const deadline = setTimeout(() => {
    log.warn({ timeoutMs: config.api.shutdownTimeoutMs }, 'shutdown timeout: closing connections with requests still in flight');
    app.server.closeAllConnections();
  }, config.api.shutdownTimeoutMs);
  try {
    await app.close();
  } finally {
    clearInterval(reaper);
    clearTimeout(deadline);
  }
  // Only now, with no request left that could draw an ID, is the lease given back.
  await backends.close();
  log.info('idmint stopped');
}

async function createApp(config: ServerConfig, backends: Backends, log: Logger, state: ServerState, metrics: ServerMetrics | undefined): Promise<FastifyInstance> {
  const app = Fastify({
    // Fastify's own logger makes a child logger per request; without request logging it gets
    // none, and start, stop and error lines go to `log` directly.
    ...(config.log.requests ? { loggerInstance: log } : { logger: false }),
    bodyLimit: config.api.bodyLimit,
    requestTimeout: config.api.requestTimeoutMs,
    keepAliveTimeout: config.api.keepAliveTimeoutMs,
    // While draining, requests already on a connection are served (the lease is still held) and
    // answered with Connection: close, rather than turned away with a bare 503.
    return503OnClosing: false,
    ...ROUTING_OPTIONS,
    // Bodies are checked strictly: no type coercion, unknown fields refused rather than dropped.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
    frameworkErrors: (error, _request, reply) => {
      sendError(reply, toIdMintError(error));
    },
  }) as unknown as FastifyInstance;

  installErrorHandling(app, log);
  const authorizer = new Authorizer(config.auth);
  installAuth(app, authorizer);
  const { segments, snowflake } = backends;
  const issued = metrics?.issued ?? new IssuedCounts();
  if (metrics !== undefined) {
    metrics.watch({ ...(snowflake === undefined ? {} : { snowflake }), ...(segments === undefined ? {} : { segments: segments.service }) });
    metrics.instrument(app);
  }
  app.addSchema(READINESS_SCHEMA);
  await installOpenApi(app, VERSION, authorizer.enabled);

  const checks: ReadinessCheck[] = [{ name: 'accepting', check: () => (state.draining ? { ok: false, detail: 'shutting down' } : { ok: true }) }];
  if (snowflake !== undefined) {
    checks.push({
      name: 'snowflake',
      check: () => {
        const worker = snowflake.state();
        return worker.ready ? { ok: true } : { ok: false, detail: `worker ${worker.workerId} ${worker.status}${worker.lastError === null ? '' : `: ${worker.lastError}`}` };
      },
    });
  }
  healthRoutes(app, checks, metrics?.registry);
  segmentRoutes(app, { service: segments?.service, maxBatch: config.api.maxBatch, issued });
  snowflakeRoutes(app, {
    worker: snowflake,
    layout: snowflake?.layout ?? getLayout(config.snowflake.layout),
    maxBatch: config.api.maxBatch,
    issued,
  });
  tagRoutes(app, {
    store: segments?.store,
    // A tag created or re-stepped here is served at once, not after the next periodic refresh.
    onTagChanged: () => segments?.service.refreshTags().catch(() => undefined) ?? Promise.resolve(),
  });
  return app;
}
