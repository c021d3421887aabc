import type { FastifyInstance } from 'fastify';
import { IdMintError } from '../../core/errors.ts';
import { decomposeId, type Layout } from '../../core/layout.ts';
import type { SnowflakeWorker } from '../../service/snowflake-worker.ts';
import { checkTag } from '../../core/segment-limits.ts';
import { TAG_PARAMS, countQuery, parseCount } from '../input.ts';
import type { IssuedCounts } from '../plugins/metrics.ts';
import { JSON_TYPE } from '../plugins/errors.ts';
import { ERRORS, TEXT_TYPE, idsJson } from './shared.ts';

/** What the snowflake routes need. */
export interface SnowflakeRouteDeps {
  /** Absent when snowflake mode is off: the routes then answer MODE_DISABLED. */
  readonly worker: SnowflakeWorker | undefined;
  /** Layout used to decode IDs (the worker's, or the configured one when the mode is off). */
  readonly layout: Layout;
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
  const worker = (): SnowflakeWorker => {
    if (deps.worker === undefined) {
      throw new IdMintError('MODE_DISABLED', 'snowflake mode is turned off on this server (snowflake.enabled / IDMINT_SNOWFLAKE_ENABLED)');
    }
    return deps.worker;
  };

  app.get<{ Params: { tag: string } }>(
    '/api/snowflake/get/:tag',
    {
      config: { access: 'any', docs: { params: TAG_PARAMS } },
      schema: {
        summary: 'One snowflake ID as plain text (Leaf-compatible; Leaf ignores the tag, and so does idmint)',
        tags: ['leaf'],
        response: { 200: { description: 'The ID in decimal.', content: { 'text/plain': { schema: { type: 'string', examples: ['117600667735949312'] } } } }, ...ERRORS },
      },
    },
    (request, reply) => {
      checkTag(request.params.tag);
      const id = worker().nextString();
      issued.snowflake++;
      reply.type(TEXT_TYPE).send(id);
    },
  );

  app.get<{ Querystring: { count?: string } }>(
    '/v1/snowflake',
    {
      config: { access: 'any', docs: { querystring: countQuery(maxBatch) } },
      schema: {
        summary: 'A batch of snowflake IDs, strictly increasing',
        tags: ['snowflake'],
        response: {
          200: {
            description: 'The IDs, as decimal strings (they exceed 2^53), and the worker that made them.',
            type: 'object',
            required: ['workerId', 'ids'],
            properties: { workerId: { type: 'integer' }, ids: { type: 'array', items: { type: 'string' } } },
          },
          ...ERRORS,
        },
      },
    },
    (request, reply) => {
      const count = parseCount(request.query.count, maxBatch);
      const source = worker();
      const ids = source.nextBatch(count);
      issued.snowflake += count;
      reply.type(JSON_TYPE).send(idsJson(`{"workerId":${source.workerId},`, ids));
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

  app.get<{ Querystring: { snowflakeId?: string } }>(
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
