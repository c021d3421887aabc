import Type, { type TSchema } from 'typebox';
import { Nullable, Ref, ErrorAnswer, textContent } from './common.ts';
import { defineRoute } from './route.ts';

// Didi TinyId's routes (tinyid-server's IdContronller under `/tinyid`). Their answers are
// TinyId's, written by hand byte for byte (src/server/routes/tinyid.ts): these schemas document
// them.

const TINYID_QUERY = {
  bizType: Type.Optional(
    Type.String({ description: "The tag (TinyId's biz_type).", examples: ['order'] }),
  ),
  token: Type.Optional(
    Type.String({
      description:
        'An idmint token allowed the tag (docs/api.md, Token mapping); any with auth off.',
    }),
  ),
};
const BATCH_SIZE = Type.Optional(
  Type.Integer({
    default: 1,
    description: 'How many IDs; past api.maxBatch it is lowered to it, as TinyId does.',
  }),
);

/** TinyId's `Response<T>`: `data`, `code`, `message`. */
function tinyIdJson(data: TSchema) {
  return {
    'application/json': {
      schema: Type.Object({
        data: Type.Optional(data),
        code: Type.Optional(
          Type.Integer({
            description:
              '200; 5 a bad token (data null, message "token is error"); 6 any other failure.',
          }),
        ),
        message: Type.Optional(Type.String()),
      }),
    },
  } as const;
}

/** The one answer not in TinyId's shape: a request Spring could not bind or HTTP refuses. */
const BAD_REQUEST = Ref(ErrorAnswer, {
  description:
    "A batchSize that is not an integer (idmint's INVALID_ARGUMENT), or a request HTTP " +
    'itself refuses.',
});

/** One TinyId route: GET is the one documented; every other method answers the same. */
function tinyIdRoute(
  name: string,
  summary: string,
  querystring: TSchema,
  answer: Readonly<Record<string, unknown>>,
) {
  return defineRoute({
    method: 'GET',
    url: `/tinyid/id/${name}`,
    access: 'tinyid-token',
    operationId: `tinyId${name[0]?.toUpperCase()}${name.slice(1)}`,
    section: 'tinyid',
    summary,
    querystring,
    response: { 200: answer, '4XX': BAD_REQUEST },
  });
}

export const TINYID_NEXT_ID = tinyIdRoute(
  'nextId',
  "TinyId's nextId: the tag's next IDs in TinyId's Response (always HTTP 200; any method; " +
    'an opaque tag refused)',
  Type.Object({ ...TINYID_QUERY, batchSize: BATCH_SIZE }),
  {
    description: "TinyId's Response with the IDs as JSON numbers.",
    content: tinyIdJson(Nullable(Type.Array(Type.Integer()))),
  },
);

export const TINYID_NEXT_ID_SIMPLE = tinyIdRoute(
  'nextIdSimple',
  "TinyId's nextIdSimple: the tag's next IDs as comma-separated text; empty on any failure",
  Type.Object({ ...TINYID_QUERY, batchSize: BATCH_SIZE }),
  {
    description: 'The IDs, comma-separated; empty for a bad token or any failure.',
    content: textContent('1001,1002'),
  },
);

export const TINYID_NEXT_SEGMENT_ID = tinyIdRoute(
  'nextSegmentId',
  "TinyId's nextSegmentId: a segment of the tag's step for TinyId's client (delta = stride, " +
    'remainder = start mod ' +
    'stride)',
  Type.Object(TINYID_QUERY),
  {
    description: "TinyId's Response with a SegmentId: IDs (currentId, maxId] stepping by delta.",
    content: tinyIdJson(
      Nullable(
        Type.Object({
          maxId: Type.Optional(Type.Integer()),
          loadingId: Type.Optional(Type.Integer()),
          currentId: Type.Optional(Type.Integer()),
          delta: Type.Optional(Type.Integer()),
          remainder: Type.Optional(Type.Integer()),
        }),
      ),
    ),
  },
);

export const TINYID_NEXT_SEGMENT_ID_SIMPLE = tinyIdRoute(
  'nextSegmentIdSimple',
  "TinyId's nextSegmentIdSimple: currentId,loadingId,maxId,delta,remainder as text; empty " +
    'on any failure',
  Type.Object(TINYID_QUERY),
  {
    description: 'currentId,loadingId,maxId,delta,remainder; empty for a bad token or any failure.',
    content: textContent('1000,1200,2000,1,0'),
  },
);
