import type { FastifyInstance } from 'fastify';
import { IdMintError } from '../../core/errors.ts';
import { MAX_DESCRIPTION_LENGTH, MAX_TAG_STEP, checkDescription, checkTag, tagNotFound } from '../../core/segment-limits.ts';
import type { SegmentStore, TagRecord } from '../../ports/segment-store.ts';
import { noOpaqueKeys, type OpaqueIds } from '../../service/opaque-ids.ts';
import { checkOpaqueStart } from '../../stores/store-support.ts';
import { tagJson } from '../../shared/tag-json.ts';
import { TAG_PARAMS, TAG_SCHEMA } from '../input.ts';
import { ERRORS } from './shared.ts';

/** What the tag routes need. */
export interface TagRouteDeps {
  /** Absent when segment mode is off: the routes then answer MODE_DISABLED. */
  readonly store: SegmentStore | undefined;
  /** Called (and awaited) after a tag is created or changed, with the record written, so the ID routes see it at once. */
  readonly onTagChanged?: (record: TagRecord) => Promise<void>;
  /** The opaque keys; absent when none are configured: then no tag can be made opaque here. */
  readonly opaque?: OpaqueIds | undefined;
}

const TAG_JSON_SCHEMA = {
  $id: 'Tag',
  type: 'object',
  required: ['tag', 'maxId', 'step', 'description', 'updatedAt', 'opaque'],
  properties: {
    tag: { type: 'string' },
    maxId: { type: 'string', description: "Where the next range starts (Leaf's max_id), in decimal." },
    step: { type: 'integer', description: 'IDs per range as configured; the server may load larger ranges under load.' },
    description: { type: ['string', 'null'] },
    updatedAt: { type: ['string', 'null'], format: 'date-time' },
    opaque: { type: 'boolean', description: 'True when the tag answers its IDs in their opaque form (docs/formats.md).' },
  },
} as const;

const STEP_SCHEMA = { type: 'integer', minimum: 1, maximum: MAX_TAG_STEP, description: 'IDs per range (Leaf\'s step).' } as const;
const DESCRIPTION_SCHEMA = { type: ['string', 'null'], maxLength: MAX_DESCRIPTION_LENGTH } as const;
const OPAQUE_SCHEMA = {
  type: 'boolean',
  description: 'Answer the tag\'s IDs in their opaque form (FF1 under the server\'s keys; docs/formats.md). Once opaque, a tag stays opaque: false is refused on an opaque tag.',
} as const;
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
  // A tag this node could not serve is not made opaque here: it would have no IDs at all.
  const checkKeys = (tag: string) => {
    if (deps.opaque === undefined) throw noOpaqueKeys(`making tag "${tag}" opaque`, { tag });
  };
  app.addSchema(TAG_JSON_SCHEMA);

  app.get(
    '/v1/tags',
    {
      config: { access: 'any' },
      schema: {
        operationId: 'listTags',
        summary: 'Every tag (those the token may use, when auth is on), sorted by name',
        tags: ['tags'],
        response: {
          200: { description: 'The tags.', type: 'object', required: ['tags'], properties: { tags: { type: 'array', items: { $ref: 'Tag#' } } } },
          ...ERRORS,
        },
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
      schema: { operationId: 'getTag', summary: 'One tag', tags: ['tags'], response: { 200: { description: 'The tag.', $ref: 'Tag#' }, ...ERRORS } },
    },
    async (request) => {
      const tag = checkTag(request.params.tag);
      const record = await store().getTag(tag);
      if (record === undefined) throw tagNotFound(tag);
      return tagJson(record);
    },
  );

  app.post<{ Body: { tag: string; step: number; startId?: string | number; description?: string | null; opaque?: boolean } }>(
    '/v1/tags',
    {
      config: { access: 'admin' },
      schema: {
        operationId: 'createTag',
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
            opaque: OPAQUE_SCHEMA,
          },
        },
        response: { 201: { description: 'The tag, created.', $ref: 'Tag#' }, ...ERRORS },
      },
    },
    async (request, reply) => {
      const { tag, step, startId, description, opaque } = request.body;
      const segments = store();
      if (opaque === true) checkKeys(tag);
      const record = await segments.createTag({
        tag,
        step,
        ...(startId === undefined ? {} : { startId: BigInt(startId) }),
        ...(description === undefined ? {} : { description: checkDescription(description) }),
        ...(opaque === true ? { opaque } : {}),
      });
      await deps.onTagChanged?.(record);
      return reply.code(201).send(tagJson(record));
    },
  );

  app.patch<{ Params: { tag: string }; Body: { step?: number; description?: string | null; opaque?: boolean } }>(
    '/v1/tags/:tag',
    {
      config: { access: 'admin', docs: { params: TAG_PARAMS } },
      schema: {
        operationId: 'updateTag',
        summary: "Change a tag's step or description, or make it opaque (servers take a new step as Leaf does: see docs/segments.md, Steps)",
        tags: ['tags'],
        body: {
          type: 'object',
          additionalProperties: false,
          minProperties: 1,
          properties: { step: STEP_SCHEMA, description: DESCRIPTION_SCHEMA, opaque: OPAQUE_SCHEMA },
        },
        response: { 200: { description: 'The tag, changed.', $ref: 'Tag#' }, ...ERRORS },
      },
    },
    async (request) => {
      const tag = checkTag(request.params.tag);
      const { step, description, opaque } = request.body;
      const segments = store();
      if (opaque !== undefined) {
        const current = await segments.getTag(tag);
        if (current === undefined) throw tagNotFound(tag);
        if (opaque === false && current.opaque === true) {
          throw new IdMintError('INVALID_ARGUMENT', `tag "${tag}" is opaque and stays opaque: its opaque IDs are numbers its dense IDs could one day reach, so turning it back could repeat an ID; create a new tag instead`);
        }
        if (opaque === true && current.opaque !== true) {
          checkKeys(tag);
          // The next range starts at max_id: its IDs must still have an opaque form.
          checkOpaqueStart(tag, current.maxId);
        }
      }
      const record = await segments.updateTag(tag, {
        ...(step === undefined ? {} : { step }),
        ...(description === undefined ? {} : { description: checkDescription(description) }),
        ...(opaque === true ? { opaque } : {}),
      });
      await deps.onTagChanged?.(record);
      return tagJson(record);
    },
  );
}
