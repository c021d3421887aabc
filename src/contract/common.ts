import Type, { type Static, type TSchema, type TUnsafe } from 'typebox';
import { IdMintError } from '../core/errors.ts';
import { TAG_PATTERN } from '../core/segment-limits.ts';
import type { CountBound } from './route.ts';

// Schemas and helpers every part of the HTTP contract shares.

/**
 * `T | null` as one schema, `type: [T's type, "null"]`, rather than TypeBox's `anyOf`:
 * fast-json-stringify writes a type list directly, where it validates an `anyOf` branch by
 * branch for every value (and throws for a value no branch takes, such as 1.5 for an integer).
 */
export function Nullable<T extends TSchema & { readonly type: string }>(
  schema: T,
): TUnsafe<Static<T> | null> {
  return Type.Unsafe<Static<T> | null>({ ...schema, type: [schema.type, 'null'] });
}

/**
 * A `$ref` to a schema the server registers by its `$id` (Fastify's addSchema), typed as that
 * schema.
 */
export function Ref<T extends TSchema & { readonly $id?: string }>(
  schema: T,
  options: { readonly description?: string } = {},
): TUnsafe<Static<T>> {
  if (schema.$id === undefined)
    throw new IdMintError('INTERNAL_ERROR', 'a $ref needs a schema with an $id');
  return Type.Unsafe<Static<T>>({ ...options, $ref: `${schema.$id}#` });
}

/** Every error answer's body (docs/errors.md has the codes). */
export const ErrorAnswer = Type.Object(
  {
    error: Type.Object({
      code: Type.String({
        description: 'Stable error code; see docs/errors.md.',
        examples: ['TAG_NOT_FOUND'],
      }),
      message: Type.String({
        description:
          'What went wrong, for humans. For a 5xx, a fixed sentence and the request id; the ' +
          'server log has the ' +
          'details.',
      }),
    }),
  },
  { $id: 'Error' },
);
export type ErrorAnswer = Static<typeof ErrorAnswer>;

const errorResponse = (description: string) => Ref(ErrorAnswer, { description });

/** Error answers every ID route may give, for the OpenAPI document. */
export const ERRORS = {
  '4XX': errorResponse(
    'Invalid input (400), auth (401, 403), unknown tag or disabled mode (404), conflict (409).',
  ),
  '5XX': errorResponse(
    'Store, registry or clock trouble (503, with Retry-After when retrying helps).',
  ),
} as const;

/**
 * The error answers of a route that takes no input (operations): only a malformed request (a
 * body that is not JSON, for instance) draws one.
 */
export const MALFORMED = { '4XX': errorResponse('Malformed request (400, 415).') } as const;

/** A new tag's name (the JSON API creates only these). */
export const TagName = Type.String({
  pattern: TAG_PATTERN.source,
  description: 'Business tag: 1 to 128 letters, digits, `_`, `.`, `:` or `-`.',
  examples: ['order'],
});

/** A tag in a path: any tag a store holds (core's checkTag), percent-encoded. */
export const TagInPath = Type.String({
  minLength: 1,
  maxLength: 128,
  description:
    'Business tag: 1 to 128 characters, any a Leaf `biz_tag` holds but U+0000 (Unicode, ' +
    'spaces, `/` included), ' +
    'percent-encoded.',
  examples: ['order'],
});

/** The `{tag}` path parameter. */
export const TagParams = Type.Object({ tag: TagInPath });

/** A snowflake ID in decimal, as a path or query value. */
export const SnowflakeIdText = Type.String({
  pattern: '^(0|[1-9][0-9]{0,18})$',
  description: 'A snowflake ID in decimal.',
});

/** The `count` query parameter of a batch route, 1 to the server's bound. */
export function countQuery({ max, bound }: CountBound) {
  return Type.Object({
    count: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: max,
        default: 1,
        description: `How many IDs, 1 to ${bound}.`,
      }),
    ),
  });
}

/** The bound of a batch route that only api.maxBatch limits. */
export function maxBatchBound(maxBatch: number): CountBound {
  return { max: maxBatch, bound: `${maxBatch} (api.maxBatch)` };
}

/** Content type of binary batches: each ID a big-endian unsigned 64-bit integer. */
export const OCTET_TYPE = 'application/octet-stream';

/**
 * The 200 answer of a batch route: `json` (its JSON object's schema) by default, or the IDs alone
 * in binary for `Accept: application/octet-stream`.
 */
export function batchResponse<const S extends TSchema>(jsonDescription: string, json: S) {
  return {
    description:
      `${jsonDescription}; or, for \`Accept: application/octet-stream\`, the IDs alone as ` +
      `big-endian unsigned 64-bit ` +
      `integers.`,
    content: {
      'application/json': { schema: json },
      [OCTET_TYPE]: {
        schema: {
          type: 'string',
          format: 'binary',
          description:
            'The IDs as big-endian unsigned 64-bit integers, 8 bytes each, in the same ' +
            'order as the JSON form; the ' +
            'body length is 8 x count.',
        },
      },
    },
  } as const;
}

/** A `text/plain` answer's content, with an example. */
export function textContent(example: string) {
  return { 'text/plain': { schema: Type.String({ examples: [example] }) } } as const;
}
