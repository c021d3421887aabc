import Type, { type Static } from 'typebox';
import { ERRORS, Nullable, Ref } from './common.ts';
import { defineRoute } from './route.ts';

// `GET /v1/status`: what the dashboard shows, in one answer. The dashboard takes its types from
// here.

/** Sort keys of the tag list. */
export const SORTS = ['tag', 'fill', 'remaining', 'rate', 'step', 'latency', 'failures'] as const;
export type Sort = (typeof SORTS)[number];

/**
 * Which tags a page lists: every known tag, or only those in use (a buffer: drawn from, created or
 * changed on this node since start-up).
 */
export const SELECTIONS = ['all', 'in-use'] as const;
export type Selection = (typeof SELECTIONS)[number];

/** Tags per page by default, and at most: the page asks for one page, however many tags exist. */
export const DEFAULT_TAG_LIMIT = 50;
export const MAX_TAG_LIMIT = 500;

/** The query: search, sort and page the tag list (checked by hand, as the ID routes' input). */
export const StatusQuery = Type.Object({
  q: Type.Optional(
    Type.String({
      maxLength: 128,
      description: 'Only tags whose name contains this text (case-insensitive).',
    }),
  ),
  sort: Type.Optional(
    Type.Enum(SORTS, {
      type: 'string',
      default: 'tag',
      description:
        'Order of the tag list: by name, buffer fill, IDs buffered, IDs/s over the last ' +
        'minute, current step, last ' +
        'load latency, or failed loads.',
    }),
  ),
  order: Type.Optional(Type.Enum(['asc', 'desc'], { type: 'string', default: 'asc' })),
  offset: Type.Optional(
    Type.Integer({ minimum: 0, default: 0, description: 'Tags to skip (paging).' }),
  ),
  after: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 128,
      description:
        'Name-order cursor (with `sort=tag`, instead of `offset`): the page starts after ' +
        'this tag (before it with ' +
        "`order=desc`); pass the previous answer's `nextAfter`.",
    }),
  ),
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_TAG_LIMIT,
      default: DEFAULT_TAG_LIMIT,
      description: `Tags in one answer, 1 to ${MAX_TAG_LIMIT}.`,
    }),
  ),
  tags: Type.Optional(
    Type.Enum(SELECTIONS, {
      type: 'string',
      default: 'all',
      description:
        '`all`: every tag the store lists; `in-use`: only the tags in use on this node ' +
        '(drawn from, created or ' +
        'changed here since start-up).',
    }),
  ),
});
export type StatusQuery = Static<typeof StatusQuery>;

const described = (description: string | undefined) =>
  description === undefined ? {} : { description };
const Time = (description?: string) =>
  Nullable(Type.String({ format: 'date-time', ...described(description) }));
const NullableNumber = (description?: string) => Nullable(Type.Number(described(description)));
const RATES_DESCRIPTION = 'Per-second rates over the last minute, oldest first, one a second.';
/** Rates of a series the sampler may not track (null then). */
const Rates = Nullable(Type.Array(Type.Number(), { description: RATES_DESCRIPTION }));

/** One tag's buffers, ranges, step history and draw rate. */
export const TagStatus = Type.Object(
  {
    tag: Type.String(),
    serving: Type.Enum(['memory', 'loading', 'failing', 'not-loaded'], {
      type: 'string',
      description:
        '`memory`: IDs are buffered, requests never wait for the store; `loading`: nothing ' +
        'buffered, a range is on ' +
        'its way; `failing`: the last load failed (see lastError); `not-loaded`: no range ' +
        'yet (loads on first use).',
    }),
    step: Type.Integer({
      description: 'Size of the latest range loaded: the dynamic step (0 before the first).',
    }),
    tagStep: Type.Integer({ description: "The tag's configured step: the dynamic step's floor." }),
    remaining: Type.Integer({
      description: 'IDs buffered: the rest of the current range plus the next range.',
    }),
    fill: Type.Number({
      minimum: 0,
      maximum: 1,
      description: 'remaining over what the two buffers hold when both are full.',
    }),
    range: Nullable(
      Type.Object(
        {
          start: Type.String(),
          end: Type.String(),
          position: Type.String({ description: 'The next ID this range issues.' }),
        },
        {
          description:
            'The range IDs come from now, `[start, end)`, decimal strings; null before the first.',
        },
      ),
    ),
    next: Nullable(
      Type.Object(
        { start: Type.String(), end: Type.String() },
        { description: 'The next range, loaded and waiting; null when none is.' },
      ),
    ),
    nextLoad: Type.Enum(['ready', 'loading', 'pending', 'failing'], {
      type: 'string',
      description:
        '`ready`: the next range is loaded; `loading`: its load is in flight; `pending`: it ' +
        'loads once the current ' +
        'range passes the prefetch threshold; `failing`: loads fail.',
    }),
    idsUntilNextLoad: Nullable(
      Type.Integer({
        description: 'With `pending`, IDs still to issue before the next range is loaded.',
      }),
    ),
    loads: Type.Integer(),
    loadFailures: Type.Integer(),
    lastLoadMs: NullableNumber('How long the latest range load took.'),
    maxLoadMs: Type.Number(),
    lastError: Nullable(
      Type.Object({
        code: Type.String(),
        message: Nullable(
          Type.String({
            description:
              "The failure's own message: only for the admin token (or with auth off); it " +
              "can name the store's " +
              'address.',
          }),
        ),
      }),
    ),
    idsPerSecond: NullableNumber(
      'IDs drawn per second over the last minute; null when not tracked (more tags are ' +
        'drawing than the dashboard ' +
        'keeps rates for).',
    ),
    rates: Rates,
    steps: Type.Array(
      Type.Object({
        at: Type.String({ format: 'date-time' }),
        step: Type.Integer(),
        ms: Type.Number(),
      }),
      { description: 'The latest range loads, oldest first: how the dynamic step moved.' },
    ),
  },
  { $id: 'TagStatus' },
);
export type TagStatus = Static<typeof TagStatus>;

/** One route's requests over the last minute. */
export const RouteActivity = Type.Object({
  route: Type.String(),
  requests: Type.Integer(),
  requestsPerSecond: Type.Number(),
  p99Ms: NullableNumber(),
});
export type RouteActivity = Static<typeof RouteActivity>;

/** One cluster-ordered tag's issuer as this node sees it. */
export const OrderedTagStatus = Type.Object({
  tag: Type.String(),
  issuer: Nullable(
    Type.String({
      description:
        '`self` while this node issues the tag, the address of the node that does when known, ' +
        'else null.',
    }),
  ),
  epoch: Nullable(
    Type.String({ description: "The latest epoch of the tag's issuer lease seen here." }),
  ),
  handovers: Type.Integer({ description: 'Times the issuer changed, as seen from this node.' }),
  claims: Type.Integer({ description: 'Times this node claimed the lease.' }),
  forwarded: Type.Integer({ description: 'Requests this node forwarded to the issuer.' }),
  servedForwarded: Type.Integer({
    description: 'Forwarded requests this node answered as the issuer.',
  }),
});
export type OrderedTagStatus = Static<typeof OrderedTagStatus>;

/** Segment mode's part: the store and one page of tags. */
export const SegmentStatus = Type.Object(
  {
    store: Type.String(),
    lastTagRefreshAt: Time(),
    tagRefreshFailures: Type.Integer(),
    total: Type.Integer({ description: 'Tags the caller may see.' }),
    inUse: Type.Integer({
      description:
        'Of those, tags in use on this node (drawn from, created or changed here since start-up).',
    }),
    matched: Type.Integer({
      description: 'Of those, tags in the list paged: matching `q`, and in use with `tags=in-use`.',
    }),
    offset: Type.Integer(),
    limit: Type.Integer(),
    nextAfter: Nullable(
      Type.String({
        description:
          'With `sort=tag`, the `after` of the next page when more tags follow; else null.',
      }),
    ),
    tags: Type.Array(Ref(TagStatus)),
    ordered: Type.Array(OrderedTagStatus, {
      description:
        'The cluster-ordered tags this node has served or forwarded (those the caller may see): ' +
        'who issues each (docs/segments.md, Cluster order).',
    }),
  },
  { description: 'Segment mode; null when it is off.' },
);
export type SegmentStatus = Static<typeof SegmentStatus>;

/** Snowflake mode's part: the layout, the worker's lease and clock. */
export const SnowflakeStatus = Type.Object(
  {
    layout: Type.Object({
      name: Type.String(),
      timeBits: Type.Integer(),
      datacenterBits: Type.Integer(),
      workerBits: Type.Integer(),
      sequenceBits: Type.Integer(),
      timeUnitMs: Type.Integer(),
      epoch: Type.String({ format: 'date-time' }),
      expiresAt: Type.String({ format: 'date-time' }),
      maxIdsPerSecond: Type.Number(),
    }),
    workerId: Type.Integer(),
    datacenterId: Type.Integer(),
    registry: Type.String(),
    status: Type.Enum(['active', 'fenced', 'recovering', 'closed'], { type: 'string' }),
    validUntil: Time('The fence: IDs stop at this time unless the lease is renewed first.'),
    expiresInMs: NullableNumber('Time left before the fence.'),
    horizon: Time(
      'The horizon recorded at the registry: nothing this node issues is later, and the ' +
        'next holder of the worker ID ' +
        'starts after it.',
    ),
    lastRenewedAt: Time(),
    renewFailures: Type.Integer(),
    leaseLosses: Type.Integer(),
    workerSwitches: Type.Integer(),
    fencedWaits: Type.Integer({
      description:
        'Requests that found the generator fenced and waited for a renewal (after a stall).',
    }),
    lastError: Nullable(
      Type.String({ description: 'Only for the admin token (or with auth off).' }),
    ),
    peerClock: Nullable(
      Type.Object(
        {
          check: Type.String(),
          checkedAt: Type.String({ format: 'date-time' }),
          peers: Type.Integer(),
          offsetMs: NullableNumber("This clock minus the mean of the peers' clocks."),
          maxPeerSkewMs: Type.Integer(),
          skipped: Nullable(Type.String()),
        },
        {
          description:
            "The start-up comparison with the live peers' clocks; null when the check is off.",
        },
      ),
    ),
    rollbacks: Type.Object({
      count: Type.Integer({ description: 'Times the clock was found behind a time already used.' }),
      policy: Type.String({ description: 'How they are handled (docs/layouts.md).' }),
    }),
    idsPerSecond: NullableNumber(),
    rates: Rates,
  },
  { description: 'Snowflake mode; null when it is off.' },
);
export type SnowflakeStatus = Static<typeof SnowflakeStatus>;

/** The whole answer. */
export const Status = Type.Object(
  {
    time: Type.String({ format: 'date-time' }),
    version: Type.String(),
    uptimeSeconds: Type.Number(),
    auth: Type.Object({
      enabled: Type.Boolean(),
      admin: Type.Boolean({
        description: 'The caller may create and change tags (admin token, or auth off).',
      }),
    }),
    server: Type.Object({
      requests: Nullable(
        Type.Object(
          {
            requestsPerSecond: Type.Number(),
            // Never null here (the window answers empty rates until it has two samples).
            rates: Type.Array(Type.Number(), { description: RATES_DESCRIPTION }),
            routes: Type.Array(RouteActivity),
          },
          {
            description:
              'Requests over the last minute, from the request histogram; null when metrics ' +
              'are off.',
          },
        ),
      ),
      errors: Type.Array(Type.Object({ code: Type.String(), count: Type.Integer() }), {
        description: 'Error answers since start, by code (docs/errors.md), most frequent first.',
      }),
      health: Type.Array(
        Type.Object({ name: Type.String(), ok: Type.Boolean(), detail: Type.String() }),
      ),
    }),
    segment: Nullable(SegmentStatus),
    snowflake: Nullable(SnowflakeStatus),
  },
  { description: 'The status now.' },
);
export type Status = Static<typeof Status>;

/** `GET /v1/status`. */
export const STATUS = defineRoute({
  method: 'GET',
  url: '/v1/status',
  access: 'any',
  operationId: 'status',
  section: 'operations',
  summary:
    "The server's live status: tags, snowflake worker, requests, errors and health (the " +
    'dashboard reads this)',
  querystring: StatusQuery,
  response: { 200: Status, ...ERRORS },
});
