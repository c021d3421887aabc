import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifySchema } from 'fastify';

/** Path parameters and query strings of a route, for the OpenAPI document only (see input.ts). */
export interface RouteDocs {
  readonly params?: Record<string, unknown>;
  readonly querystring?: Record<string, unknown>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Documentation of the parts the route checks by hand; merged into its OpenAPI entry. */
    docs?: RouteDocs;
  }
}

/** JSON schema of every error body. */
export const ERROR_SCHEMA = {
  $id: 'Error',
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', description: 'Stable error code; see docs/errors.md.', examples: ['TAG_NOT_FOUND'] },
        message: { type: 'string', description: 'What went wrong, for humans. For a 5xx, a fixed sentence and the request id; the server log has the details.' },
      },
    },
  },
} as const;

/** What the package says about itself, for the document's `info`. */
export interface ApiInfo {
  readonly version: string;
  /** SPDX identifier of the license (package.json `license`). */
  readonly license: string;
}

/** The sections of the document, in order, with what each holds. */
const TAGS = [
  { name: 'leaf', description: "Meituan Leaf's routes, unchanged: a Leaf client switches by changing the host." },
  { name: 'tinyid', description: "Didi TinyId's routes, in TinyId's formats: a TinyId client switches by changing the host." },
  { name: 'segment', description: 'Segment mode: dense, increasing IDs per business tag, in ranges from the segment store.' },
  { name: 'snowflake', description: 'Snowflake mode: 64-bit time-ordered IDs from this node\'s leased worker ID.' },
  { name: 'tags', description: 'Business tags of segment mode: list, read, create, change.' },
  { name: 'families', description: 'UUIDv7, UUIDv4, ULID and ObjectId from this server, and decoding of any ID idmint makes.' },
  { name: 'opaque', description: 'Opaque IDs (FF1 under the server\'s keys): opaque snowflake IDs, and decoding opaque IDs with the admin token.' },
  { name: 'operations', description: 'Health, readiness and metrics, for probes and scrapers; open even when auth is on.' },
] as const;

/**
 * operationIds of the routes whose schema does not set one (the segment and snowflake routes),
 * by "METHOD url". A route without either is a lint error (the OpenAPI test runs the linter).
 */
const OPERATION_IDS: Readonly<Record<string, string>> = {
  'GET /api/segment/get/:tag': 'leafSegmentId',
  'GET /api/snowflake/get/:tag': 'leafSnowflakeId',
  'GET /decodeSnowflakeId': 'leafDecodeSnowflakeId',
  'GET /v1/segment/:tag': 'segmentIds',
  'GET /v1/snowflake': 'snowflakeIds',
  'GET /v1/snowflake/decode/:id': 'decodeSnowflakeId',
};

/**
 * Registers @fastify/swagger so the OpenAPI 3.1 document is built from the routes themselves (it
 * cannot drift from them) and serves it at `/openapi.json`. Must be awaited before routes are added.
 *
 * Security is declared only when auth is on: then routes with an `access` need the bearer token
 * and the others say `security: []` (open); with auth off every route says `security: []` and no
 * scheme is declared.
 */
export async function installOpenApi(app: FastifyInstance, info: ApiInfo, authEnabled: boolean): Promise<void> {
  app.addSchema(ERROR_SCHEMA);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'idmint',
        version: info.version,
        description: 'Unique IDs: segment mode (dense per-tag ranges) and snowflake mode (64-bit, time-ordered). IDs are decimal strings in JSON.',
        license: { name: info.license, identifier: info.license },
      },
      // Relative to where the document is served: the server that serves it.
      servers: [{ url: '/', description: 'The server this document was read from.' }],
      tags: [...TAGS],
      components: authEnabled ? { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'A token from auth.tokens or auth.adminToken.' } } } : {},
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json['$id'] ?? `def-${i}`) },
    transform: ({ schema, url, route }) => {
      const docs = route.config?.docs;
      const access = route.config?.access;
      const merged: FastifySchema & { security?: unknown; operationId?: string } = { ...schema, ...docs };
      merged.security = authEnabled && access !== undefined ? [{ bearer: [] }] : [];
      const operationId = merged.operationId ?? OPERATION_IDS[`${[route.method].flat().join(',')} ${url}`];
      if (operationId !== undefined) merged.operationId = operationId;
      return { schema: merged, url };
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, (_request, reply) => {
    reply.send(app.swagger());
  });
}
