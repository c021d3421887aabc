import type { FastifyInstance } from 'fastify';
import type { ReadonlyDeep } from '../../contract/route.ts';
import {
  DEFAULT_TAG_LIMIT,
  MAX_TAG_LIMIT,
  SELECTIONS,
  SORTS,
  STATUS,
  TagStatus,
  type SegmentStatus,
  type Selection,
  type SnowflakeStatus,
  type Sort,
  type Status,
} from '../../contract/status.ts';
import { IdMintError } from '../../core/errors.ts';
import type { Layout } from '../../core/layout.ts';
import type { SegmentService } from '../../service/segment-service.ts';
import type { SnowflakeWorker } from '../../service/snowflake-worker.ts';
import type { SegmentTagStats } from '../../core/segment-buffer.ts';
import { fill, tagPage, type TagPageQuery } from './status-tags.ts';
import { clip } from '../input.ts';
import type { Principal } from '../plugins/auth.ts';
import type { ErrorCounts } from '../plugins/error-counts.ts';
import type { StatusSampler } from '../plugins/status-sampler.ts';
import type { ReadinessCheck } from './health.ts';
import { contractRoute } from './from-contract.ts';

/** What the status route reads. A mode that is off is absent. */
export interface StatusRouteDeps {
  readonly version: string;
  /** Wall time the server started (ms since the Unix epoch). */
  readonly startedAt: number;
  readonly authEnabled: boolean;
  readonly segments?: {
    readonly service: SegmentService;
    readonly backend: string;
    readonly prefetchThreshold: number;
    readonly tagRefreshMs: number;
  };
  readonly snowflake?: { readonly worker: SnowflakeWorker; readonly datacenterId: number };
  readonly sampler: StatusSampler;
  readonly errors: ErrorCounts;
  /** The readiness checks (/readyz), shown as health. */
  readonly checks: readonly ReadinessCheck[];
}

/**
 * `GET /v1/status`: what the dashboard shows, in one JSON answer: per tag its buffers, ranges,
 * step history and draw rate (a page of them: searchable, sortable, so thousands of tags cost one
 * page), the snowflake worker's lease and clock, and the server's requests, errors and health.
 * It follows the API's auth: any valid token reads it, a token limited to some tags sees only
 * those, and failure messages (which can name a store's address) only the admin token.
 */
export function statusRoutes(app: FastifyInstance, deps: StatusRouteDeps): void {
  app.addSchema(TagStatus);
  contractRoute(app, STATUS).handle((request) => {
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
      segment:
        deps.segments === undefined
          ? null
          : segmentStatus(deps, deps.segments, query, principal, admin),
      snowflake: deps.snowflake === undefined ? null : snowflakeStatus(deps, deps.snowflake, admin),
    };
  });
}

/**
 * The query string, checked by hand as the ID routes' (see input.ts), with messages that say what
 * is allowed.
 */
function parseQuery(raw: Record<string, unknown>): TagPageQuery {
  const single = (name: string): string | undefined => {
    const value = raw[name];
    if (Array.isArray(value))
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `${name} must be given once, got more than one value`,
      );
    return value as string | undefined;
  };
  const q = single('q') ?? '';
  if (q.length > 128)
    throw new IdMintError('INVALID_ARGUMENT', `q must be at most 128 characters, got ${q.length}`);
  const sort = single('sort') ?? 'tag';
  if (!(SORTS as readonly string[]).includes(sort))
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `sort must be one of ${SORTS.join(', ')}, got "${clip(sort)}"`,
    );
  const order = single('order') ?? 'asc';
  if (order !== 'asc' && order !== 'desc')
    throw new IdMintError('INVALID_ARGUMENT', `order must be asc or desc, got "${clip(order)}"`);
  const integer = (name: string, fallback: number, min: number, max: number): number => {
    const text = single(name);
    if (text === undefined) return fallback;
    const value = /^[0-9]{1,9}$/.test(text) ? Number(text) : Number.NaN;
    if (value >= min && value <= max) return value;
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${name} must be an integer from ${min} to ${max}, got "${clip(text)}"`,
    );
  };
  const tags = single('tags') ?? 'all';
  if (!(SELECTIONS as readonly string[]).includes(tags))
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `tags must be one of ${SELECTIONS.join(', ')}, got "${clip(tags)}"`,
    );
  const offset = integer('offset', 0, 0, 999_999_999);
  const after = single('after');
  if (after !== undefined) {
    // A tag name is 1 to 128 characters (core's checkTag); a cursor that is no name pages nowhere.
    if (after.length === 0 || after.length > 128)
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `after must be a tag name of 1 to 128 characters, got ${after.length}`,
      );
    if (sort !== 'tag')
      throw new IdMintError(
        'INVALID_ARGUMENT',
        `after pages in name order: use it with sort=tag, not sort=${sort}`,
      );
    if (offset !== 0)
      throw new IdMintError(
        'INVALID_ARGUMENT',
        'after and offset are two ways to page: give one of them',
      );
  }
  const limit = integer('limit', DEFAULT_TAG_LIMIT, 1, MAX_TAG_LIMIT);
  const desc = order === 'desc';
  return {
    q: q.toLowerCase(),
    sort: sort as Sort,
    desc,
    offset,
    after,
    limit,
    tags: tags as Selection,
  };
}

function serverStatus(deps: StatusRouteDeps): ReadonlyDeep<Status['server']> {
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
function storeHealth(segments: NonNullable<StatusRouteDeps['segments']>): {
  name: string;
  ok: boolean;
  detail: string;
} {
  // Only a tag in use can fail to load: the tags nobody draws from cost nothing here.
  const stats = segments.service.activeStats();
  const failing = stats.tags.filter((tag) => tag.lastErrorCode !== null);
  const name = `segment store (${segments.backend})`;
  if (failing.length > 0) {
    const codes = [...new Set(failing.map((tag) => tag.lastErrorCode))].join(', ');
    return {
      name,
      ok: false,
      detail:
        `${failing.length} tag${failing.length === 1 ? '' : 's'} failing to load ranges ` +
        `(${codes})`,
    };
  }
  const stale =
    segments.tagRefreshMs > 0 &&
    stats.lastTagRefreshAt !== null &&
    stats.at - stats.lastTagRefreshAt > 2 * segments.tagRefreshMs;
  if (stale)
    return {
      name,
      ok: false,
      detail:
        `the tag list was not re-read for over ` +
        `${Math.round((2 * segments.tagRefreshMs) / 1000)} s ` +
        `(${stats.tagRefreshFailures} refreshes failed)`,
    };
  return { name, ok: true, detail: 'ok' };
}

function segmentStatus(
  deps: StatusRouteDeps,
  segments: NonNullable<StatusRouteDeps['segments']>,
  query: TagPageQuery,
  principal: Principal | undefined,
  admin: boolean,
): ReadonlyDeep<SegmentStatus> {
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
    lastTagRefreshAt:
      stats.lastTagRefreshAt === null ? null : new Date(stats.lastTagRefreshAt).toISOString(),
    tagRefreshFailures: stats.tagRefreshFailures,
    total: page.total,
    inUse: page.inUse,
    matched: page.matched,
    offset: query.offset,
    limit: query.limit,
    nextAfter: page.nextAfter,
    tags: page.tags.map((tag) => tagStatus(tag, deps, segments.prefetchThreshold, admin)),
    ordered: (service.issuers?.stats() ?? []).filter(
      (entry) => principal === undefined || principal.allows(entry.tag),
    ),
  };
}

function tagStatus(
  tag: SegmentTagStats,
  deps: StatusRouteDeps,
  prefetchThreshold: number,
  admin: boolean,
): ReadonlyDeep<TagStatus> {
  const series = deps.sampler.segments.rates.series(tag.tag);
  const loads = deps.sampler.segments.steps.loads(tag.tag);
  const failing = tag.lastErrorCode !== null;
  // The next range starts loading once this many IDs of the current range are issued
  // (SegmentBuffer#refill).
  const loadAt =
    tag.range === null
      ? null
      : tag.range.start +
        BigInt(Math.floor(Number(tag.range.end - tag.range.start) * prefetchThreshold));
  const nextLoad =
    tag.next !== null ? 'ready' : tag.loading ? 'loading' : failing ? 'failing' : 'pending';
  return {
    tag: tag.tag,
    serving: failing
      ? 'failing'
      : tag.remaining > 0
        ? 'memory'
        : tag.loading
          ? 'loading'
          : 'not-loaded',
    step: tag.step,
    tagStep: tag.tagStep,
    remaining: tag.remaining,
    fill: fill(tag),
    range:
      tag.range === null
        ? null
        : {
            start: tag.range.start.toString(),
            end: tag.range.end.toString(),
            position: tag.range.position.toString(),
          },
    next:
      tag.next === null ? null : { start: tag.next.start.toString(), end: tag.next.end.toString() },
    nextLoad,
    idsUntilNextLoad:
      nextLoad === 'pending' && loadAt !== null && tag.range !== null
        ? Math.max(0, Number(loadAt - tag.range.position))
        : null,
    loads: tag.loads,
    loadFailures: tag.loadFailures,
    lastLoadMs: loads.at(-1)?.ms ?? null,
    maxLoadMs: tag.loadMsMax,
    lastError:
      tag.lastErrorCode === null
        ? null
        : { code: tag.lastErrorCode, message: admin ? tag.lastError : null },
    idsPerSecond: series?.perSecond ?? null,
    rates: series?.rates ?? null,
    steps: loads.map((load) => ({
      at: new Date(load.at).toISOString(),
      step: load.step,
      ms: load.ms,
    })),
  };
}

function snowflakeStatus(
  deps: StatusRouteDeps,
  snowflake: NonNullable<StatusRouteDeps['snowflake']>,
  admin: boolean,
): ReadonlyDeep<SnowflakeStatus> {
  const state = snowflake.worker.state();
  const layout: Layout = snowflake.worker.layout;
  const series = deps.sampler.snowflake.series('snowflake');
  const time = (ms: number): string | null =>
    Number.isFinite(ms) && ms >= 0 ? new Date(ms).toISOString() : null;
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
    fencedWaits: state.fencedWaits,
    lastError: admin ? state.lastError : null,
    peerClock:
      peer === null
        ? null
        : {
            ...peer,
            checkedAt: new Date(peer.checkedAt).toISOString(),
            skipped:
              peer.skipped === null || admin
                ? peer.skipped
                : 'the registry could not list the live peers',
          },
    rollbacks: { count: state.clockRollbacks, policy: state.rollbackPolicy },
    idsPerSecond: series?.perSecond ?? null,
    rates: series?.rates ?? null,
  };
}
