import type { FastifyInstance } from 'fastify';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { decodeAny } from '../../core/id-formats.ts';
import { decomposeId, type Layout } from '../../core/layout.ts';
import { OPAQUE_SNOWFLAKE_DOMAIN } from '../../core/opaque.ts';
import { checkTag, tagNotFound } from '../../core/segment-limits.ts';
import { maxBatchFor } from '../../core/snowflake.ts';
import type { Clock } from '../../ports/clock.ts';
import type { SegmentStore } from '../../ports/segment-store.ts';
import type { IdFamilies, IdFamily } from '../../service/id-families.ts';
import { noOpaqueKeys, type OpaqueIds } from '../../service/opaque-ids.ts';
import { batchBoundReason, type SnowflakeWorker } from '../../service/snowflake-worker.ts';
import { TAG_PARAMS, countQuery, parseCount } from '../input.ts';
import { JSON_TYPE } from '../plugins/errors.ts';
import type { IssuedCounts } from '../plugins/metrics.ts';
import { ERRORS, idsJson } from './shared.ts';

/** What the family and opaque routes need. */
export interface FamilyRouteDeps {
  readonly families: IdFamilies;
  /** api.maxBatch: the `count` bound, as for every batch route. */
  readonly maxBatch: number;
  /** The server's snowflake layout, for decimal IDs at /v1/decode and opaque snowflake IDs. */
  readonly layout: Layout;
  /** Clock of the snowflake bound on decoding opaque snowflake IDs (nothing later than a day ahead decodes). */
  readonly clock: Clock;
  /** The opaque keys; absent when none are configured (the opaque routes answer OPAQUE_UNAVAILABLE). */
  readonly opaque: OpaqueIds | undefined;
  /** Snowflake mode, for opaque snowflake IDs; absent when off (MODE_DISABLED). */
  readonly worker: SnowflakeWorker | undefined;
  /** Segment mode's store, for an opaque tag's `max_id` when decoding; absent when off. */
  readonly store: SegmentStore | undefined;
  /** Where IDs handed out are counted (idmint_ids_issued_total). */
  readonly issued: IssuedCounts;
}

/** IDs generated per slice, with the event loop let run between slices (a few ms each). */
const SLICE = 16_384;

/** The route of each family, its OpenAPI operationId and what its IDs look like. */
const FAMILY_ROUTES: readonly { family: IdFamily; url: string; operationId: string; summary: string; example: string }[] = [
  { family: 'uuid7', url: '/v1/uuid7', operationId: 'uuid7Ids', summary: 'UUIDv7s (RFC 9562), strictly increasing as strings and bytes', example: '019a0f6c-1d32-7a41-8b3c-5e0d2f7a9c11' },
  { family: 'uuid4', url: '/v1/uuid4', operationId: 'uuid4Ids', summary: 'UUIDv4s (RFC 9562): 122 random bits, no order', example: '3b241101-e2bb-4255-8caf-4136c566a962' },
  { family: 'ulid', url: '/v1/ulid', operationId: 'ulids', summary: 'ULIDs, monotonic by the spec\'s rule: strictly increasing', example: '01K7ZJ3F2V0Q8X3N6W1T5R9B4M' },
  { family: 'objectid', url: '/v1/objectid', operationId: 'objectIds', summary: 'MongoDB ObjectIds (BSON spec), never repeating: a used-up second is waited out', example: '6a1f0c2b9e4d7f3a1c2b0e9d' },
];

const IDS_RESPONSE = (example: string) =>
  ({
    description: 'Exactly `count` IDs, in the order they were made.',
    type: 'object',
    required: ['ids'],
    properties: { ids: { type: 'array', items: { type: 'string', examples: [example] } } },
  }) as const;

const ANY_ID_PARAM = {
  type: 'object',
  required: ['id'],
  properties: {
    id: {
      type: 'string',
      minLength: 1,
      maxLength: 256,
      description: 'A UUID (36 characters), an ObjectId (24 hex digits), a ULID (26 Crockford base32 characters) or a decimal snowflake ID (up to 19 digits).',
    },
  },
} as const;

/** Every field a decoded ID may have; which ones depends on `format` (docs/formats.md, Decoding). */
const DECODED_SCHEMA = {
  description: 'The ID\'s format and parts. Time fields are absent for UUIDs other than version 7.',
  type: 'object',
  required: ['format', 'id'],
  properties: {
    format: { type: 'string', enum: ['uuid', 'ulid', 'objectid', 'snowflake'] },
    id: { type: 'string', description: 'The ID in its canonical form.' },
    timestamp: { type: 'integer', description: 'ms since 1970 (ObjectId: its second; snowflake: the start of its time unit).' },
    date: { type: 'string', format: 'date-time' },
    version: { type: 'integer', description: 'UUID: the version field.' },
    variant: { type: 'string', description: 'UUID: the variant.' },
    randA: { type: 'integer', description: 'UUIDv7: the 12-bit rand_a field.' },
    randB: { type: 'string', description: 'UUIDv7: the 62-bit rand_b field, 16 hex digits.' },
    counter: { type: 'integer', description: 'UUIDv7 (as idmint lays it out) and ObjectId: the counter.' },
    random: { type: 'string', description: 'ULID: the 80-bit random part, 20 hex digits.' },
    processRandom: { type: 'string', description: 'ObjectId: the 5 per-process random bytes, 10 hex digits.' },
    layout: { type: 'string', description: 'Snowflake: the layout it was decoded with (the server\'s).' },
    datacenterId: { type: 'integer', description: 'Snowflake: only for layouts with a datacenter field.' },
    workerId: { type: 'integer', description: 'Snowflake.' },
    sequence: { type: 'integer', description: 'Snowflake.' },
  },
} as const;

const OPAQUE_DIGITS = OPAQUE_SNOWFLAKE_DOMAIN.digits + 1;

/**
 * The ID families (`/v1/uuid7`, `/v1/uuid4`, `/v1/ulid`, `/v1/objectid`), decoding of any ID
 * idmint makes (`/v1/decode/{id}`), and opaque IDs: opaque snowflake IDs and, with the admin
 * token, decoding an opaque ID back to its dense ID. Batch routes take the same `count` and the
 * same token as `/v1/snowflake`; the IDs come from generators made once for the server's life.
 */
export function familyRoutes(app: FastifyInstance, deps: FamilyRouteDeps): void {
  const { families, maxBatch, layout, issued } = deps;

  for (const route of FAMILY_ROUTES) {
    app.get<{ Querystring: { count?: string } }>(
      route.url,
      {
        config: { access: 'any', docs: { querystring: countQuery(maxBatch) } },
        schema: { operationId: route.operationId, summary: route.summary, tags: ['families'], response: { 200: IDS_RESPONSE(route.example), ...ERRORS } },
      },
      async (request, reply) => {
        const count = parseCount(request.query.count, maxBatch);
        const body = await idsInSlices(count, (n) => families.next(route.family, n));
        issued.addFamily(route.family, count);
        return reply.type(JSON_TYPE).send(body);
      },
    );
  }

  app.get<{ Params: { id: string } }>(
    '/v1/decode/:id',
    {
      config: { access: 'any', docs: { params: ANY_ID_PARAM } },
      schema: {
        operationId: 'decodeId',
        summary: 'The format and parts of any ID idmint makes, its format detected by its shape (decimal IDs are decoded as snowflake IDs under the server\'s layout)',
        tags: ['families'],
        response: { 200: DECODED_SCHEMA, ...ERRORS },
      },
    },
    (request) => {
      const id = request.params.id;
      if (/^[1-9][0-9]{24}$/.test(id)) {
        throw new IdMintError('INVALID_ID', `"${id}" has the shape of an opaque snowflake ID (${OPAQUE_DIGITS} digits): only the keys can decode it, at /v1/opaque/snowflake/{id} with the admin token`);
      }
      const decoded = decodeAny(id, { layout });
      return { ...decoded, ...('date' in decoded && decoded.date !== undefined ? { date: decoded.date.toISOString() } : {}) };
    },
  );

  const keys = (what: string): OpaqueIds => deps.opaque ?? failNoKeys(what);
  const worker = (): SnowflakeWorker => {
    if (deps.worker === undefined) {
      throw new IdMintError('MODE_DISABLED', 'snowflake mode is turned off on this server (snowflake.enabled / IDMINT_SNOWFLAKE_ENABLED), and with it opaque snowflake IDs');
    }
    return deps.worker;
  };
  const store = (): SegmentStore => {
    if (deps.store === undefined) {
      throw new IdMintError('MODE_DISABLED', 'segment mode is turned off on this server (segment.enabled / IDMINT_SEGMENT_ENABLED), and with it opaque segment IDs');
    }
    return deps.store;
  };

  const layoutBound = deps.worker?.maxBatch ?? maxBatchFor(layout);
  const snowflakeLimit = Math.min(maxBatch, layoutBound);
  app.get<{ Querystring: { count?: string } }>(
    '/v1/opaque/snowflake',
    {
      config: { access: 'any', docs: { querystring: countQuery(snowflakeLimit) } },
      schema: {
        operationId: 'opaqueSnowflakeIds',
        summary: `Opaque snowflake IDs: snowflake IDs run through FF1 under the server's key, ${OPAQUE_DIGITS}-digit decimal strings that show no time, worker or order`,
        tags: ['opaque'],
        response: { 200: IDS_RESPONSE('2041385516793640113853327'), ...ERRORS },
      },
    },
    async (request, reply) => {
      let count: number;
      try {
        count = parseCount(request.query.count, snowflakeLimit);
      } catch (error) {
        if (snowflakeLimit < maxBatch && isIdMintError(error, 'INVALID_ARGUMENT')) throw new IdMintError('INVALID_ARGUMENT', `${error.message}: ${batchBoundReason(layout, snowflakeLimit)}`);
        throw error;
      }
      const codec = keys('opaque snowflake IDs');
      const ids = await worker().nextBatchAsync(count);
      issued.snowflake += count;
      return reply.type(JSON_TYPE).send(idsJson('{', codec.snowflakeIds(ids)));
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/opaque/snowflake/:id',
    {
      config: {
        access: 'admin',
        docs: { params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: `^[1-9][0-9]{${OPAQUE_DIGITS - 1}}$`, description: 'An opaque snowflake ID.' } } } },
      },
      schema: {
        operationId: 'decodeOpaqueSnowflakeId',
        summary: 'The snowflake ID behind an opaque one, and its parts (admin token)',
        tags: ['opaque'],
        response: {
          200: {
            type: 'object',
            required: ['id', 'dense', 'keyId', 'layout', 'timestamp', 'date', 'workerId', 'sequence'],
            properties: {
              id: { type: 'string', description: 'The opaque ID, as given.' },
              dense: { type: 'string', description: 'The snowflake ID, in decimal.' },
              keyId: { type: 'integer', description: 'The key it was made under.' },
              layout: { type: 'string' },
              timestamp: { type: 'integer' },
              date: { type: 'string', format: 'date-time' },
              datacenterId: { type: 'integer' },
              workerId: { type: 'integer' },
              sequence: { type: 'integer' },
            },
          },
          ...ERRORS,
        },
      },
    },
    (request) => {
      const id = request.params.id;
      const decoded = keys('decoding opaque IDs').decodeSnowflake(id, layout, deps.clock.now());
      const parts = decomposeId(decoded.dense, layout);
      return { id, dense: decoded.dense.toString(), keyId: decoded.keyId, layout: layout.name, ...parts, date: parts.date.toISOString() };
    },
  );

  app.get<{ Params: { tag: string; id: string } }>(
    '/v1/opaque/segment/:tag/:id',
    {
      config: {
        access: 'admin',
        docs: {
          params: {
            type: 'object',
            required: ['tag', 'id'],
            properties: { ...TAG_PARAMS.properties, id: { type: 'string', pattern: '^[1-8][0-9]{18}$', description: 'An opaque ID of the tag.' } },
          },
        },
      },
      schema: {
        operationId: 'decodeOpaqueSegmentId',
        summary: "The dense ID behind an opaque ID of a tag, checked against the tag's max_id (admin token)",
        tags: ['opaque'],
        response: {
          200: {
            type: 'object',
            required: ['tag', 'id', 'dense', 'keyId'],
            properties: {
              tag: { type: 'string' },
              id: { type: 'string', description: 'The opaque ID, as given.' },
              dense: { type: 'string', description: 'The dense segment ID, in decimal.' },
              keyId: { type: 'integer', description: 'The key it was made under.' },
            },
          },
          ...ERRORS,
        },
      },
    },
    async (request) => {
      const tag = checkTag(request.params.tag);
      const codec = keys('decoding opaque IDs');
      const record = await store().getTag(tag);
      if (record === undefined) throw tagNotFound(tag);
      // A plain tag never issued an opaque ID (tags only ever turn opaque, never back).
      if (record.opaque !== true) throw new IdMintError('INVALID_ID', `tag "${tag}" is not opaque: its IDs are its dense IDs, and none of them is an opaque ID`);
      const decoded = codec.decodeSegment(tag, request.params.id, record.maxId);
      return { tag, id: decoded.id, dense: decoded.dense.toString(), keyId: decoded.keyId };
    },
  );
}

function failNoKeys(what: string): never {
  throw noOpaqueKeys(what);
}

/**
 * `{"ids":[...]}` for `count` IDs made `SLICE` at a time, the event loop let run between slices:
 * a batch of a million never stalls health checks or other requests. The IDs need no escaping
 * (hex, dashes, base32), so joining is exact.
 */
async function idsInSlices(count: number, make: (n: number) => string[]): Promise<string> {
  if (count <= SLICE) return `{"ids":["${make(count).join('","')}"]}`;
  const parts: string[] = [];
  for (let done = 0; done < count; done += SLICE) {
    if (done > 0) await yieldToEventLoop();
    parts.push(make(Math.min(SLICE, count - done)).join('","'));
  }
  return `{"ids":["${parts.join('","')}"]}`;
}
