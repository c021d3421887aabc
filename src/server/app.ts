import { readFileSync } from 'node:fs';
import Fastify, { type FastifyInstance } from 'fastify';
import { pino, type DestinationStream, type Logger } from 'pino';
import { getLayout } from '../core/layout.ts';
import type { SnowflakeWorkerEvent } from '../service/snowflake-worker.ts';
import { openBackends, type BackendOptions, type Backends } from '../service/backends.ts';
import type { ServerConfig } from '../config/schema.ts';
import { Authorizer, installAuth, loadTinyIdTokens, reloadTinyIdTokens } from './plugins/auth.ts';
import { drainHttpServer } from './plugins/drain.ts';
import { installErrorHandling, sendError, toIdMintError } from './plugins/errors.ts';
import { methodNotAllowed } from './plugins/methods.ts';
import { IssuedCounts, ServerMetrics } from './plugins/metrics.ts';
import { watchSegmentDatabases } from './plugins/segment-database-metrics.ts';
import { installOpenApi } from './plugins/openapi.ts';
import { clientErrorHandler, createHttpServer } from './plugins/protocol.ts';
import { Readiness } from '../contract/operations.ts';
import { healthRoutes, type ReadinessCheck } from './routes/health.ts';
import { segmentRoutes } from './routes/segment.ts';
import { Forwarder } from './forwarding.ts';
import { createServer as createNodeServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { advertisedAddress } from './advertised-address.ts';
import type { OrderedDrawDeps } from './ordered-draws.ts';
import { rangeRoutes } from './routes/range.ts';
import { TINYID_BATCH_SIZE_MAX, tinyIdRoutes } from './routes/tinyid.ts';
import { snowflakeRoutes } from './routes/snowflake.ts';
import { tagRoutes } from './routes/tags.ts';
import { ErrorCounts } from './plugins/error-counts.ts';
import { StatusSampler } from './plugins/status-sampler.ts';
import { dashboardRoutes } from './routes/dashboard.ts';
import { statusRoutes } from './routes/status.ts';
import { familyRoutes } from './routes/families.ts';
import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import type { Clock } from '../ports/clock.ts';
import { IdFamilies } from '../service/id-families.ts';
import { OpaqueIds } from '../service/opaque-ids.ts';

/** Options beside the configuration, for embedding and tests. */
export interface ServerOptions extends BackendOptions {
  /** Where JSON log lines go; default standard output. */
  readonly logStream?: DestinationStream;
  /**
   * Directory of the built dashboard; default the package's dist/dashboard (tests build their own).
   */
  readonly dashboardDir?: string;
  /**
   * The slot of this process under `serve --processes N`: every metric then carries
   * `process="<slot>"`, so series of the N processes behind one port never collide.
   */
  readonly processSlot?: number;
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
   * Graceful shutdown: readiness turns false, no new connections are accepted, requests on open
   * connections are served and each connection closes after its response (see drainHttpServer;
   * for at most `api.shutdownTimeoutMs`), then the worker lease is released and the store
   * closed. Idempotent; every call resolves when shutdown is complete.
   */
  close(): Promise<void>;
}

/** How loud each lease event is: losing the lease stops snowflake IDs, so it is an error. */
const WORKER_EVENT_LEVELS: Readonly<
  Record<SnowflakeWorkerEvent['type'], 'info' | 'warn' | 'error'>
> = {
  acquired: 'info',
  released: 'info',
  recovered: 'info',
  'waiting-for-clock': 'warn',
  'waiting-for-registry': 'warn',
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

/**
 * Connections the kernel completes and holds for the server until it accepts them. Node's
 * default, 511, is too few for a fleet of clients that (re)connect at once, e.g. 1,000 after a
 * deploy: while the event loop is busy, the rest of their SYNs are dropped and each waits for a
 * retransmission, 1 s and then 3 s, before its first request is even sent. Linux caps this at
 * net.core.somaxconn (4096 by default since 5.4).
 */
export const LISTEN_BACKLOG = 4096;

const PACKAGE = JSON.parse(
  readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
) as { version: string; license: string };

/**
 * Builds the server from a validated configuration: opens the segment store and leases a worker
 * ID (so a server that returns is ready to issue), then assembles the routes. Does not listen.
 */
export async function buildServer(
  config: ServerConfig,
  options: ServerOptions = {},
): Promise<IdMintServer> {
  const log = pino(
    {
      level: config.log.level,
      base: { service: 'idmint', pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.logStream ?? pino.destination({ dest: 1, sync: true }),
  );
  const metrics = config.metrics.enabled
    ? new ServerMetrics({ maxTagSeries: config.metrics.maxTagSeries })
    : undefined;
  if (options.processSlot !== undefined)
    metrics?.registry.setDefaultLabels({ process: String(options.processSlot) });
  const status: StatusParts = {
    sampler: new StatusSampler(),
    errors: new ErrorCounts(),
    startedAt: Date.now(),
    dashboardDir: options.dashboardDir,
  };
  // The moment the start begins to wait for its backends, after loading the process (a start
  // that cannot reach them fails within their timeouts of it, docs/errors.md).
  log.debug('opening the segment store and the worker registry');
  const backends = await openBackends(config, {
    ...options,
    onWorkerEvent: (event) => {
      // The error's own line names the registry, its address and the cause (a failed renewal's
      // event message says only what it means for the IDs).
      const fields = {
        workerId: event.workerId,
        ...(event.error === undefined ? {} : { code: event.error.code, err: event.error.message }),
      };
      if (WORKER_EVENT_LEVELS[event.type] === 'info') log.info(fields, event.message);
      else if (WORKER_EVENT_LEVELS[event.type] === 'warn') log.warn(fields, event.message);
      else log.error(fields, event.message);
    },
    onIssuerEvent: (event) => {
      const fields = {
        tag: event.tag,
        epoch: event.epoch.toString(),
        ...(event.error === undefined ? {} : { code: event.error.code, err: event.error.message }),
      };
      const messages = {
        claimed: 'issuing a cluster-ordered tag: its issuer lease claimed, a fresh range first',
        lost: 'stopped issuing a cluster-ordered tag: its issuer lease was lost',
        released: "a cluster-ordered tag's issuer lease given back",
        'renew-failed': "a cluster-ordered tag's issuer lease could not be renewed; retrying",
        idle: "a cluster-ordered tag's issuer lease given back: nothing issued here for a while",
      } as const;
      if (event.type === 'claimed' || event.type === 'released' || event.type === 'idle')
        log.info(fields, messages[event.type]);
      else log.warn(fields, messages[event.type]);
    },
    onSegmentEvent: (event) => {
      metrics?.segmentEvent(event);
      status.sampler.segmentEvent(event);
      if (event.type === 'history') {
        // Once per new history per node (docs/segments.md, Failover and restore).
        const database = event.database === undefined ? {} : { database: event.database };
        const fields = { table: event.table, ...database, from: event.from ?? null, to: event.to };
        if (event.action === 'fenced') {
          const message =
            'segment store on a new history: every tag fenced before any ID is issued from it';
          log.warn({ ...fields, tags: event.tags, margin: event.margin }, message);
        } else {
          log.warn(
            fields,
            'segment store on a new history, fenced already (by another node or an operator)',
          );
        }
        return;
      }
      if (event.type === 'heal') {
        // The store went back further than any fence covered: this node is safe, others may not be.
        const { tag, range, highest } = event;
        log.error(
          {
            tag,
            start: range.start.toString(),
            end: range.end.toString(),
            raisedTo: highest.toString(),
          },
          'segment store handed out a range below IDs this node already loaded: max_id ' +
            'raised past them; ' +
            'run "idmint db fence" (docs/operations.md, After a failover or a restore)',
        );
        return;
      }
      // Failed loads are bounded by retryAfterMs per tag, refreshes by tagRefreshMs: few lines.
      if (event.error !== undefined) {
        log.warn(
          {
            tag: event.type === 'load' ? event.tag : undefined,
            code: event.error.code,
            err: event.error.message,
          },
          event.type === 'load' ? 'segment range load failed' : 'tag list refresh failed',
        );
      }
    },
  });
  const state: ServerState = { draining: false };
  let app: FastifyInstance;
  try {
    app = await createApp(
      config,
      backends,
      log,
      state,
      metrics,
      status,
      options.clock ?? new MonotonicClock(),
    );
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
      const url = await app.listen({
        host: config.host,
        port: config.port,
        backlog: LISTEN_BACKLOG,
      });
      const bound = app.server.address();
      const issuers = backends.segments?.service.issuers;
      if (issuers !== undefined && bound !== null && typeof bound === 'object') {
        // Under `serve --processes N` the port is shared by N processes, any of which may take a
        // connection: a request forwarded to the process that issues a tag must reach that very
        // process, so each also listens on a port of its own, advertised instead.
        const own = options.processSlot === undefined ? undefined : await ownListener(app, config);
        state.own = own;
        const port = own === undefined ? bound.port : (own.address() as AddressInfo).port;
        // Where other nodes forward the cluster-ordered tags this node issues.
        const advertised = advertisedAddress(config, port, own !== undefined);
        issuers.setAddress(advertised.address, advertised.why);
      }
      const { segments, snowflake } = backends;
      log.info(
        {
          url,
          segment:
            segments === undefined
              ? 'off'
              : {
                  store: segments.store.backend,
                  ...(segments.databases === undefined
                    ? {}
                    : { databases: segments.databases.stats().map((db) => db.name) }),
                },
          snowflake:
            snowflake === undefined
              ? 'off'
              : {
                  registry: snowflake.state().backend,
                  workerId: snowflake.workerId,
                  layout: snowflake.layout.name,
                },
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

/** A listener of this process alone (not shared under node:cluster) running the same routes. */
async function ownListener(app: FastifyInstance, config: ServerConfig): Promise<HttpServer> {
  const server = createNodeServer((request, response) => app.routing(request, response));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: 0, host: config.host, exclusive: true }, () => resolve());
  });
  return server;
}

function closeOwnListener(server: HttpServer): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** What the status route and the dashboard need beside the ID sources. */
interface StatusParts {
  readonly sampler: StatusSampler;
  readonly errors: ErrorCounts;
  readonly startedAt: number;
  readonly dashboardDir: string | undefined;
}

/** What changes over a server's life. */
interface ServerState {
  /** Set when shutdown starts: readiness fails from then on. */
  draining: boolean;
  /** This process's own listener under `serve --processes N` (see listen). */
  own?: HttpServer | undefined;
}

async function shutdown(
  app: FastifyInstance,
  backends: Backends,
  config: ServerConfig,
  log: Logger,
  state: ServerState,
): Promise<void> {
  log.info('idmint shutting down');
  state.draining = true;
  // Cluster-ordered tags go to another node now, not after the drain; what still reaches this
  // node for them is forwarded there.
  await backends.segments?.service.handOverIssuers();
  await drainHttpServer(app.server, {
    timeoutMs: config.api.shutdownTimeoutMs,
    onTimeout: () =>
      log.warn(
        { timeoutMs: config.api.shutdownTimeoutMs },
        'shutdown timeout: closing connections with requests still in flight',
      ),
  });
  // Forwarded requests reach this process alone there; the tags it issued went elsewhere first.
  if (state.own !== undefined) await closeOwnListener(state.own);
  // No connection is left: this runs Fastify's onClose hooks and stops Node's timers.
  await app.close();
  // Only now, with no request left that could draw an ID, is the lease given back.
  const { segments } = await backends.close();
  if (segments !== undefined) {
    // A failed give-back loses nothing that matters (those IDs are skipped, never reissued), but
    // the operator should know the store was unreachable at shutdown.
    for (const failure of segments.failedReleases) {
      log.warn(
        {
          tag: failure.tag,
          ids: failure.ids,
          code: failure.error.code,
          err: failure.error.message,
        },
        `could not give tag "${failure.tag}"'s unissued IDs back to the store`,
      );
    }
    log.info(
      { releasedIds: segments.releasedIds, wastedIds: segments.wastedIds },
      'segment IDs given back to the store at shutdown',
    );
  }
  log.info('idmint stopped');
}

async function createApp(
  config: ServerConfig,
  backends: Backends,
  log: Logger,
  state: ServerState,
  metrics: ServerMetrics | undefined,
  status: StatusParts,
  familyClock: Clock,
): Promise<FastifyInstance> {
  const app = Fastify({
    // Fastify's own logger makes a child logger per request; without request logging it gets
    // none, and start, stop and error lines go to `log` directly.
    ...(config.log.requests ? { loggerInstance: log } : { logger: false }),
    bodyLimit: config.api.bodyLimit,
    // The Node server, built with the timeouts it must enforce, and the answers in idmint's shape
    // to what its parser rejects (plugins/protocol.ts).
    serverFactory: (handler) =>
      createHttpServer(
        {
          requestTimeoutMs: config.api.requestTimeoutMs,
          keepAliveTimeoutMs: config.api.keepAliveTimeoutMs,
        },
        handler,
      ),
    clientErrorHandler: clientErrorHandler(config.api.requestTimeoutMs),
    // Requests on open connections are served while draining (drainHttpServer), not turned away
    // with a bare 503.
    return503OnClosing: false,
    ...ROUTING_OPTIONS,
    // Bodies are checked strictly: no type coercion, unknown fields refused rather than dropped.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
    frameworkErrors: (error, _request, reply) => {
      sendError(reply, toIdMintError(error));
    },
  }) as unknown as FastifyInstance;

  installErrorHandling(app, log, {
    ...(metrics === undefined ? {} : { onNotFound: (reply) => metrics.observeUnmatched(reply) }),
    onError: (code) => status.errors.add(code),
  });
  // Bodies are JSON only: Fastify would also take text/plain and hand the route a string, which
  // then failed validation with "body must be object" instead of a 415 saying what to send.
  app.removeContentTypeParser('text/plain');
  const tinyIdTokens = loadTinyIdTokens(config.auth, (fields, message) =>
    log.warn(fields, message),
  );
  const authorizer = new Authorizer(config.auth, tinyIdTokens);
  const stopTokenReload = reloadTinyIdTokens(config.auth, authorizer, tinyIdTokens, {
    info: (fields, message) => log.info(fields, message),
    warn: (fields, message) => log.warn(fields, message),
  });
  app.addHook('onClose', async () => stopTokenReload());
  installAuth(app, authorizer);
  const { segments, snowflake } = backends;
  const issued = metrics?.issued ?? new IssuedCounts();
  if (metrics !== undefined) {
    metrics.watch({
      ...(snowflake === undefined ? {} : { snowflake }),
      ...(segments === undefined ? {} : { segments: segments.service }),
      ...(segments?.service.issuers === undefined ? {} : { issuers: segments.service.issuers }),
    });
    if (segments?.databases !== undefined)
      watchSegmentDatabases(metrics.registry, segments.databases);
    metrics.instrument(app);
    status.errors.register(metrics.registry);
  }
  const methods = methodNotAllowed(app);
  app.addSchema(Readiness);
  await installOpenApi(
    app,
    { version: PACKAGE.version, license: PACKAGE.license },
    authorizer.enabled,
  );

  const checks: ReadinessCheck[] = [
    {
      name: 'accepting',
      check: () => (state.draining ? { ok: false, detail: 'shutting down' } : { ok: true }),
    },
  ];
  if (snowflake !== undefined) {
    checks.push({
      name: 'snowflake',
      check: () => {
        const worker = snowflake.state();
        // The status only: the last error names the registry's address, and /readyz is open.
        // The log has the error (worker events).
        return worker.ready
          ? { ok: true }
          : { ok: false, detail: `worker ${worker.workerId} ${worker.status}` };
      },
    });
  }
  healthRoutes(app, checks, metrics?.registry);
  // The keys are read once; the codecs never put them in a log line or an error.
  const opaque = OpaqueIds.fromConfig(config.opaque.keys);
  // Cluster-ordered tags another node issues are forwarded to it over kept-alive connections.
  let ordered: OrderedDrawDeps | undefined;
  if (segments?.service.issuers !== undefined) {
    const forwarder = new Forwarder({
      maxBatch: config.api.maxBatch,
      timeoutMs: config.segment.waitTimeoutMs,
    });
    app.addHook('onClose', async () => forwarder.close());
    ordered = {
      forwarder,
      waitTimeoutMs: config.segment.waitTimeoutMs,
      retryMs: config.segment.issuerRetryMs,
    };
  }
  segmentRoutes(app, {
    service: segments?.service,
    periodic: segments?.periodic,
    maxBatch: config.api.maxBatch,
    issued,
    opaque,
    ordered,
  });
  rangeRoutes(app, {
    service: segments?.service,
    periodic: segments?.periodic,
    maxBatch: config.api.maxBatch,
    issued,
    ordered,
  });
  tinyIdRoutes(app, {
    service: segments?.service,
    periodic: segments?.periodic,
    maxBatch: Math.max(config.api.maxBatch, TINYID_BATCH_SIZE_MAX),
    issued,
    authorizer,
    log,
    onError: (code) => status.errors.add(code),
    ordered,
  });
  snowflakeRoutes(app, {
    worker: snowflake,
    layout: snowflake?.layout ?? getLayout(config.snowflake.layout),
    maxBatch: config.api.maxBatch,
    issued,
  });
  tagRoutes(app, {
    store: segments?.store,
    // A tag created or re-stepped here is served at once, not after the next periodic refresh.
    onTagChanged: (record) => {
      segments?.service.tagChanged(record);
      segments?.periodic?.tagChanged(record);
      return segments?.service.refreshTags().catch(() => undefined) ?? Promise.resolve();
    },
    opaque,
  });
  familyRoutes(app, {
    families: new IdFamilies({ clock: familyClock }),
    maxBatch: config.api.maxBatch,
    layout: snowflake?.layout ?? getLayout(config.snowflake.layout),
    clock: familyClock,
    opaque,
    worker: snowflake,
    store: segments?.store,
    issued,
  });
  status.sampler.watch({
    ...(segments === undefined ? {} : { segments: segments.service }),
    ...(snowflake === undefined ? {} : { snowflakeIssued: () => issued.snowflake }),
    ...(metrics === undefined ? {} : { requests: () => metrics.requestHistogram() }),
  });
  app.addHook('onReady', async () => status.sampler.start());
  app.addHook('onClose', async () => status.sampler.stop());
  statusRoutes(app, {
    version: PACKAGE.version,
    startedAt: status.startedAt,
    authEnabled: authorizer.enabled,
    ...(segments === undefined
      ? {}
      : {
          segments: {
            service: segments.service,
            backend: segments.store.backend,
            prefetchThreshold: config.segment.prefetchThreshold,
            tagRefreshMs: config.segment.tagRefreshMs,
          },
        }),
    ...(snowflake === undefined
      ? {}
      : { snowflake: { worker: snowflake, datacenterId: config.snowflake.datacenterId } }),
    sampler: status.sampler,
    errors: status.errors,
    checks,
  });
  dashboardRoutes(app, { dir: status.dashboardDir, authEnabled: authorizer.enabled });
  methods.install();
  return app;
}
