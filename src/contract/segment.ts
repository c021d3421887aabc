import Type, { type Static } from 'typebox';
import { ERRORS, TagParams, batchResponse, countQuery } from './common.ts';
import { defineRoute, type CountBound } from './route.ts';
import { MAX_SEGMENT_STRIDE } from '../core/segment-limits.ts';

// Segment mode's routes: Leaf's single ID, the JSON batch and the range a client issues itself.

/** `GET /api/segment/get/{tag}`: Leaf's route; the ID as text, or a bare JSON number. */
export const LEAF_SEGMENT_ID = defineRoute({
  method: 'GET',
  url: '/api/segment/get/:tag',
  access: 'tag',
  operationId: 'leafSegmentId',
  section: 'leaf',
  summary:
    "The tag's next ID (Leaf-compatible; any method): text/plain, or the same bare number " +
    "as JSON for Accept: application/json. An opaque tag's ID is its opaque form: 19 digits, " +
    'a signed BIGINT',
  params: TagParams,
  response: {
    200: {
      description: 'The ID in decimal.',
      content: {
        'text/plain': { schema: Type.String({ examples: ['1001'] }) },
        'application/json': { schema: Type.Integer({ examples: [1001] }) },
      },
    },
    ...ERRORS,
  },
});

/**
 * The JSON batch: the tag and its IDs, as decimal strings (a periodic tag's formatted, with their
 * period).
 */
export const SegmentBatch = Type.Object({
  tag: Type.String(),
  period: Type.Optional(
    Type.String({
      description:
        "A periodic tag's only: the period every ID of the batch belongs to (`20261127`, " +
        '`202611`).',
    }),
  ),
  ids: Type.Array(Type.String()),
});
export type SegmentBatch = Static<typeof SegmentBatch>;

/** `GET /v1/segment/{tag}?count=N`: a batch of the tag's IDs, as JSON or binary. */
export const SEGMENT_BATCH = defineRoute({
  method: 'GET',
  url: '/v1/segment/:tag',
  access: 'tag',
  operationId: 'segmentIds',
  section: 'segment',
  summary:
    "A batch of the tag's next IDs, increasing (dense unless a range boundary or a restart " +
    "falls inside); an opaque tag's in their opaque form, in no visible order. JSON, or " +
    'binary for Accept: application/octet-stream',
  params: TagParams,
  querystring: countQuery,
  response: {
    200: batchResponse('The tag and its IDs, as decimal strings', SegmentBatch),
    ...ERRORS,
  },
});

/**
 * A range the caller issues itself: `start`, `start + stride`, ... up to `last`; `end` exclusive.
 */
export const SegmentRange = Type.Object(
  {
    tag: Type.String(),
    start: Type.String({ description: 'First ID of the range (inclusive).', examples: ['1001'] }),
    end: Type.String({
      description: 'One stride past the last ID: exclusive. `(end - start) / stride` is `size`.',
      examples: ['2001'],
    }),
    last: Type.String({
      description: 'Last ID of the range (inclusive): `end - stride`.',
      examples: ['2000'],
    }),
    stride: Type.Integer({
      minimum: 1,
      maximum: MAX_SEGMENT_STRIDE,
      description:
        "Distance between consecutive IDs: the tag's delta (1: every ID), times N from one " +
        "database of a set of N (every ID in `start`'s residue class mod stride). Step by it.",
    }),
    size: Type.Integer({
      minimum: 1,
      description:
        'IDs in the range: the `size` asked for, or fewer when the buffered range held fewer ' +
        '(never more).',
    }),
  },
  {
    description:
      'The range: IDs `start`, `start + stride`, ... up to `last`; `end` is exclusive. ' +
      'Decimal strings.',
  },
);
export type SegmentRange = Static<typeof SegmentRange>;

/** `GET /v1/segment/{tag}/range?size=N`: exactly N of the tag's IDs as one range. */
export const SEGMENT_RANGE = defineRoute({
  method: 'GET',
  url: '/v1/segment/:tag/range',
  access: 'tag',
  operationId: 'segmentRange',
  section: 'segment',
  summary:
    "Reserves exactly `size` of the tag's next IDs as one range the caller issues itself (end " +
    'exclusive, step by `stride`); refused for an opaque tag',
  params: TagParams,
  querystring: ({ max, bound }: CountBound) =>
    Type.Object({
      size: Type.Integer({
        minimum: 1,
        maximum: max,
        description: `How many IDs, 1 to ${bound}.`,
      }),
    }),
  response: { 200: SegmentRange, ...ERRORS },
});
