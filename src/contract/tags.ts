import Type, { type Static } from 'typebox';
import { MAX_DESCRIPTION_LENGTH, MAX_TAG_DELTA, MAX_TAG_STEP } from '../core/segment-limits.ts';
import { MAX_TEMPLATE_LENGTH } from '../core/periodic.ts';
import { ERRORS, Nullable, Ref, TagName, TagParams } from './common.ts';
import { defineRoute } from './route.ts';

// Tag administration: list, read, create, change.

/**
 * A tag on the wire, as the HTTP API answers it and `idmint tags list --json` prints it: `maxId`
 * as a decimal string (it may exceed 2^53), dates as ISO strings.
 */
/** A periodic tag's option (docs/segments.md, Periodic sequences). */
export const Periodic = Type.Object(
  {
    period: Type.Union([Type.Literal('day'), Type.Literal('month')], {
      description: 'How often the sequence restarts.',
    }),
    timeZone: Type.String({
      maxLength: 64,
      description: 'IANA time zone where the day or month is read, e.g. `Asia/Shanghai` or `UTC`.',
    }),
    template: Type.String({
      maxLength: MAX_TEMPLATE_LENGTH,
      description:
        'The formatted ID: `{yyyy}` `{yy}` `{MM}` `{dd}` (run together as `{yyyyMMdd}`), ' +
        '`{seq:N}` (N digits, ' +
        'zero-padded), and literals of `A-Z a-z 0-9 _ . : -`; e.g. `{yyyyMMdd}{seq:6}`.',
      examples: ['{yyyyMMdd}{seq:6}'],
    }),
    start: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: 'First sequence number of each period (default 1).',
      }),
    ),
  },
  { additionalProperties: false },
);
export type Periodic = Static<typeof Periodic>;

/** How a tag's IDs are ordered across nodes (docs/segments.md, Cluster order). */
export const Ordering = Type.Literal('cluster', {
  description:
    '`cluster`: one node at a time issues the tag, so every answer is above every answer that ' +
    'came before it anywhere in the cluster. Set at creation only; not with `opaque` (encrypted ' +
    'IDs keep no order) nor `periodic` (its sequence restarts each period).',
});
export type Ordering = Static<typeof Ordering>;

export const Tag = Type.Object(
  {
    tag: Type.String(),
    maxId: Type.String({ description: "Where the next range starts (Leaf's max_id), in decimal." }),
    step: Type.Integer({
      description: 'IDs per range as configured; the server may load larger ranges under load.',
    }),
    description: Nullable(Type.String()),
    updatedAt: Nullable(Type.String({ format: 'date-time' })),
    opaque: Type.Boolean({
      description: 'True when the tag answers its IDs in their opaque form (docs/formats.md).',
    }),
    delta: Type.Integer({
      description: "The tag issues only IDs ≡ remainder (mod delta) (TinyId's delta); 1: every ID.",
    }),
    remainder: Type.Integer({ description: "0 to delta - 1 (TinyId's remainder)." }),
    periodic: Type.Optional(Periodic),
    ordering: Type.Optional(Ordering),
  },
  { $id: 'Tag' },
);
export type Tag = Static<typeof Tag>;

export const TagList = Type.Object({ tags: Type.Array(Ref(Tag)) }, { description: 'The tags.' });
export type TagList = Static<typeof TagList>;

const Step = Type.Integer({
  minimum: 1,
  maximum: MAX_TAG_STEP,
  description: "IDs per range (Leaf's step).",
});
const Description = Nullable(Type.String({ maxLength: MAX_DESCRIPTION_LENGTH }));
const Delta = Type.Integer({
  minimum: 1,
  maximum: MAX_TAG_DELTA,
  description:
    "Issue only IDs ≡ remainder (mod delta), TinyId's delta (default 1: every ID). In a set of N " +
    'databases it must be coprime to N.',
});
const Remainder = Type.Integer({
  minimum: 0,
  maximum: MAX_TAG_DELTA - 1,
  description: "0 to delta - 1, TinyId's remainder (default 0).",
});
const Opaque = Type.Boolean({
  description:
    "Answer the tag's IDs in their opaque form (FF1 under the server's keys; " +
    'docs/formats.md). Once opaque, a tag ' +
    'stays opaque: false is refused on an opaque tag.',
});

/** `POST /v1/tags`'s body. Unknown fields are refused, not dropped. */
export const NewTag = Type.Object(
  {
    tag: TagName,
    step: Step,
    startId: Type.Optional(
      Type.Union(
        [
          Type.String({ pattern: '^(0|[1-9][0-9]{0,18})$' }),
          Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
        ],
        { description: 'First ID the tag issues (default 1), a decimal string or a safe integer.' },
      ),
    ),
    description: Type.Optional(Description),
    opaque: Type.Optional(Opaque),
    delta: Type.Optional(Delta),
    remainder: Type.Optional(Remainder),
    periodic: Type.Optional(Periodic),
    ordering: Type.Optional(Ordering),
  },
  { additionalProperties: false },
);
export type NewTag = Static<typeof NewTag>;

/** `PATCH /v1/tags/{tag}`'s body: at least one change. */
export const TagChanges = Type.Object(
  {
    step: Type.Optional(Step),
    description: Type.Optional(Description),
    opaque: Type.Optional(Opaque),
    delta: Type.Optional(Delta),
    remainder: Type.Optional(Remainder),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type TagChanges = Static<typeof TagChanges>;

/** `GET /v1/tags`: the tags the caller may see. */
export const LIST_TAGS = defineRoute({
  method: 'GET',
  url: '/v1/tags',
  access: 'any',
  operationId: 'listTags',
  section: 'tags',
  summary: 'Every tag (those the token may use, when auth is on), sorted by name',
  response: { 200: TagList, ...ERRORS },
});

/** `GET /v1/tags/{tag}`. */
export const GET_TAG = defineRoute({
  method: 'GET',
  url: '/v1/tags/:tag',
  access: 'tag',
  operationId: 'getTag',
  section: 'tags',
  summary: 'One tag',
  params: TagParams,
  response: { 200: Ref(Tag, { description: 'The tag.' }), ...ERRORS },
});

/** `POST /v1/tags` (admin token). */
export const CREATE_TAG = defineRoute({
  method: 'POST',
  url: '/v1/tags',
  access: 'admin',
  operationId: 'createTag',
  section: 'tags',
  summary: 'Create a tag (409 TAG_EXISTS if it exists)',
  body: NewTag,
  response: { 201: Ref(Tag, { description: 'The tag, created.' }), ...ERRORS },
});

/** `PATCH /v1/tags/{tag}` (admin token). */
export const UPDATE_TAG = defineRoute({
  method: 'PATCH',
  url: '/v1/tags/:tag',
  access: 'admin',
  operationId: 'updateTag',
  section: 'tags',
  summary:
    "Change a tag's step, description or sequence (delta and remainder, given together), or " +
    'make it ' +
    'opaque (servers take a new step as Leaf does: see docs/segments.md, Steps)',
  params: TagParams,
  body: TagChanges,
  response: { 200: Ref(Tag, { description: 'The tag, changed.' }), ...ERRORS },
});
