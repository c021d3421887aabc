import Type, { type Static } from 'typebox';
import { OPAQUE_SNOWFLAKE_DOMAIN } from '../core/opaque.ts';
import { ERRORS, TagInPath, countQuery } from './common.ts';
import { ID_FAMILIES, ID_FAMILY_REGISTRY, type IdFamily, type IdFamilyEntry } from './families.ts';
import { defineRoute } from './route.ts';

// The ID families' routes, decoding any ID, and opaque IDs.

/** Digits of an opaque snowflake ID: its FF1 domain's, with a leading key digit. */
export const OPAQUE_SNOWFLAKE_DIGITS = OPAQUE_SNOWFLAKE_DOMAIN.digits + 1;

/** A batch of IDs of one kind: exactly `count` of them, as strings. */
export function idBatch(example: string) {
  return Type.Object(
    { ids: Type.Array(Type.String({ examples: [example] })) },
    { description: 'Exactly `count` IDs, in the order they were made.' },
  );
}
export type IdBatch = Static<ReturnType<typeof idBatch>>;

/** `GET /v1/<family>?count=N` for a family of the registry. */
function familyRoute(family: IdFamily) {
  const entry: IdFamilyEntry = ID_FAMILY_REGISTRY[family];
  return defineRoute({
    method: 'GET',
    url: `/v1/${family}`,
    access: 'any',
    operationId: entry.operationId,
    section: 'families',
    summary: entry.summary,
    querystring: countQuery,
    response: { 200: idBatch(entry.example), ...ERRORS },
  });
}

/** One route per ID family, in the registry's order. */
export const FAMILY_ROUTES: readonly (ReturnType<typeof familyRoute> & {
  readonly family: IdFamily;
})[] = ID_FAMILIES.map((family) => ({ ...familyRoute(family), family }));

/** The formats `/v1/decode/{id}` tells apart (decimal IDs are decoded as snowflake IDs). */
export const DECODED_FORMATS = ['uuid', 'ulid', 'objectid', 'snowflake'] as const;

/**
 * Every field a decoded ID may have; which ones depends on `format` (docs/formats.md, Decoding).
 */
export const DecodedAnyId = Type.Object(
  {
    format: Type.Enum(DECODED_FORMATS, { type: 'string' }),
    id: Type.String({ description: 'The ID in its canonical form.' }),
    timestamp: Type.Optional(
      Type.Integer({
        description: 'ms since 1970 (ObjectId: its second; snowflake: the start of its time unit).',
      }),
    ),
    date: Type.Optional(Type.String({ format: 'date-time' })),
    version: Type.Optional(Type.Integer({ description: 'UUID: the version field.' })),
    variant: Type.Optional(Type.String({ description: 'UUID: the variant.' })),
    randA: Type.Optional(Type.Integer({ description: 'UUIDv7: the 12-bit rand_a field.' })),
    randB: Type.Optional(
      Type.String({ description: 'UUIDv7: the 62-bit rand_b field, 16 hex digits.' }),
    ),
    counter: Type.Optional(
      Type.Integer({ description: 'UUIDv7 (as idmint lays it out) and ObjectId: the counter.' }),
    ),
    random: Type.Optional(
      Type.String({ description: 'ULID: the 80-bit random part, 20 hex digits.' }),
    ),
    processRandom: Type.Optional(
      Type.String({ description: 'ObjectId: the 5 per-process random bytes, 10 hex digits.' }),
    ),
    layout: Type.Optional(
      Type.String({ description: "Snowflake: the layout it was decoded with (the server's)." }),
    ),
    datacenterId: Type.Optional(
      Type.Integer({ description: 'Snowflake: only for layouts with a datacenter field.' }),
    ),
    workerId: Type.Optional(Type.Integer({ description: 'Snowflake.' })),
    sequence: Type.Optional(Type.Integer({ description: 'Snowflake.' })),
  },
  {
    description:
      "The ID's format and parts. Time fields are absent for UUIDs other than version 7.",
  },
);
export type DecodedAnyId = Static<typeof DecodedAnyId>;

/** `GET /v1/decode/{id}`. */
export const DECODE_ANY = defineRoute({
  method: 'GET',
  url: '/v1/decode/:id',
  access: 'any',
  operationId: 'decodeId',
  section: 'families',
  summary:
    'The format and parts of any ID idmint makes, its format detected by its shape (decimal ' +
    'IDs are decoded as ' +
    "snowflake IDs under the server's layout)",
  params: Type.Object({
    id: Type.String({
      minLength: 1,
      maxLength: 256,
      description:
        'A UUID (36 characters), an ObjectId (24 hex digits), a ULID (26 Crockford base32 ' +
        'characters) or a decimal ' +
        'snowflake ID (up to 19 digits).',
    }),
  }),
  response: { 200: DecodedAnyId, ...ERRORS },
});

/** `GET /v1/opaque/snowflake?count=N`. */
export const OPAQUE_SNOWFLAKE_BATCH = defineRoute({
  method: 'GET',
  url: '/v1/opaque/snowflake',
  access: 'any',
  operationId: 'opaqueSnowflakeIds',
  section: 'opaque',
  summary:
    `Opaque snowflake IDs: snowflake IDs run through FF1 under the server's key, ` +
    `${OPAQUE_SNOWFLAKE_DIGITS}-digit ` +
    `decimal strings that show no time, worker or order`,
  querystring: countQuery,
  response: { 200: idBatch('2041385516793640113853327'), ...ERRORS },
});

/** The snowflake ID behind an opaque one, and its parts. */
export const DecodedOpaqueSnowflakeId = Type.Object({
  id: Type.String({ description: 'The opaque ID, as given.' }),
  dense: Type.String({ description: 'The snowflake ID, in decimal.' }),
  keyId: Type.Integer({ description: 'The key it was made under.' }),
  layout: Type.String(),
  timestamp: Type.Integer(),
  date: Type.String({ format: 'date-time' }),
  datacenterId: Type.Optional(Type.Integer()),
  workerId: Type.Integer(),
  sequence: Type.Integer(),
});
export type DecodedOpaqueSnowflakeId = Static<typeof DecodedOpaqueSnowflakeId>;

/** `GET /v1/opaque/snowflake/{id}` (admin token). */
export const DECODE_OPAQUE_SNOWFLAKE = defineRoute({
  method: 'GET',
  url: '/v1/opaque/snowflake/:id',
  access: 'admin',
  operationId: 'decodeOpaqueSnowflakeId',
  section: 'opaque',
  summary: 'The snowflake ID behind an opaque one, and its parts (admin token)',
  params: Type.Object({
    id: Type.String({
      pattern: `^[1-9][0-9]{${OPAQUE_SNOWFLAKE_DIGITS - 1}}$`,
      description: 'An opaque snowflake ID.',
    }),
  }),
  response: { 200: DecodedOpaqueSnowflakeId, ...ERRORS },
});

/** The dense ID behind an opaque ID of a tag. */
export const DecodedOpaqueSegmentId = Type.Object({
  tag: Type.String(),
  id: Type.String({ description: 'The opaque ID, as given.' }),
  dense: Type.String({ description: 'The dense segment ID, in decimal.' }),
  keyId: Type.Integer({ description: 'The key it was made under.' }),
});
export type DecodedOpaqueSegmentId = Static<typeof DecodedOpaqueSegmentId>;

/** `GET /v1/opaque/segment/{tag}/{id}` (admin token). */
export const DECODE_OPAQUE_SEGMENT = defineRoute({
  method: 'GET',
  url: '/v1/opaque/segment/:tag/:id',
  access: 'admin',
  operationId: 'decodeOpaqueSegmentId',
  section: 'opaque',
  summary:
    "The dense ID behind an opaque ID of a tag, checked against the tag's max_id (admin token)",
  params: Type.Object({
    tag: TagInPath,
    id: Type.String({ pattern: '^[1-8][0-9]{18}$', description: 'An opaque ID of the tag.' }),
  }),
  response: { 200: DecodedOpaqueSegmentId, ...ERRORS },
});
