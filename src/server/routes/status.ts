import type { FastifyInstance } from 'fastify';
import { IdMintError } from '../../core/errors.ts';
import type { Layout } from '../../core/layout.ts';
import type { SegmentService } from '../../service/segment-service.ts';
import type { SnowflakeWorker } from '../../service/snowflake-worker.ts';
import type { SegmentTagStats } from '../../core/segment-buffer.ts';
import { SELECTIONS, SORTS, fill, tagPage, type Selection, type Sort, type TagPageQuery } from './status-tags.ts';
import { clip } from '../input.ts';
import type { Principal } from '../plugins/auth.ts';
import type { ErrorCounts } from '../plugins/error-counts.ts';
import type { StatusSampler } from '../plugins/status-sampler.ts';
import type { ReadinessCheck } from './health.ts';
import { ERRORS } from './shared.ts';

/** What the status route reads. A mode that is off is absent. */
export interface StatusRouteDeps {
  readonly version: string;
  /** Wall time the server started (ms since the Unix epoch). */
  readonly startedAt: number;
  readonly authEnabled: boolean;
  readonly segments?: { readonly service: SegmentService; readonly backend: string; readonly prefetchThreshold: number; readonly tagRefreshMs: number };
  readonly snowflake?: { readonly worker: SnowflakeWorker; readonly datacenterId: number };
  readonly sampler: StatusSampler;
  readonly errors: ErrorCounts;
  /** The readiness checks (/readyz), shown as health. */
  readonly checks: readonly ReadinessCheck[];
}

/** Tags per page by default, and at most: the page asks for one page, however many tags exist. */
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 500;

const STATUS_QUERY = {
  type: 'object',
  properties: {
    q: { type: 'string', maxLength: 128, description: 'Only tags whose name contains this text (case-insensitive).' },
    sort: { type: 'string', enum: [...SORTS], default: 'tag', description: 'Order of the tag list: by name, buffer fill, IDs buffered, IDs/s over the last minute, current step, last load latency, or failed loads.' },
    order: { type: 'string', enum: ['asc', 'desc'], default: 'asc' },
    offset: { type: 'integer', minimum: 0, default: 0, description: 'Tags to skip (paging).' },
    after: { type: 'string', minLength: 1, maxLength: 128, description: 'Name-order cursor (with `sort=tag`, instead of `offset`): the page starts after this tag (before it with `order=desc`); pass the previous answer\'s `nextAfter`.' },
    limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: `Tags in one answer, 1 to ${MAX_LIMIT}.` },
    tags: { type: 'string', enum: [...SELECTIONS], default: 'all', description: '`all`: every tag the store lists; `in-use`: only the tags in use on this node (drawn from, created or changed here since start-up).' },
  },
} as const;

const NULLABLE_NUMBER = { type: ['number', 'null'] } as const;
const TIME = { type: ['string', 'null'], format: 'date-time' } as const;
const RATES = { type: ['array', 'null'], items: { type: 'number' }, description: 'Per-second rates over the last minute, oldest first, one a second.' } as const;

const TAG_STATUS_SCHEMA = {
  $id: 'TagStatus',
  type: 'object',
  required: ['tag', 'serving', 'step', 'tagStep', 'remaining', 'fill', 'range', 'next', 'nextLoad', 'idsUntilNextLoad', 'loads', 'loadFailures', 'lastLoadMs', 'maxLoadMs', 'lastError', 'idsPerSecond', 'rates', 'steps'],
  properties: {
    tag: { type: 'string' },
    serving: {
      type: 'string',
      enum: ['memory', 'loading', 'failing', 'not-loaded'],
      description: '`memory`: IDs are buffered, requests never wait for the store; `loading`: nothing buffered, a range is on its way; `failing`: the last load failed (see lastError); `not-loaded`: no range yet (loads on first use).',
    },
    step: { type: 'integer', description: 'Size of the latest range loaded: the dynamic step (0 before the first).' },
    tagStep: { type: 'integer', description: "The tag's configured step: the dynamic step's floor." },
    remaining: { type: 'integer', description: 'IDs buffered: the rest of the current range plus the next range.' },
    fill: { type: 'number', minimum: 0, maximum: 1, description: 'remaining over what the two buffers hold when both are full.' },
    range: {
      type: ['object', 'null'],
      required: ['start', 'end', 'position'],
      properties: { start: { type: 'string' }, end: { type: 'string' }, position: { type: 'string', description: 'The next ID this range issues.' } },
      description: 'The range IDs come from now, `[start, end)`, decimal strings; null before the first.',
    },
    next: { type: ['object', 'null'], required: ['start', 'end'], properties: { start: { type: 'string' }, end: { type: 'string' } }, description: 'The next range, loaded and waiting; null when none is.' },
    nextLoad: { type: 'string', enum: ['ready', 'loading', 'pending', 'failing'], description: '`ready`: the next range is loaded; `loading`: its load is in flight; `pending`: it loads once the current range passes the prefetch threshold; `failing`: loads fail.' },
    idsUntilNextLoad: { type: ['integer', 'null'], description: 'With `pending`, IDs still to issue before the next range is loaded.' },
    loads: { type: 'integer' },
    loadFailures: { type: 'integer' },
    lastLoadMs: { ...NULLABLE_NUMBER, description: 'How long the latest range load took.' },
    maxLoadMs: { type: 'number' },
    lastError: {
      type: ['object', 'null'],
      required: ['code', 'message'],
      properties: { code: { type: 'string' }, message: { type: ['string', 'null'], description: "The failure's own message: only for the admin token (or with auth off); it can name the store's address." } },
    },
    idsPerSecond: { ...NULLABLE_NUMBER, description: 'IDs drawn per second over the last minute; null when not tracked (more tags are drawing than the dashboard keeps rates for).' },
    rates: RATES,
    steps: {
      type: 'array',
      description: 'The latest range loads, oldest first: how the dynamic step moved.',
      items: { type: 'object', required: ['at', 'step', 'ms'], properties: { at: { type: 'string', format: 'date-time' }, step: { type: 'integer' }, ms: { type: 'number' } } },
    },
  },
} as const;

const STATUS_SCHEMA = {
  type: 'object',
  required: ['time', 'version', 'uptimeSeconds', 'auth', 'server', 'segment', 'snowflake'],
  properties: {
    time: { type: 'string', format: 'date-time' },
    version: { type: 'string' },
    uptimeSeconds: { type: 'number' },
    auth: {
      type: 'object',
      required: ['enabled', 'admin'],
      properties: { enabled: { type: 'boolean' }, admin: { type: 'boolean', description: 'The caller may create and change tags (admin token, or auth off).' } },
    },
    server: {
      type: 'object',
      required: ['requests', 'errors', 'health'],
      properties: {
        requests: {
          type: ['object', 'null'],
          description: 'Requests over the last minute, from the request histogram; null when metrics are off.',
          required: ['requestsPerSecond', 'rates', 'routes'],
          properties: {
            requestsPerSecond: { type: 'number' },
            rates: RATES,
            routes: {
              type: 'array',
              items: {
                type: 'object',
                required: ['route', 'requests', 'requestsPerSecond', 'p99Ms'],
                properties: { route: { type: 'string' }, requests: { type: 'integer' }, requestsPerSecond: { type: 'number' }, p99Ms: NULLABLE_NUMBER },
              },
            },
          },
        },
        errors: {
          type: 'array',
          description: 'Error answers since start, by code (docs/errors.md), most frequent first.',
          items: { type: 'object', required: ['code', 'count'], properties: { code: { type: 'string' }, count: { type: 'integer' } } },
        },
        health: {
          type: 'array',
          items: { type: 'object', required: ['name', 'ok', 'detail'], properties: { name: { type: 'string' }, ok: { type: 'boolean' }, detail: { type: 'string' } } },
        },
      },
    },
    segment: {
      type: ['object', 'null'],
      description: 'Segment mode; null when it is off.',
      required: ['store', 'lastTagRefreshAt', 'tagRefreshFailures', 'total', 'inUse', 'matched', 'offset', 'limit', 'nextAfter', 'tags'],
      properties: {
        store: { type: 'string' },
        lastTagRefreshAt: TIME,
        tagRefreshFailures: { type: 'integer' },
        total: { type: 'integer', description: 'Tags the caller may see.' },
        inUse: { type: 'integer', description: 'Of those, tags in use on this node (drawn from, created or changed here since start-up).' },
        matched: { type: 'integer', description: 'Of those, tags in the list paged: matching `q`, and in use with `tags=in-use`.' },
        offset: { type: 'integer' },
        limit: { type: 'integer' },
        nextAfter: { type: ['string', 'null'], description: 'With `sort=tag`, the `after` of the next page when more tags follow; else null.' },
        tags: { type: 'array', items: { $ref: 'TagStatus#' } },
      },
    },
    snowflake: {
      type: ['object', 'null'],
      description: 'Snowflake mode; null when it is off.',
      required: ['layout', 'workerId', 'datacenterId', 'registry', 'status', 'validUntil', 'expiresInMs', 'horizon', 'lastRenewedAt', 'renewFailures', 'leaseLosses', 'workerSwitches', 'lastError', 'peerClock', 'rollbacks', 'idsPerSecond', 'rates'],
      properties: {
        layout: {
          type: 'object',
          required: ['name', 'timeBits', 'datacenterBits', 'workerBits', 'sequenceBits', 'timeUnitMs', 'epoch', 'expiresAt', 'maxIdsPerSecond'],
          properties: {
            name: { type: 'string' },
            timeBits: { type: 'integer' },
            datacenterBits: { type: 'integer' },
            workerBits: { type: 'integer' },
            sequenceBits: { type: 'integer' },
            timeUnitMs: { type: 'integer' },
            epoch: { type: 'string', format: 'date-time' },
            expiresAt: { type: 'string', format: 'date-time' },
            maxIdsPerSecond: { type: 'number' },
          },
        },
        workerId: { type: 'integer' },
        datacenterId: { type: 'integer' },
        registry: { type: 'string' },
        status: { type: 'string', enum: ['active', 'fenced', 'recovering', 'closed'] },
        validUntil: { ...TIME, description: 'The fence: IDs stop at this time unless the lease is renewed first.' },
        expiresInMs: { ...NULLABLE_NUMBER, description: 'Time left before the fence.' },
        horizon: { ...TIME, description: 'The horizon recorded at the registry: nothing this node issues is later, and the next holder of the worker ID starts after it.' },
        lastRenewedAt: TIME,
        renewFailures: { type: 'integer' },
        leaseLosses: { type: 'integer' },
        workerSwitches: { type: 'integer' },
        lastError: { type: ['string', 'null'], description: 'Only for the admin token (or with auth off).' },
        peerClock: {
          type: ['object', 'null'],
          description: 'The start-up comparison with the live peers\' clocks; null when the check is off.',
          required: ['check', 'checkedAt', 'peers', 'offsetMs', 'maxPeerSkewMs', 'skipped'],
          properties: {
            check: { type: 'string' },
            checkedAt: { type: 'string', format: 'date-time' },
            peers: { type: 'integer' },
            offsetMs: { ...NULLABLE_NUMBER, description: "This clock minus the mean of the peers' clocks." },
            maxPeerSkewMs: { type: 'integer' },
            skipped: { type: ['string', 'null'] },
          },
        },
        rollbacks: {
          type: 'object',
          required: ['count', 'policy'],
          properties: { count: { type: 'integer', description: 'Times the clock was found behind a time already used.' }, policy: { type: 'string', description: 'How they are handled (docs/layouts.md).' } },
        },
        idsPerSecond: NULLABLE_NUMBER,
        rates: RATES,
      },
    },
  },
} as const;

/**
 * `GET /v1/status`: what the dashboard shows, in one JSON answer: per tag its buffers, ranges,
 * step history and draw rate (a page of them: searchable, sortable, so thousands of tags cost one
 * page), the snowflake worker's lease and clock, and the server's requests, errors and health.
 * It follows the API's auth: any valid token reads it, a token limited to some tags sees only
 * those, and failure messages (which can name a store's address) only the admin token.
 */
export function statusRoutes(app: FastifyInstance, deps: StatusRouteDeps): void {
  app.addSchema(TAG_STATUS_SCHEMA);
  app.get(
    '/v1/status',
    {
      config: { access: 'any', docs: { querystring: STATUS_QUERY } },
      schema: {
        operationId: 'status',
        summary: "The server's live status: tags, snowflake worker, requests, errors and health (the dashboard reads this)",
        tags: ['operations'],
        response: { 200: { description: 'The status now.', ...STATUS_SCHEMA }, ...ERRORS },
      },
    },
    (request) => {
      const query = parseQuery(request.query as Record<string, unknown>);
      // Auth off: no principal, and everyone may administer tags (as the tag routes allow).
      const principal: Principal | undefined = request.principal;
      const admin = principal === undefined || principal.admin;
      return {
        time: new Date().toISOString(),
        version: deps.version,
        uptimeSeconds: (Date.now() - deps.startedAt) / 1000,
        auth: { enabled: deps.authEnabled, admin },
        server: serverStatus(deps),
        segment: deps.segments === undefined ? null : segmentStatus(deps, deps.segments, query, principal, admin),
        snowflake: deps.snowflake === undefined ? null : snowflakeStatus(deps, deps.snowflake, admin),
      };
    },
  );
}

/** The query string, checked by hand as the ID routes' (see input.ts), with messages that say what is allowed. */
function parseQuery(raw: Record<string, unknown>): TagPageQuery {
  const single = (name: string): string | undefined => {
    const value = raw[name];
    if (Array.isArray(value)) throw new IdMintError('INVALID_ARGUMENT', `${name} must be given once, got more than one value`);
    return value as string | undefined;
  };
  const q = single('q') ?? '';
  if (q.length > 128) throw new IdMintError('INVALID_ARGUMENT', `q must be at most 128 characters, got ${q.length}`);
  const sort = single('sort') ?? 'tag';
  if (!(SORTS as readonly string[]).includes(sort)) throw new IdMintError('INVALID_ARGUMENT', `sort must be one of ${SORTS.join(', ')}, got "${clip(sort)}"`);
  const order = single('order') ?? 'asc';
  if (order !== 'asc' && order !== 'desc') throw new IdMintError('INVALID_ARGUMENT', `order must be asc or desc, got "${clip(order)}"`);
  const integer = (name: string, fallback: number, min: number, max: number): number => {
    const text = single(name);
    if (text === undefined) return fallback;
    const value = /^[0-9]{1,9}$/.test(text) ? Number(text) : Number.NaN;
    if (value >= min && value <= max) return value;
    throw new IdMintError('INVALID_ARGUMENT', `${name} must be an integer from ${min} to ${max}, got "${clip(text)}"`);
  };
  const tags = single('tags') ?? 'all';
  if (!(SELECTIONS as readonly string[]).includes(tags)) throw new IdMintError('INVALID_ARGUMENT', `tags must be one of ${SELECTIONS.join(', ')}, got "${clip(tags)}"`);
  const offset = integer('offset', 0, 0, 999_999_999);
  const after = single('after');
  if (after !== undefined) {
    // A tag name is 1 to 128 characters (core's checkTag); a cursor that is no name pages nowhere.
    if (after.length === 0 || after.length > 128) throw new IdMintError('INVALID_ARGUMENT', `after must be a tag name of 1 to 128 characters, got ${after.length}`);
    if (sort !== 'tag') throw new IdMintError('INVALID_ARGUMENT', `after pages in name order: use it with sort=tag, not sort=${sort}`);
    if (offset !== 0) throw new IdMintError('INVALID_ARGUMENT', 'after and offset are two ways to page: give one of them');
  }
  return { q: q.toLowerCase(), sort: sort as Sort, desc: order === 'desc', offset, after, limit: integer('limit', DEFAULT_LIMIT, 1, MAX_LIMIT), tags: tags as Selection };
}

function serverStatus(deps: StatusRouteDeps) {
  const requests = deps.sampler.requests?.activity() ?? null;
  const health = deps.checks.map(({ name, check }) => {
    const result = check();
    return { name, ok: result.ok, detail: result.ok ? 'ok' : (result.detail ?? 'failing') };
  });
  if (deps.segments !== undefined) health.push(storeHealth(deps.segments));
  return { requests, errors: deps.errors.entries(), health };
}

/**
 * The segment store's health as the service sees it: tags whose last load failed (codes only:
 * this entry is for every token) and a tag list that has not been re-read for two periods.
 */
function storeHealth(segments: NonNullable<StatusRouteDeps['segments']>): { name: string; ok: boolean; detail: string } {
  // Only a tag in use can fail to load: the tags nobody draws from cost nothing here.
  const stats = segments.service.activeStats();
  const failing = stats.tags.filter((tag) => tag.lastErrorCode !== null);
  const name = `segment store (${segments.backend})`;
  if (failing.length > 0) {
    const codes = [...new Set(failing.map((tag) => tag.lastErrorCode))].join(', ');
    return { name, ok: false, detail: `${failing.length} tag${failing.length === 1 ? '' : 's'} failing to load ranges (${codes})` };
  }
  const stale = segments.tagRefreshMs > 0 && stats.lastTagRefreshAt !== null && stats.at - stats.lastTagRefreshAt > 2 * segments.tagRefreshMs;
  if (stale) return { name, ok: false, detail: `the tag list was not re-read for over ${Math.round((2 * segments.tagRefreshMs) / 1000)} s (${stats.tagRefreshFailures} refreshes failed)` };
  return { name, ok: true, detail: 'ok' };
}

function segmentStatus(deps: StatusRouteDeps, segments: NonNullable<StatusRouteDeps['segments']>, query: TagPageQuery, principal: Principal | undefined, admin: boolean) {
  const service = segments.service;
  const rates = deps.sampler.segments.rates;
  const steps = deps.sampler.segments.steps;
  const page = tagPage(service, query, {
    allows: principal === undefined ? undefined : (tag) => principal.allows(tag),
    rate: (tag) => rates.perSecond(tag) ?? undefined,
    latency: (tag) => steps.loads(tag).at(-1)?.ms,
  });
  const stats = service.activeStats();
  return {
    store: segments.backend,
    lastTagRefreshAt: stats.lastTagRefreshAt === null ? null : new Date(stats.lastTagRefreshAt).toISOString(),
    tagRefreshFailures: stats.tagRefreshFailures,
    total: page.total,
    inUse: page.inUse,
    matched: page.matched,
    offset: query.offset,
    limit: query.limit,
    nextAfter: page.nextAfter,
    tags: page.tags.map((tag) => tagStatus(tag, deps, segments.prefetchThreshold, admin)),
  };
}

function tagStatus(tag: SegmentTagStats, deps: StatusRouteDeps, prefetchThreshold: number, admin: boolean) {
  const series = deps.sampler.segments.rates.series(tag.tag);
  const loads = deps.sampler.segments.steps.loads(tag.tag);
  const failing = tag.lastErrorCode !== null;
  // The next range starts loading once this many IDs of the current range are issued (SegmentBuffer#refill).
  const loadAt = tag.range === null ? null : tag.range.start + BigInt(Math.floor(Number(tag.range.end - tag.range.start) * prefetchThreshold));
  const nextLoad = tag.next !== null ? 'ready' : tag.loading ? 'loading' : failing ? 'failing' : 'pending';
  return {
    tag: tag.tag,
    serving: failing ? 'failing' : tag.remaining > 0 ? 'memory' : tag.loading ? 'loading' : 'not-loaded',
    step: tag.step,
    tagStep: tag.tagStep,
    remaining: tag.remaining,
    fill: fill(tag),
    range: tag.range === null ? null : { start: tag.range.start.toString(), end: tag.range.end.toString(), position: tag.range.position.toString() },
    next: tag.next === null ? null : { start: tag.next.start.toString(), end: tag.next.end.toString() },
    nextLoad,
    idsUntilNextLoad: nextLoad === 'pending' && loadAt !== null && tag.range !== null ? Math.max(0, Number(loadAt - tag.range.position)) : null,
    loads: tag.loads,
    loadFailures: tag.loadFailures,
    lastLoadMs: loads.at(-1)?.ms ?? null,
    maxLoadMs: tag.loadMsMax,
    lastError: tag.lastErrorCode === null ? null : { code: tag.lastErrorCode, message: admin ? tag.lastError : null },
    idsPerSecond: series?.perSecond ?? null,
    rates: series?.rates ?? null,
    steps: loads.map((load) => ({ at: new Date(load.at).toISOString(), step: load.step, ms: load.ms })),
  };
}

function snowflakeStatus(deps: StatusRouteDeps, snowflake: NonNullable<StatusRouteDeps['snowflake']>, admin: boolean) {
  const state = snowflake.worker.state();
  const layout: Layout = snowflake.worker.layout;
  const series = deps.sampler.snowflake.series('snowflake');
  const time = (ms: number): string | null => (Number.isFinite(ms) && ms >= 0 ? new Date(ms).toISOString() : null);
  const fenced = !Number.isFinite(state.validUntil);
  const peer = state.peerClock;
  return {
    layout: {
      name: layout.name,
      timeBits: layout.timeBits,
      datacenterBits: layout.datacenterBits,
      workerBits: layout.workerBits,
      sequenceBits: layout.sequenceBits,
      timeUnitMs: layout.timeUnitMs,
      epoch: new Date(layout.epochMs).toISOString(),
      expiresAt: new Date(Math.min(layout.expiresAtMs, 8.64e15)).toISOString(),
      maxIdsPerSecond: layout.maxIdsPerSecond,
    },
    workerId: state.workerId,
    datacenterId: snowflake.datacenterId,
    registry: state.backend,
    status: state.status,
    validUntil: fenced ? null : time(state.validUntil),
    expiresInMs: fenced ? null : state.validUntil - state.now,
    horizon: time(state.horizon),
    lastRenewedAt: time(state.lastRenewedAt),
    renewFailures: state.renewFailures,
    leaseLosses: state.leaseLosses,
    workerSwitches: state.workerSwitches,
    lastError: admin ? state.lastError : null,
    peerClock: peer === null ? null : { ...peer, checkedAt: new Date(peer.checkedAt).toISOString(), skipped: peer.skipped === null || admin ? peer.skipped : 'the registry could not list the live peers' },
    rollbacks: { count: state.clockRollbacks, policy: state.rollbackPolicy },
    idsPerSecond: series?.perSecond ?? null,
    rates: series?.rates ?? null,
  };
}
