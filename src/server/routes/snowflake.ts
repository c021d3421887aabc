import type { FastifyInstance } from 'fastify';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { decomposeId, type Layout } from '../../core/layout.ts';
import { BATCH_WINDOW_MS, maxBatchFor } from '../../core/snowflake.ts';
import { batchBoundReason, type SnowflakeWorker } from '../../service/snowflake-worker.ts';
import { checkTag } from '../../core/segment-limits.ts';
import { TAG_PARAMS, parseCount } from '../input.ts';
import type { IssuedCounts } from '../plugins/metrics.ts';
import { JSON_TYPE } from '../plugins/errors.ts';
import { ERRORS, JSON_SLICE, OCTET_TYPE, batchResponse, idsJson, idsOctets, leafContentType, leafRoute, wantsOctets } from './shared.ts';

/** What the snowflake routes need. */
export interface SnowflakeRouteDeps {
  /** Absent when snowflake mode is off: the routes then answer MODE_DISABLED. */
  readonly worker: SnowflakeWorker | undefined;
  /** Layout used to decode IDs (the worker's, or the configured one when the mode is off). */
  readonly layout: Layout;
  /** api.maxBatch; a batch is also bounded by what the layout issues in BATCH_WINDOW_MS (maxBatchFor). */
  readonly maxBatch: number;
  readonly issued: IssuedCounts;
}

const ID_PARAM = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', pattern: '^(0|[1-9][0-9]{0,18})$', description: 'A snowflake ID in decimal.' } },
} as const;

/**
 * Snowflake mode: Leaf's `/api/snowflake/get/{tag}` and `/decodeSnowflakeId`, and the JSON
 * `/v1/snowflake` routes. IDs come from the worker without any I/O; the routes only check input
 * and format output.
 */
export function snowflakeRoutes(app: FastifyInstance, deps: SnowflakeRouteDeps): void {
  const { layout, maxBatch, issued } = deps;
  // The worker's bound counts its sequenceSpread; with the mode off, the layout's alone (the
  // route answers MODE_DISABLED then, but the document still shows a bound).
  const layoutBound = deps.worker?.maxBatch ?? maxBatchFor(layout);
  const batchLimit = Math.min(maxBatch, layoutBound);
  const parseBatchCount = (raw: unknown): number => {
    try {
      return parseCount(raw, batchLimit);
    } catch (error) {
      // The same words as the library's nextBatchAsync, when the layout is what bounds it.
      if (batchLimit < maxBatch && isIdMintError(error, 'INVALID_ARGUMENT')) {
        throw new IdMintError('INVALID_ARGUMENT', `${error.message}: ${batchBoundReason(layout, batchLimit)}`);
      }
      throw error;
    }
  };
  const worker = (): SnowflakeWorker => {
    if (deps.worker === undefined) {
      throw new IdMintError('MODE_DISABLED', 'snowflake mode is turned off on this server (snowflake.enabled / IDMINT_SNOWFLAKE_ENABLED)');
    }
    return deps.worker;
  };

  leafRoute<{ Params: { tag: string } }>(
    app,
    '/api/snowflake/get/:tag',
    {
      config: { access: 'any', docs: { params: TAG_PARAMS } },
      schema: {
        summary: 'One snowflake ID (Leaf-compatible; any method; Leaf ignores the tag, and so does idmint): text/plain, or the bare number as JSON for Accept: application/json',
        tags: ['leaf'],
        response: {
          200: {
            description: 'The ID in decimal.',
            content: {
              'text/plain': { schema: { type: 'string', examples: ['117600667735949312'] } },
              'application/json': { schema: { type: 'integer', description: 'The same digits: a JSON number, exact only up to 2^53 in JavaScript clients.' } },
            },
          },
          ...ERRORS,
        },
      },
    },
    (request, reply) => {
      checkTag(request.params.tag);
      const id = worker().nextString();
      issued.snowflake++;
      reply.type(leafContentType(request.headers.accept)).send(id);
    },
  );

  app.get<{ Querystring: { count?: string } }>(
    '/v1/snowflake',
    {
      config: { access: 'any', docs: { querystring: batchCountQuery(batchLimit, maxBatch, layout) } },
      schema: {
        summary: 'A batch of snowflake IDs, strictly increasing: always exactly `count` of them. JSON, or binary for Accept: application/octet-stream',
        tags: ['snowflake'],
        response: {
          200: batchResponse('Exactly `count` IDs, as decimal strings (they exceed 2^53), and the worker that made them', {
            type: 'object',
            required: ['workerId', 'ids'],
            properties: { workerId: { type: 'integer' }, ids: { type: 'array', items: { type: 'string' } } },
          }),
          ...ERRORS,
        },
      },
    },
    async (request, reply) => {
      const count = parseBatchCount(request.query.count);
      const source = worker();
      // Minted between time units with the event loop running: a large batch never stalls
      // health checks, lease renewals or other requests.
      const ids = await source.nextBatchAsync(count);
      issued.snowflake += count;
      if (wantsOctets(request.headers.accept)) return reply.type(OCTET_TYPE).send(idsOctets(ids));
      return reply.type(JSON_TYPE).send(await idsJsonInSlices(`{"workerId":${decomposeId(ids[0] ?? 0n, layout).workerId},`, ids));
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/snowflake/decode/:id',
    {
      config: { access: 'any', docs: { params: ID_PARAM } },
      schema: {
        summary: "The parts of a snowflake ID under this server's layout",
        tags: ['snowflake'],
        response: {
          200: {
            type: 'object',
            required: ['id', 'layout', 'timestamp', 'date', 'workerId', 'sequence'],
            properties: {
              id: { type: 'string' },
              layout: { type: 'string' },
              timestamp: { type: 'integer', description: 'Start of the ID\'s time unit, ms since 1970.' },
              date: { type: 'string', format: 'date-time' },
              datacenterId: { type: 'integer', description: 'Only for layouts with a datacenter field.' },
              workerId: { type: 'integer' },
              sequence: { type: 'integer' },
            },
          },
          ...ERRORS,
        },
      },
    },
    (request) => {
      const parts = decomposeId(request.params.id, layout);
      return { id: request.params.id, layout: layout.name, ...parts, date: parts.date.toISOString() };
    },
  );

  // Any method, as Leaf's mapping; the ID is read from the query string only (Spring would also
  // read it from a form body).
  leafRoute<{ Querystring: { snowflakeId?: string } }>(
    app,
    '/decodeSnowflakeId',
    {
      config: {
        access: 'any',
        docs: { querystring: { type: 'object', required: ['snowflakeId'], properties: { snowflakeId: ID_PARAM.properties.id } } },
      },
      schema: {
        summary: "The parts of a snowflake ID, in Leaf's shape (all values strings; time in UTC)",
        tags: ['leaf'],
        response: {
          200: {
            type: 'object',
            required: ['timestamp', 'workerId', 'sequenceId'],
            properties: {
              timestamp: { type: 'string', examples: ['1567733700834(2019-09-06 01:35:00.834)'] },
              datacenterId: { type: 'string', description: 'Only for layouts with a datacenter field.' },
              workerId: { type: 'string' },
              sequenceId: { type: 'string' },
            },
          },
          ...ERRORS,
        },
      },
    },
    (request) => {
      const raw = request.query.snowflakeId;
      if (typeof raw !== 'string') throw new IdMintError('INVALID_ID', 'snowflakeId is required: /decodeSnowflakeId?snowflakeId=<id>');
      const parts = decomposeId(raw, layout);
      // Leaf prints "ms(yyyy-MM-dd HH:mm:ss.SSS)" in the server's zone; idmint always uses UTC so
      // the answer does not depend on where the server runs.
      const date = parts.date.toISOString().replace('T', ' ').replace('Z', '');
      return {
        timestamp: `${parts.timestamp}(${date})`,
        ...(parts.datacenterId === undefined ? {} : { datacenterId: String(parts.datacenterId) }),
        workerId: String(parts.workerId),
        sequenceId: String(parts.sequence),
      };
    },
  );
}

/** The `count` query parameter of `/v1/snowflake`, for OpenAPI. */
function batchCountQuery(limit: number, maxBatch: number, layout: Layout) {
  const bound = limit < maxBatch ? `${limit}: what layout "${layout.name}" issues in ${BATCH_WINDOW_MS} ms` : `${limit} (api.maxBatch)`;
  return {
    type: 'object',
    properties: { count: { type: 'integer', minimum: 1, maximum: limit, default: 1, description: `How many IDs, 1 to ${bound}. More is 400 INVALID_ARGUMENT naming the bound.` } },
  } as const;
}

/**
 * {@link idsJson} for batches of any size: the text is built a slice at a time with the event
 * loop let run between slices, since joining 400,000 IDs at once takes 60 ms or more.
 */
async function idsJsonInSlices(head: string, ids: readonly bigint[]): Promise<string> {
  if (ids.length <= JSON_SLICE) return idsJson(head, ids);
  const parts: string[] = [];
  for (let i = 0; i < ids.length; i += JSON_SLICE) {
    if (i > 0) await yieldToEventLoop();
    parts.push(ids.slice(i, i + JSON_SLICE).join('","'));
  }
  return `${head}"ids":["${parts.join('","')}"]}`;
}
