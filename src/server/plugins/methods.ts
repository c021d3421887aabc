import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { IdMintError } from '../../core/errors.ts';
import { clip } from '../input.ts';
import { sendError } from './errors.ts';

/** Marks the routes this plugin adds, so it does not collect its own. */
declare module 'fastify' {
  interface FastifyContextConfig {
    methodNotAllowed?: true;
  }
}

/**
 * 405 Method Not Allowed, with `Allow`, for a known path asked with a method it does not take
 * (RFC 9110 15.5.6), instead of the 404 a router gives. Call before the routes are registered
 * (it watches them being added), then call the returned `install()` after the last one: every
 * path gets a hidden route for the methods Fastify knows that the path lacks. Using Fastify's own
 * router keeps the match exact (parameters, trailing slashes, parameter length) and costs the
 * routes that exist nothing; metrics count the 405s under the path's route label.
 */
export function methodNotAllowed(app: FastifyInstance): { install(): void } {
  const methodsByUrl = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    if (route.config?.methodNotAllowed === true) return;
    const methods = methodsByUrl.get(route.url) ?? new Set<string>();
    for (const method of [route.method].flat()) methods.add(method);
    methodsByUrl.set(route.url, methods);
  });
  return {
    install() {
      for (const [url, methods] of methodsByUrl) {
        const allow = [...methods].sort().join(', ');
        const others = app.supportedMethods.filter((method) => !methods.has(method));
        if (others.length === 0) continue;
        const refuse = (request: FastifyRequest, reply: FastifyReply): void => {
          reply.header('allow', allow);
          const path = clip(request.url.split('?')[0] ?? '');
          sendError(
            reply,
            new IdMintError(
              'METHOD_NOT_ALLOWED',
              `${request.method} is not allowed on ${path}; it takes ${allow}`,
            ),
          );
        };
        app.route({
          method: others,
          url,
          // Open: a 405 says only which methods the path takes, and comes before any auth.
          config: { access: 'open', methodNotAllowed: true },
          schema: { hide: true },
          // Answered before the body is parsed: a POST to /healthz is a 405 whatever its body.
          onRequest: (request, reply) => refuse(request, reply),
          handler: refuse,
        });
      }
    },
  };
}
