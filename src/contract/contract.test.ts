import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import Type from 'typebox';
import type { IdFamilyName } from '../client/client.ts';
import { contractRoute } from '../server/routes/from-contract.ts';
import { Nullable, Ref } from './common.ts';
import { ALL_ROUTES as CONTRACTS } from './all-routes.ts';
import { ID_FAMILIES, ID_FAMILY_REGISTRY, familyTitles, type IdFamily } from './families.ts';
import * as ids from './ids.ts';
import { ACCESS_LEVELS, SECTIONS, defineRoute } from './route.ts';
import * as segment from './segment.ts';
import * as snowflake from './snowflake.ts';
import * as tags from './tags.ts';

describe('the HTTP contract', () => {
  it('names each route once: one operationId, method and URL, access and section', () => {
    assert.ok(CONTRACTS.length >= 25, `${CONTRACTS.length} contracts`);
    const operationIds = CONTRACTS.map((contract) => contract.operationId);
    assert.deepEqual(
      operationIds.filter((id, i) => operationIds.indexOf(id) !== i),
      [],
      'duplicate operationIds',
    );
    const routes = CONTRACTS.map((contract) => `${contract.method} ${contract.url}`);
    assert.deepEqual(
      routes.filter((route, i) => routes.indexOf(route) !== i),
      [],
      'duplicate routes',
    );
    for (const contract of CONTRACTS) {
      assert.ok((ACCESS_LEVELS as readonly string[]).includes(contract.access), contract.url);
      assert.ok(
        SECTIONS.some((section) => section.name === contract.section),
        contract.url,
      );
    }
  });

  it('derives each family route and its texts from the one registry', () => {
    assert.deepEqual(ID_FAMILIES, Object.keys(ID_FAMILY_REGISTRY));
    assert.deepEqual(
      ids.FAMILY_ROUTES.map((route) => [route.family, route.url, route.operationId, route.summary]),
      ID_FAMILIES.map((family) => {
        const { operationId, summary } = ID_FAMILY_REGISTRY[family];
        return [family, `/v1/${family}`, operationId, summary];
      }),
    );
    assert.equal(familyTitles(), 'UUIDv7, UUIDv4, ULID and ObjectId');
    const families = SECTIONS.find((section) => section.name === 'families');
    assert.match(families?.description ?? '', /^UUIDv7, UUIDv4, ULID and ObjectId from/);
  });

  it('writes T | null as a type list and a shared schema as its $ref', () => {
    const json = (schema: unknown) => JSON.parse(JSON.stringify(schema)) as unknown;
    const time = Nullable(Type.String({ format: 'date-time' }));
    assert.deepEqual(json(time), { type: ['string', 'null'], format: 'date-time' });
    assert.deepEqual(json(Ref(tags.Tag, { description: 'The tag.' })), {
      description: 'The tag.',
      $ref: 'Tag#',
    });
    assert.throws(() => Ref(Type.String()), /needs a schema with an \$id/);
  });
});

/**
 * Type-level checks, run by the type check (`npm run typecheck`), never called: each
 * `@ts-expect-error` line must fail to compile, and an expected error that goes away (a contract
 * that stopped typing its handlers) fails the type check as an unused directive.
 */
export function typeChecks(app: FastifyInstance): void {
  const bound = { bound: { max: 1, bound: '1' } };
  // A handler's answer is its schema's: a missing field does not compile.
  // @ts-expect-error start, end, last, stride and size are missing
  contractRoute(app, segment.SEGMENT_RANGE, bound).handle(async () => ({ tag: 'order' }));
  // Path parameters are the schema's names.
  contractRoute(app, tags.GET_TAG).handle(async (request) => {
    // @ts-expect-error GET_TAG's only parameter is tag
    void request.params.name;
    return {
      tag: request.params.tag,
      maxId: '1',
      step: 1,
      description: null,
      updatedAt: null,
      opaque: false,
      delta: 1,
      remainder: 0,
    };
  });
  // The query is text as it arrives, not the documented integer.
  contractRoute<typeof snowflake.SNOWFLAKE_BATCH, string>(
    app,
    snowflake.SNOWFLAKE_BATCH,
    bound,
  ).handle((request) => {
    // @ts-expect-error count is string | string[] | undefined until the route's own check
    const count: number | undefined = request.query.count;
    return String(count);
  });
  // A body Fastify validated has the schema's types.
  contractRoute(app, tags.CREATE_TAG).handle(async (request) => {
    // @ts-expect-error step is a number
    const step: string = request.body.step;
    return {
      tag: step,
      maxId: '1',
      step: 1,
      description: null,
      updatedAt: null,
      opaque: false,
      delta: 1,
      remainder: 0,
    };
  });
  // A route must say who may call it, with a known access.
  const route = {
    method: 'GET',
    url: '/x',
    operationId: 'x',
    summary: 'x',
    section: 'operations',
    response: {},
  } as const;
  // @ts-expect-error access is missing
  defineRoute(route);
  // @ts-expect-error 'anyone' is no access
  defineRoute({ ...route, access: 'anyone' });
  defineRoute({ ...route, access: 'open' });
  // The families are the registry's, and the client's name for them is the same type.
  // @ts-expect-error ksuid is not in the registry
  const ksuid: IdFamily = 'ksuid';
  const sameFamilies: [IdFamilyName, IdFamily] = ['uuid7', 'objectid'] satisfies [
    IdFamily,
    IdFamilyName,
  ];
  void [ksuid, sameFamilies];
}
