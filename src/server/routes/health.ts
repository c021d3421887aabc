import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { LIVENESS, METRICS, READINESS } from '../../contract/operations.ts';
import { scrapeChunks } from '../plugins/scrape.ts';
import { contractRoute } from './from-contract.ts';

/** One readiness check: its name and whether it passes now, with a word on why not. */
export interface ReadinessCheck {
  readonly name: string;
  check(): { readonly ok: boolean; readonly detail?: string };
}

/**
 * HEAD is answered as GET without the body (Fastify's HEAD route), and documented: probes and
 * monitors use it. The ID routes take no HEAD, which would draw an ID and throw it away.
 */
const WITH_HEAD = { exposeHead: true } as const;

/**
 * `/healthz` (the process answers), `/readyz` (send traffic here: every check passes) and
 * `/metrics`. None needs a token: probes and scrapers have none, and no ID leaves here (metrics
 * carry tag names: keep the port to your network).
 */
export function healthRoutes(
  app: FastifyInstance,
  checks: readonly ReadinessCheck[],
  metrics: Registry | undefined,
): void {
  contractRoute(app, LIVENESS, WITH_HEAD).handle((_request, reply) => {
    reply.send({ status: 'ok' });
  });

  contractRoute(app, READINESS, WITH_HEAD).handle((_request, reply) => {
    const results: Record<string, string> = {};
    let ready = true;
    for (const { name, check } of checks) {
      const result = check();
      results[name] = result.ok ? 'ok' : (result.detail ?? 'failing');
      ready &&= result.ok;
    }
    reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks: results });
  });

  if (metrics !== undefined) {
    contractRoute<typeof METRICS, Readable>(app, METRICS).handle((_request, reply) => {
      // Streamed as it is made (see scrapeChunks); a failure part way ends the answer early,
      // which Prometheus counts as a failed scrape, as it would a 500.
      reply
        .type(metrics.contentType)
        .send(Readable.from(scrapeChunks(metrics), { objectMode: false }));
    });
  }
}
