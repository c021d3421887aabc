import type { FastifyInstance, FastifyReply } from 'fastify';
import { IdMintError } from '../../core/errors.ts';
import type { SegmentService } from '../../core/segment-service.ts';
import { checkTag } from '../../core/segment-limits.ts';
import { TAG_PARAMS, countQuery, parseCount } from '../input.ts';
import { JSON_TYPE } from '../plugins/errors.ts';
import type { IssuedCounts } from '../plugins/metrics.ts';
import { ERRORS, TEXT_TYPE, idsJson } from './shared.ts';

/** What the segment routes need. */
export interface SegmentRouteDeps {
  /** Absent when segment mode is off: the routes then answer MODE_DISABLED. */
  readonly service: SegmentService | undefined;
  readonly maxBatch: number;
  readonly issued: IssuedCounts;
}

/**
 * Segment mode: Leaf's `/api/segment/get/{tag}` and the JSON `/v1/segment/{tag}` batch route.
 *
 * The single-ID route answers from the tag's buffer without a Promise whenever an ID is buffered,
 * which is all but a few requests per range; only a miss (unknown tag, range being loaded, store
 * trouble) takes the async path, where the tag is checked and the service waits or fails.
 */
export function segmentRoutes(app: FastifyInstance, deps: SegmentRouteDeps): void {
  const { maxBatch, issued } = deps;
  const service = (): SegmentService => {
    if (deps.service === undefined) {
      throw new IdMintError('MODE_DISABLED', 'segment mode is turned off on this server (segment.enabled / IDMINT_SEGMENT_ENABLED)');
    }
    return deps.service;
  };

  const slowSingle = async (tag: string, reply: FastifyReply): Promise<void> => {
    const id = await service().next(checkTag(tag));
    issued.addSegment(tag, 1);
    reply.type(TEXT_TYPE).send(id.toString());
  };

  app.get<{ Params: { tag: string } }>(
    '/api/segment/get/:tag',
    {
      config: { access: 'tag', docs: { params: TAG_PARAMS } },
      schema: {
        summary: "The tag's next ID as plain text (Leaf-compatible)",
        tags: ['leaf'],
        response: { 200: { description: 'The ID in decimal.', content: { 'text/plain': { schema: { type: 'string', examples: ['1001'] } } } }, ...ERRORS },
      },
    },
    (request, reply) => {
      const tag = request.params.tag;
      // Only tags the service already holds can have a buffered ID, so the fast path needs no tag check.
      const id = deps.service?.nextSync(tag);
      if (id === undefined) return slowSingle(tag, reply);
      issued.addSegment(tag, 1);
      reply.type(TEXT_TYPE).send(id.toString());
      return undefined;
    },
  );

  app.get<{ Params: { tag: string }; Querystring: { count?: string } }>(
    '/v1/segment/:tag',
    {
      config: { access: 'tag', docs: { params: TAG_PARAMS, querystring: countQuery(maxBatch) } },
      schema: {
        summary: "A batch of the tag's next IDs, increasing (dense unless a range boundary or a restart falls inside)",
        tags: ['segment'],
        response: {
          200: {
            description: 'The tag and its IDs, as decimal strings.',
            type: 'object',
            required: ['tag', 'ids'],
            properties: { tag: { type: 'string' }, ids: { type: 'array', items: { type: 'string' } } },
          },
          ...ERRORS,
        },
      },
    },
    async (request, reply) => {
      const tag = checkTag(request.params.tag);
      const count = parseCount(request.query.count, maxBatch);
      const segments = service();
      const ids = segments.nextBatchSync(tag, count) ?? (await segments.nextBatch(tag, count));
      issued.addSegment(tag, count);
      // The tag passed checkTag, so it needs no JSON escaping.
      return reply.type(JSON_TYPE).send(idsJson(`{"tag":"${tag}",`, ids));
    },
  );
}
