import Type, { type Static } from 'typebox';
import { ERRORS, SnowflakeIdText, TagParams, batchResponse } from './common.ts';
import { defineRoute, type CountBound } from './route.ts';

const MORE_IS_REFUSED = 'More is 400 INVALID_ARGUMENT naming the bound.';

// Snowflake mode's routes: Leaf's single ID and decoding, the JSON batch and decoding.

/**
 * `GET /api/snowflake/get/{tag}`: Leaf's route (the tag is only a label); the ID as text, or a bare
 * JSON number.
 */
export const LEAF_SNOWFLAKE_ID = defineRoute({
  method: 'GET',
  url: '/api/snowflake/get/:tag',
  access: 'any',
  operationId: 'leafSnowflakeId',
  section: 'leaf',
  summary:
    'One snowflake ID (Leaf-compatible; any method; Leaf ignores the tag, and so does ' +
    'idmint): text/plain, or the ' +
    'bare number as JSON for Accept: application/json',
  params: TagParams,
  response: {
    200: {
      description: 'The ID in decimal.',
      content: {
        'text/plain': { schema: Type.String({ examples: ['117600667735949312'] }) },
        'application/json': {
          schema: Type.Integer({
            description:
              'The same digits: a JSON number, exact only up to 2^53 in JavaScript clients.',
          }),
        },
      },
    },
    ...ERRORS,
  },
});

/** The JSON batch: exactly `count` IDs, as decimal strings, and the worker that made them. */
export const SnowflakeBatch = Type.Object({
  workerId: Type.Integer(),
  ids: Type.Array(Type.String()),
});
export type SnowflakeBatch = Static<typeof SnowflakeBatch>;

/**
 * `GET /v1/snowflake?count=N`: a batch, as JSON or binary. The bound may be the layout's, not only
 * api.maxBatch.
 */
export const SNOWFLAKE_BATCH = defineRoute({
  method: 'GET',
  url: '/v1/snowflake',
  access: 'any',
  operationId: 'snowflakeIds',
  section: 'snowflake',
  summary:
    'A batch of snowflake IDs, strictly increasing: always exactly `count` of them. JSON, ' +
    'or binary for Accept: ' +
    'application/octet-stream',
  querystring: ({ max, bound }: CountBound) =>
    Type.Object({
      count: Type.Optional(
        Type.Integer({
          minimum: 1,
          maximum: max,
          default: 1,
          description: `How many IDs, 1 to ${bound}. ${MORE_IS_REFUSED}`,
        }),
      ),
    }),
  response: {
    200: batchResponse(
      'Exactly `count` IDs, as decimal strings (they exceed 2^53), and the worker that made them',
      SnowflakeBatch,
    ),
    ...ERRORS,
  },
});

/** The parts of a snowflake ID under the server's layout. */
export const DecodedSnowflakeId = Type.Object({
  id: Type.String(),
  layout: Type.String(),
  timestamp: Type.Integer({ description: "Start of the ID's time unit, ms since 1970." }),
  date: Type.String({ format: 'date-time' }),
  datacenterId: Type.Optional(
    Type.Integer({ description: 'Only for layouts with a datacenter field.' }),
  ),
  workerId: Type.Integer(),
  sequence: Type.Integer(),
});
export type DecodedSnowflakeId = Static<typeof DecodedSnowflakeId>;

/** `GET /v1/snowflake/decode/{id}`. */
export const SNOWFLAKE_DECODE = defineRoute({
  method: 'GET',
  url: '/v1/snowflake/decode/:id',
  access: 'any',
  operationId: 'decodeSnowflakeId',
  section: 'snowflake',
  summary: "The parts of a snowflake ID under this server's layout",
  params: Type.Object({ id: SnowflakeIdText }),
  response: { 200: DecodedSnowflakeId, ...ERRORS },
});

/**
 * Leaf's decoding answer: every value a string, in the order Leaf's HashMap writes them, the time
 * in UTC; or Leaf's failure for an ID Java's Long.parseLong refuses (still 200, as in Leaf).
 */
export const LeafDecodedId = Type.Union([
  Type.Object({
    workerId: Type.String(),
    datacenterId: Type.Optional(
      Type.String({ description: 'Only for layouts with a datacenter field.' }),
    ),
    sequenceId: Type.String(),
    timestamp: Type.String({ examples: ['1567733700834(2019-09-06 01:35:00.834)'] }),
  }),
  Type.Object({
    errorMsg: Type.Literal('snowflake Id反解析发生异常!', {
      description: 'The ID is not a Java long (Leaf: "snowflake ID reverse parsing failed").',
    }),
  }),
]);
export type LeafDecodedId = Static<typeof LeafDecodedId>;

/** `/decodeSnowflakeId?snowflakeId=...`: Leaf's decoding route (any method). */
export const LEAF_DECODE = defineRoute({
  method: 'GET',
  url: '/decodeSnowflakeId',
  access: 'any',
  operationId: 'leafDecodeSnowflakeId',
  section: 'leaf',
  summary: "The parts of a snowflake ID, in Leaf's shape (all values strings; time in UTC)",
  // Any text, as Leaf's String parameter (also from a form body; repeated values join with ","):
  // the handler parses it as Java's Long.parseLong.
  querystring: Type.Object({
    snowflakeId: Type.Union([Type.String(), Type.Array(Type.String())], {
      description: 'The ID, decimal as Java parses a long (a sign and leading zeros allowed).',
    }),
  }),
  response: { 200: LeafDecodedId, ...ERRORS },
});
