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
        message: { type: 'string', description: 'What went wrong, for humans.' },
      },
    },
  },
} as const;

/**
 * Registers @fastify/swagger so the OpenAPI 3.1 document is built from the routes themselves (it
 * cannot drift from them) and serves it at `/openapi.json`. Must be awaited before routes are added.
 */
export async function installOpenApi(app: FastifyInstance, version: string, authEnabled: boolean): Promise<void> {
  app.addSchema(ERROR_SCHEMA);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'idmint',
        version,
        description: 'Unique IDs: segment mode (dense per-tag ranges) and snowflake mode (64-bit, time-ordered). IDs are decimal strings in JSON.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json['$id'] ?? `def-${i}`) },
    transform: ({ schema, url, route }) => {
      const docs = route.config?.docs;
      const access = route.config?.access;
      const merged: FastifySchema & { security?: unknown } = { ...schema, ...docs };
      if (authEnabled && access !== undefined) merged.security = [{ bearer: [] }];
      return { schema: merged, url };
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, (_request, reply) => {
    reply.send(app.swagger());
  });
}
