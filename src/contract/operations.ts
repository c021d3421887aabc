import Type, { type Static } from 'typebox';
import { MALFORMED, Ref, textContent } from './common.ts';
import { defineRoute } from './route.ts';

// The operations routes: liveness, readiness and metrics, for probes and scrapers. Open: probes
// and scrapers have no token, and no ID leaves here.

/** `GET /healthz`. */
export const LIVENESS = defineRoute({
  method: 'GET',
  url: '/healthz',
  access: 'open',
  operationId: 'liveness',
  section: 'operations',
  summary: 'Liveness: the process is up and answering',
  response: {
    200: Type.Object(
      { status: Type.Enum(['ok'], { type: 'string' }) },
      { description: 'The process answers.' },
    ),
    ...MALFORMED,
  },
});

/** The `/readyz` answer: ready or not, and each check's state. */
export const Readiness = Type.Object(
  {
    status: Type.Enum(['ready', 'not ready'], { type: 'string' }),
    // A map of check name to state; written out, as TypeBox's Record would make it a
    // patternProperties.
    checks: Type.Unsafe<Record<string, string>>({
      type: 'object',
      additionalProperties: Type.String(),
      description: '"ok", or why the check fails.',
    }),
  },
  { $id: 'Readiness' },
);
export type Readiness = Static<typeof Readiness>;

/** `GET /readyz`: 200 ready, 503 not. */
export const READINESS = defineRoute({
  method: 'GET',
  url: '/readyz',
  access: 'open',
  operationId: 'readiness',
  section: 'operations',
  summary: 'Readiness: 200 when every check passes, 503 otherwise (and while shutting down)',
  response: {
    200: Ref(Readiness, { description: 'Every check passes: send traffic here.' }),
    ...MALFORMED,
    503: Ref(Readiness, {
      description: 'A check fails, or the server is shutting down: send traffic elsewhere.',
    }),
  },
});

/** `GET /metrics` (only when metrics are on). */
export const METRICS = defineRoute({
  method: 'GET',
  url: '/metrics',
  access: 'open',
  operationId: 'metrics',
  section: 'operations',
  summary: 'Prometheus metrics (text exposition format)',
  response: {
    200: {
      description: 'Prometheus text exposition format 0.0.4; docs/operations.md lists the metrics.',
      content: textContent('idmint_ids_issued_total{mode="snowflake",tag=""} 1042\n'),
    },
    ...MALFORMED,
  },
});
