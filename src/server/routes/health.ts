import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { scrapeChunks } from '../plugins/scrape.ts';

/** One readiness check: its name and whether it passes now, with a word on why not. */
export interface ReadinessCheck {
  readonly name: string;
  check(): { readonly ok: boolean; readonly detail?: string };
}

/**
 * The error answers an operations route can give: it takes no input, so only a malformed request
 * (a body that is not JSON, for instance) draws one.
 */
const MALFORMED = { '4XX': { description: 'Malformed request (400, 415).', $ref: 'Error#' } } as const;

/**
 * HEAD is answered as GET without the body (Fastify's HEAD route), and documented: probes and
 * monitors use it. The ID routes take no HEAD, which would draw an ID and throw it away.
 */
const WITH_HEAD = { exposeHeadRoute: true, config: { swagger: { exposeHeadRoute: true } } } as const;

/**
 * `/healthz` (the process answers), `/readyz` (send traffic here: every check passes) and
 * `/metrics`. None needs a token: probes and scrapers have none, and no ID leaves here (metrics
 * carry tag names: keep the port to your network).
 */
export function healthRoutes(app: FastifyInstance, checks: readonly ReadinessCheck[], metrics: Registry | undefined): void {
  app.get(
    '/healthz',
    {
      ...WITH_HEAD,
      schema: {
        operationId: 'liveness',
        summary: 'Liveness: the process is up and answering',
        tags: ['operations'],
        response: {
          200: {
            description: 'The process answers.',
            type: 'object',
            required: ['status'],
            properties: { status: { type: 'string', enum: ['ok'] } },
          },
          ...MALFORMED,
        },
      },
    },
    (_request, reply) => {
      reply.send({ status: 'ok' });
    },
  );

  app.get(
    '/readyz',
    {
      ...WITH_HEAD,
      schema: {
        operationId: 'readiness',
        summary: 'Readiness: 200 when every check passes, 503 otherwise (and while shutting down)',
        tags: ['operations'],
        response: {
          200: { description: 'Every check passes: send traffic here.', $ref: 'Readiness#' },
          ...MALFORMED,
          503: { description: 'A check fails, or the server is shutting down: send traffic elsewhere.', $ref: 'Readiness#' },
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
    app.get(
      '/metrics',
      {
        schema: {
          operationId: 'metrics',
          summary: 'Prometheus metrics (text exposition format)',
          tags: ['operations'],
          response: {
            200: {
              description: 'Prometheus text exposition format 0.0.4; docs/operations.md lists the metrics.',
              content: { 'text/plain': { schema: { type: 'string', examples: ['idmint_ids_issued_total{mode="snowflake",tag=""} 1042\n'] } } },
            },
            ...MALFORMED,
          },
        },
      },
      (_request, reply) => {
        // Streamed as it is made (see scrapeChunks); a failure part way ends the answer early,
        // which Prometheus counts as a failed scrape, as it would a 500.
        return reply.type(metrics.contentType).send(Readable.from(scrapeChunks(metrics), { objectMode: false }));
      },
    );
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
