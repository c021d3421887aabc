import type { FastifyInstance } from 'fastify';
import { IdMintError } from '../../core/errors.ts';
import { MAX_DESCRIPTION_LENGTH, MAX_TAG_STEP, checkTag, tagNotFound } from '../../core/segment-limits.ts';
import type { SegmentStore, TagRecord } from '../../ports/segment-store.ts';
import { TAG_PARAMS, TAG_SCHEMA } from '../input.ts';
import { ERRORS } from './shared.ts';

/** What the tag routes need. */
export interface TagRouteDeps {
  /** Absent when segment mode is off: the routes then answer MODE_DISABLED. */
  readonly store: SegmentStore | undefined;
  /** Called (and awaited) after a tag is created or changed, so the ID routes see it at once. */
  readonly onTagChanged?: (tag: string) => Promise<void>;
}

/** A tag on the wire: `maxId` as a decimal string (it may exceed 2^53), dates as ISO strings. */
export interface TagJson {
  readonly tag: string;
  readonly maxId: string;
  readonly step: number;
  readonly description: string | null;
  readonly updatedAt: string | null;
}

/** Converts a stored tag to its JSON form. */
export function tagJson(record: TagRecord): TagJson {
  return {
    tag: record.tag,
    maxId: record.maxId.toString(),
    step: record.step,
    description: record.description,
    updatedAt: record.updatedAt === null ? null : record.updatedAt.toISOString(),
  };
}

const TAG_JSON_SCHEMA = {
  $id: 'Tag',
  type: 'object',
  required: ['tag', 'maxId', 'step', 'description', 'updatedAt'],
  properties: {
    tag: { type: 'string' },
    maxId: { type: 'string', description: "Where the next range starts (Leaf's max_id), in decimal." },
    step: { type: 'integer', description: 'IDs per range as configured; the server may load larger ranges under load.' },
    description: { type: ['string', 'null'] },
    updatedAt: { type: ['string', 'null'], format: 'date-time' },
  },
} as const;

const STEP_SCHEMA = { type: 'integer', minimum: 1, maximum: MAX_TAG_STEP, description: 'IDs per range (Leaf\'s step).' } as const;
const DESCRIPTION_SCHEMA = { type: ['string', 'null'], maxLength: MAX_DESCRIPTION_LENGTH } as const;
/**
 * Tag administration over the segment store: list, read, create (409 if it exists), change the
 * step or description. Writes need the admin token when auth is on.
 */
export function tagRoutes(app: FastifyInstance, deps: TagRouteDeps): void {
  const store = (): SegmentStore => {
    if (deps.store === undefined) {
      throw new IdMintError('MODE_DISABLED', 'segment mode, and with it tag administration, is turned off on this server (segment.enabled / IDMINT_SEGMENT_ENABLED)');
    }
    return deps.store;
  };
  app.addSchema(TAG_JSON_SCHEMA);

  app.get(
    '/v1/tags',
    {
      config: { access: 'any' },
      schema: {
        summary: 'Every tag (those the token may use, when auth is on), sorted by name',
        tags: ['tags'],
        response: { 200: { type: 'object', required: ['tags'], properties: { tags: { type: 'array', items: { $ref: 'Tag#' } } } }, ...ERRORS },
      },
    },
    async (request) => {
      const records = await store().listTags();
      const principal = request.principal;
      const visible = principal === undefined ? records : records.filter((record) => principal.allows(record.tag));
      return { tags: visible.map(tagJson) };
    },
  );

  app.get<{ Params: { tag: string } }>(
    '/v1/tags/:tag',
    {
      config: { access: 'tag', docs: { params: TAG_PARAMS } },
      schema: { summary: 'One tag', tags: ['tags'], response: { 200: { $ref: 'Tag#' }, ...ERRORS } },
    },
    async (request) => {
      const tag = checkTag(request.params.tag);
      const record = await store().getTag(tag);
      if (record === undefined) throw tagNotFound(tag);
      return tagJson(record);
    },
  );

  app.post<{ Body: { tag: string; step: number; startId?: string | number; description?: string | null } }>(
    '/v1/tags',
    {
      config: { access: 'admin' },
      schema: {
        summary: 'Create a tag (409 TAG_EXISTS if it exists)',
        tags: ['tags'],
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['tag', 'step'],
          properties: {
            tag: TAG_SCHEMA,
            step: STEP_SCHEMA,
            startId: {
              description: 'First ID the tag issues (default 1), a decimal string or a safe integer.',
              anyOf: [
                { type: 'string', pattern: '^(0|[1-9][0-9]{0,18})$' },
                { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
              ],
            },
            description: DESCRIPTION_SCHEMA,
          },
        },
        response: { 201: { $ref: 'Tag#' }, ...ERRORS },
      },
    },
    async (request, reply) => {
      const { tag, step, startId, description } = request.body;
      const record = await store().createTag({
        tag,
        step,
        ...(startId === undefined ? {} : { startId: BigInt(startId) }),
        ...(description === undefined ? {} : { description }),
      });
      await deps.onTagChanged?.(tag);
      return reply.code(201).send(tagJson(record));
    },
  );

  app.patch<{ Params: { tag: string }; Body: { step?: number; description?: string | null } }>(
    '/v1/tags/:tag',
    {
      config: { access: 'admin', docs: { params: TAG_PARAMS } },
      schema: {
        summary: "Change a tag's step or description (a new step applies from the next range loaded)",
        tags: ['tags'],
        body: {
          type: 'object',
          additionalProperties: false,
          minProperties: 1,
          properties: { step: STEP_SCHEMA, description: DESCRIPTION_SCHEMA },
        },
        response: { 200: { $ref: 'Tag#' }, ...ERRORS },
      },
    },
    async (request) => {
      const tag = checkTag(request.params.tag);
      const record = await store().updateTag(tag, request.body);
      await deps.onTagChanged?.(tag);
      return tagJson(record);
    },
  );
}
