import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

/** One readiness check: its name and whether it passes now, with a word on why not. */
export interface ReadinessCheck {
  readonly name: string;
  check(): { readonly ok: boolean; readonly detail?: string };
}

/**
 * `/healthz` (the process answers), `/readyz` (send traffic here: every check passes) and
 * `/metrics`. None needs a token: probes and scrapers have none, and no ID leaves here (metrics
 * carry tag names: keep the port to your network).
 */
export function healthRoutes(app: FastifyInstance, checks: readonly ReadinessCheck[], metrics: Registry | undefined): void {
  app.get('/healthz', { schema: { summary: 'Liveness: the process is up and answering', tags: ['operations'] } }, (_request, reply) => {
    reply.send({ status: 'ok' });
  });

  app.get(
    '/readyz',
    {
      schema: {
        summary: 'Readiness: 200 when every check passes, 503 otherwise (and while shutting down)',
        tags: ['operations'],
        response: {
          '2XX': { $ref: 'Readiness#' },
          '5XX': { $ref: 'Readiness#' },
        },
      },
    },
    (_request, reply) => {
      const results: Record<string, string> = {};
      let ready = true;
      for (const { name, check } of checks) {
        const result = check();
        results[name] = result.ok ? 'ok' : (result.detail ?? 'failing');
        ready &&= result.ok;
      }
      reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks: results });
    },
  );

  if (metrics !== undefined) {
    app.get('/metrics', { schema: { summary: 'Prometheus metrics (text exposition format)', tags: ['operations'] } }, async (_request, reply) => {
      const text = await metrics.metrics();
      reply.type(metrics.contentType).send(text);
    });
  }
}

/** JSON schema of the `/readyz` answer. */
export const READINESS_SCHEMA = {
  $id: 'Readiness',
  type: 'object',
  required: ['status', 'checks'],
  properties: {
    status: { type: 'string', enum: ['ready', 'not ready'] },
    checks: { type: 'object', additionalProperties: { type: 'string' }, description: '"ok", or why the check fails.' },
  },
} as const;
