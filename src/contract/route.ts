import type { Static, TSchema, TUnsafe } from 'typebox';
import { familyTitles } from './families.ts';

/**
 * Who may call a route when auth is on. Every route declares one: the server refuses to start
 * with a route that does not (src/server/plugins/auth.ts), so a forgotten declaration can never
 * ship a route open.
 * - `open`: anyone, with or without a token (health, metrics, the OpenAPI document, the dashboard's
 *   files);
 * - `any`: any valid bearer token (snowflake IDs, decoding, listing tags, which is filtered per
 *   token);
 * - `tag`: a bearer token allowed the route's `{tag}` (segment IDs, reading a tag);
 * - `admin`: the admin token (creating and changing tags, decoding opaque IDs);
 * - `tinyid-token`: TinyId's protocol: the route checks the token TinyId's clients send in its
 *   `token` parameter itself, and answers a bad one in TinyId's shape, not with a 401.
 */
export const ACCESS_LEVELS = ['open', 'any', 'tag', 'admin', 'tinyid-token'] as const;
export type Access = (typeof ACCESS_LEVELS)[number];

/** The access levels that need the bearer token (`Authorization` header) when auth is on. */
export type BearerAccess = Extract<Access, 'any' | 'tag' | 'admin'>;

/** Whether a route with this access needs the bearer token when auth is on. */
export function needsBearer(access: Access): access is BearerAccess {
  return access === 'any' || access === 'tag' || access === 'admin';
}

/** The sections of the OpenAPI document, in order, with what each holds. */
export const SECTIONS = [
  {
    name: 'leaf',
    description: "Meituan Leaf's routes, unchanged: a Leaf client switches by changing the host.",
  },
  {
    name: 'tinyid',
    description:
      "Didi TinyId's routes, in TinyId's formats: a TinyId client switches by changing the host.",
  },
  {
    name: 'segment',
    description:
      'Segment mode: dense, increasing IDs per business tag, in ranges from the segment store.',
  },
  {
    name: 'snowflake',
    description: "Snowflake mode: 64-bit time-ordered IDs from this node's leased worker ID.",
  },
  { name: 'tags', description: 'Business tags of segment mode: list, read, create, change.' },
  {
    name: 'families',
    description: `${familyTitles()} from this server, and decoding of any ID idmint makes.`,
  },
  {
    name: 'opaque',
    description:
      "Opaque IDs (FF1 under the server's keys): opaque snowflake IDs, and decoding opaque " +
      'IDs with the admin ' +
      'token.',
  },
  {
    name: 'operations',
    description:
      'Health, readiness and metrics, for probes and scrapers; open even when auth is on.',
  },
] as const;
export type Section = (typeof SECTIONS)[number]['name'];

/**
 * The bound a server puts on a route's `count` or `size` (api.maxBatch, or less where a snowflake
 * layout issues fewer in a batch window), which the documented query states. `bound` says what
 * sets it, for the description: "10000 (api.maxBatch)".
 */
export interface CountBound {
  readonly max: number;
  readonly bound: string;
}

/**
 * One route of the HTTP API: where it is, who may call it, and its schemas. The server registers
 * routes from these (src/server/routes/), so the OpenAPI document is built from them; the client
 * and the dashboard take their types from the same schemas (the `Static` of each).
 *
 * `params` and `querystring` document what the route checks by hand (src/server/input.ts: a
 * regex on the hot path, and messages that say what is allowed); `body` is validated by Fastify;
 * `response` serializes the JSON answers (fast-json-stringify writes exactly the properties the
 * schema names, in its order) and documents every answer.
 */
export interface RouteContract {
  /** The method the OpenAPI document shows (Leaf's and TinyId's routes answer others beside it). */
  readonly method: 'GET' | 'POST' | 'PATCH';
  /** Fastify's path, with `:name` parameters. */
  readonly url: string;
  readonly access: Access;
  readonly operationId: string;
  readonly summary: string;
  readonly section: Section;
  readonly params?: TSchema;
  /** A schema, or one made for the server's bound on `count` or `size`. */
  readonly querystring?: TSchema | ((bound: CountBound) => TSchema);
  readonly body?: TSchema;
  readonly response: Readonly<Record<string, unknown>>;
}

/** Checks a route's contract and keeps its literal types, for the types derived from it. */
export function defineRoute<const C extends RouteContract>(contract: C): C {
  return contract;
}

/** A TypeBox schema (not an OpenAPI answer with `content` per media type). */
type Schema = TSchema & ({ readonly '~kind': string } | TUnsafe);

/** The query schema of a route, whether fixed or made for a bound. */
type QuerySchemaOf<C extends RouteContract> = C['querystring'] extends (
  bound: CountBound,
) => infer S
  ? S
  : C['querystring'];

/**
 * A query string as it reaches the handler, before the route's own check: each documented name,
 * absent, once (a string) or repeated (a list). Not the schema's `Static`: the schema documents
 * the check, Fastify does not coerce or validate the query.
 */
export type RawQuery<S> = S extends Schema
  ? { readonly [K in keyof Static<S>]?: string | string[] }
  : unknown;

/**
 * A value read-only all the way down: what a handler answers may be arrays it keeps (the status
 * sampler's rates), which the answer only reads.
 */
export type ReadonlyDeep<T> = T extends readonly (infer E)[]
  ? readonly ReadonlyDeep<E>[]
  : T extends object
    ? { readonly [K in keyof T]: ReadonlyDeep<T[K]> }
    : T;

/**
 * The JSON answer of a route's success (200 or 201), where the route answers a schema's object,
 * as the handler may hold it: read-only (see ReadonlyDeep).
 */
export type AnswerOf<C extends RouteContract> = C['response'] extends {
  readonly 200: infer S extends Schema;
}
  ? ReadonlyDeep<Static<S>>
  : C['response'] extends { readonly 201: infer S extends Schema }
    ? ReadonlyDeep<Static<S>>
    : unknown;

/**
 * Fastify's route generics for a contract: path parameters and body as their schemas say, the
 * query as it arrives, and the answer the handler must return or send (a compile error when it
 * strays from the schema). A route that writes its JSON answer itself, as prebuilt text or bytes
 * for speed, names what it sends as `Answer` (its tests check the text against the schema).
 */
export interface RouteTypes<C extends RouteContract, Answer = AnswerOf<C>> {
  Params: C['params'] extends Schema ? Static<C['params']> : unknown;
  Querystring: RawQuery<QuerySchemaOf<C>>;
  Body: C['body'] extends Schema ? Static<C['body']> : unknown;
  Reply: Answer;
}
