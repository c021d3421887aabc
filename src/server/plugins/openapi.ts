import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifySchema } from 'fastify';
import type { TSchema } from 'typebox';
import { ErrorAnswer } from '../../contract/common.ts';
import { SECTIONS, needsBearer } from '../../contract/route.ts';

/**
 * Path parameters and query strings of a route, for the OpenAPI document only (see input.ts and
 * src/contract/).
 */
export interface RouteDocs {
  readonly params?: TSchema;
  readonly querystring?: TSchema;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Documentation of the parts the route checks by hand; merged into its OpenAPI entry. */
    docs?: RouteDocs;
  }
}

/** What the package says about itself, for the document's `info`. */
export interface ApiInfo {
  readonly version: string;
  /** SPDX identifier of the license (package.json `license`). */
  readonly license: string;
}

/**
 * Registers @fastify/swagger so the OpenAPI 3.1 document is built from the routes themselves,
 * which are built from their contracts (src/contract/), and serves it at `/openapi.json`. Must
 * be awaited before routes are added.
 *
 * Security is declared only when auth is on: then routes whose access needs the bearer token say
 * so and the others say `security: []` (open, or TinyId's routes, which take the token as a
 * parameter); with auth off every route says `security: []` and no scheme is declared.
 */
export async function installOpenApi(
  app: FastifyInstance,
  info: ApiInfo,
  authEnabled: boolean,
): Promise<void> {
  app.addSchema(ErrorAnswer);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'idmint',
        version: info.version,
        description:
          'Unique IDs: segment mode (dense per-tag ranges) and snowflake mode (64-bit, ' +
          'time-ordered). IDs are decimal strings in JSON.',
        license: { name: info.license, identifier: info.license },
      },
      // Relative to where the document is served: the server that serves it.
      servers: [{ url: '/', description: 'The server this document was read from.' }],
      tags: [...SECTIONS],
      components: authEnabled
        ? {
            securitySchemes: {
              bearer: {
                type: 'http',
                scheme: 'bearer',
                description: 'A token from auth.tokens or auth.adminToken.',
              },
            },
          }
        : {},
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => String(json['$id'] ?? `def-${i}`),
    },
    transform: ({ schema, url, route }) => {
      const docs = route.config?.docs;
      const access = route.config?.access;
      const merged: FastifySchema & { security?: unknown } = { ...schema, ...docs };
      merged.security =
        authEnabled && access !== undefined && needsBearer(access) ? [{ bearer: [] }] : [];
      return { schema: merged, url };
    },
  });
  app.get(
    '/openapi.json',
    { config: { access: 'open' }, schema: { hide: true } },
    (_request, reply) => {
      reply.send(app.swagger());
    },
  );
}
