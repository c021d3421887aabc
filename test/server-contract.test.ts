import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TSchema } from 'typebox';
import Value from 'typebox/value';
import { ALL_ROUTES } from '../src/contract/all-routes.ts';
import { ErrorAnswer } from '../src/contract/common.ts';
import * as ids from '../src/contract/ids.ts';
import * as operations from '../src/contract/operations.ts';
import type { RouteContract } from '../src/contract/route.ts';
import * as segment from '../src/contract/segment.ts';
import * as snowflake from '../src/contract/snowflake.ts';
import * as status from '../src/contract/status.ts';
import * as tags from '../src/contract/tags.ts';
import * as tinyid from '../src/contract/tinyid.ts';
import { testServer } from './support/server.ts';

// Every JSON answer matches its route's contract: the schema that documents it in the OpenAPI
// document and types the client and the dashboard. This matters most for the answers written by
// hand for speed (batches, TinyId's), which no serializer holds to the schema; the others are
// checked too, so a schema and its handler cannot part. No field may be left undocumented.

const K1 = '2b7e151628aed2a6abf7158809cf4f3c';

/** The schemas answers refer to by `$ref`, by the name they are referred to. */
const SHARED = {
  'Tag#': tags.Tag,
  'TagStatus#': status.TagStatus,
  'Readiness#': operations.Readiness,
  'Error#': ErrorAnswer,
};

/** The JSON schema of a contract's answer with `status`, if that answer can be JSON. */
function jsonSchemaOf(contract: RouteContract, code: number): TSchema | undefined {
  const answer = contract.response[code] as
    | (TSchema & { content?: Record<string, { schema: TSchema }> })
    | undefined;
  if (answer === undefined) return undefined;
  return answer.content === undefined ? answer : answer.content['application/json']?.schema;
}

/** Fields of `value` its schema does not name, as paths (objects that name their properties). */
function undocumented(schema: TSchema, value: unknown, path = '$'): string[] {
  const s = schema as {
    $ref?: string;
    properties?: Record<string, TSchema>;
    items?: TSchema;
    anyOf?: TSchema[];
  };
  if (s.$ref !== undefined) return undocumented(SHARED[s.$ref as keyof typeof SHARED], value, path);
  if (Array.isArray(value)) {
    const items = s.items;
    return items === undefined
      ? []
      : value.flatMap((item, i) => undocumented(items, item, `${path}[${i}]`));
  }
  if (value === null || typeof value !== 'object' || s.properties === undefined) return [];
  const properties = s.properties;
  return Object.entries(value).flatMap(([key, field]) =>
    properties[key] === undefined
      ? [`${path}.${key}`]
      : undocumented(properties[key], field, `${path}.${key}`),
  );
}

describe('every JSON answer matches its contract', () => {
  it('on every route with a JSON answer, the hand-written ones included', async () => {
    const server = await testServer({ opaque: { keys: `1:${K1}` } });
    const checked = new Set<string>();
    type Request = { method?: string; url: string; payload?: object; accept?: string };
    const check = async (contract: RouteContract, request: Request, code = 200) => {
      const response = await server.app.inject({
        method: (request.method ?? 'GET') as 'GET',
        url: request.url,
        ...(request.payload === undefined ? {} : { payload: request.payload }),
        ...(request.accept === undefined ? {} : { headers: { accept: request.accept } }),
      });
      assert.equal(response.statusCode, code, `${request.url}: ${response.body}`);
      const schema = jsonSchemaOf(contract, code);
      assert.ok(
        schema !== undefined,
        `${contract.operationId} documents a JSON answer for ${code}`,
      );
      const body: unknown = JSON.parse(response.body);
      const errors = [...Value.Errors(SHARED, schema, body)].map(
        (error) => `${error.instancePath} ${error.message}`,
      );
      assert.deepEqual(
        errors,
        [],
        `${request.url} answers as ${contract.operationId}'s schema says: ${response.body}`,
      );
      const extra = undocumented(schema, body);
      assert.deepEqual(
        extra,
        [],
        `${request.url}: fields ${contract.operationId}'s schema does not name`,
      );
      checked.add(contract.operationId);
      return body;
    };
    try {
      const create = (payload: object) => ({ method: 'POST', url: '/v1/tags', payload });
      await check(tags.CREATE_TAG, create({ tag: 'order', step: 10, description: 'orders' }), 201);
      await check(tags.CREATE_TAG, create({ tag: 'secret', step: 10, opaque: true }), 201);
      await check(tags.UPDATE_TAG, {
        method: 'PATCH',
        url: '/v1/tags/order',
        payload: { step: 20 },
      });
      await check(tags.GET_TAG, { url: '/v1/tags/order' });
      await check(tags.LIST_TAGS, { url: '/v1/tags' });
      await check(segment.LEAF_SEGMENT_ID, {
        url: '/api/segment/get/order',
        accept: 'application/json',
      });
      await check(segment.SEGMENT_BATCH, { url: '/v1/segment/order?count=3' });
      await check(segment.SEGMENT_BATCH, { url: '/v1/segment/secret?count=3' });
      await check(segment.SEGMENT_RANGE, { url: '/v1/segment/order/range?size=5' });
      const batch = (await check(snowflake.SNOWFLAKE_BATCH, { url: '/v1/snowflake?count=3' })) as {
        ids: string[];
      };
      const id = batch.ids[0] ?? '';
      await check(snowflake.LEAF_SNOWFLAKE_ID, {
        url: '/api/snowflake/get/any',
        accept: 'application/json',
      });
      await check(snowflake.SNOWFLAKE_DECODE, { url: `/v1/snowflake/decode/${id}` });
      await check(snowflake.LEAF_DECODE, { url: `/decodeSnowflakeId?snowflakeId=${id}` });
      await check(ids.DECODE_ANY, { url: `/v1/decode/${id}` });
      for (const route of ids.FAMILY_ROUTES) {
        const family = (await check(route, { url: `${route.url}?count=3` })) as { ids: string[] };
        await check(ids.DECODE_ANY, { url: `/v1/decode/${family.ids[0] ?? ''}` });
      }
      const opaque = (await check(ids.OPAQUE_SNOWFLAKE_BATCH, {
        url: '/v1/opaque/snowflake?count=2',
      })) as ids.IdBatch;
      await check(ids.DECODE_OPAQUE_SNOWFLAKE, {
        url: `/v1/opaque/snowflake/${opaque.ids[0] ?? ''}`,
      });
      const secret = (await server.app.inject('/api/segment/get/secret')).body;
      await check(ids.DECODE_OPAQUE_SEGMENT, { url: `/v1/opaque/segment/secret/${secret}` });
      await check(status.STATUS, { url: '/v1/status' });
      await check(status.STATUS, { url: '/v1/status?tags=in-use&sort=fill&order=desc' });
      await check(operations.LIVENESS, { url: '/healthz' });
      await check(operations.READINESS, { url: '/readyz' });
      await check(tinyid.TINYID_NEXT_ID, { url: '/tinyid/id/nextId?bizType=order&batchSize=3' });
      await check(tinyid.TINYID_NEXT_ID, { url: '/tinyid/id/nextId?bizType=nope' });
      await check(tinyid.TINYID_NEXT_SEGMENT_ID, { url: '/tinyid/id/nextSegmentId?bizType=order' });
      // Every contract with a JSON answer was checked: a new route is added above on purpose.
      const json = ALL_ROUTES.filter((route) =>
        [200, 201].some((code) => jsonSchemaOf(route, code) !== undefined),
      );
      assert.deepEqual(
        json.map((route) => route.operationId).filter((operationId) => !checked.has(operationId)),
        [],
      );
    } finally {
      await server.close();
    }
  });

  it('catches an answer that strays: a wrong type, a missing field, an undocumented one', () => {
    const schema = jsonSchemaOf(segment.SEGMENT_RANGE, 200) as TSchema;
    const good = { tag: 'order', start: '1', end: '6', last: '5', stride: 1, size: 5 };
    assert.equal(Value.Check(SHARED, schema, good), true);
    assert.equal(Value.Check(SHARED, schema, { ...good, stride: '1' }), false);
    const { size: _size, ...missing } = good;
    assert.equal(Value.Check(SHARED, schema, missing), false);
    assert.deepEqual(undocumented(schema, { ...good, extra: true }), ['$.extra']);
  });
});
