import type { FastifyInstance, FastifyReply } from 'fastify';
import { OCTET_TYPE } from '../../contract/common.ts';
import type { CountBound } from '../../contract/route.ts';
import {
  LEAF_DECODE,
  LEAF_SNOWFLAKE_ID,
  SNOWFLAKE_BATCH,
  SNOWFLAKE_DECODE,
} from '../../contract/snowflake.ts';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { decomposeId, type Layout } from '../../core/layout.ts';
import { BATCH_WINDOW_MS, maxBatchFor } from '../../core/snowflake.ts';
import { batchBoundReason, type SnowflakeWorker } from '../../service/snowflake-worker.ts';
import { checkTag } from '../../core/segment-limits.ts';
import { parseCount } from '../input.ts';
import type { IssuedCounts } from '../plugins/metrics.ts';
import { JSON_TYPE } from '../plugins/errors.ts';
import { contractRoute } from './from-contract.ts';
import {
  LEAF_DECODE_FAILURE,
  LEAF_JSON_TYPE,
  leafDecodeBody,
  parseJavaLong,
  readsForm,
  springParameter,
} from './leaf-decode.ts';
import { JSON_SLICE, idsJson, idsOctets, leafIdType, leafRoute, wantsOctets } from './shared.ts';

/** What the snowflake routes need. */
export interface SnowflakeRouteDeps {
  /** Absent when snowflake mode is off: the routes then answer MODE_DISABLED. */
  readonly worker: SnowflakeWorker | undefined;
  /** Layout used to decode IDs (the worker's, or the configured one when the mode is off). */
  readonly layout: Layout;
  /**
   * api.maxBatch; a batch is also bounded by what the layout issues in BATCH_WINDOW_MS
   * (maxBatchFor).
   */
  readonly maxBatch: number;
  readonly issued: IssuedCounts;
}

/**
 * Snowflake mode: Leaf's `/api/snowflake/get/{tag}` and `/decodeSnowflakeId`, and the JSON
 * `/v1/snowflake` routes. IDs come from the worker without any I/O; the routes only check input
 * and format output.
 */
export function snowflakeRoutes(app: FastifyInstance, deps: SnowflakeRouteDeps): void {
  const { layout, maxBatch, issued } = deps;
  // The worker's bound counts its sequenceSpread; with the mode off, the layout's alone (the
  // route answers MODE_DISABLED then, but the document still shows a bound).
  const layoutBound = deps.worker?.maxBatch ?? maxBatchFor(layout);
  const batchLimit = Math.min(maxBatch, layoutBound);
  const parseBatchCount = (raw: unknown): number => {
    try {
      return parseCount(raw, batchLimit);
    } catch (error) {
      // The same words as the library's nextBatchAsync, when the layout is what bounds it.
      if (batchLimit < maxBatch && isIdMintError(error, 'INVALID_ARGUMENT')) {
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `${error.message}: ${batchBoundReason(layout, batchLimit)}`,
        );
      }
      throw error;
    }
  };
  const worker = (): SnowflakeWorker => {
    if (deps.worker === undefined) {
      throw new IdMintError(
        'MODE_DISABLED',
        'snowflake mode is turned off on this server (snowflake.enabled / ' +
          'IDMINT_SNOWFLAKE_ENABLED)',
      );
    }
    return deps.worker;
  };

  const sendLeafId = (reply: FastifyReply, accept: string | undefined, id: string) => {
    issued.snowflake++;
    return reply.type(leafIdType(accept)).send(id);
  };
  leafRoute(app, LEAF_SNOWFLAKE_ID).handle((request, reply) => {
    checkTag(request.params.tag);
    const accept = request.headers.accept;
    // A string at once (no promise, no closure), unless the worker is fenced and waits for the
    // renewal that confirms its lease.
    const id = worker().nextStringOrWait();
    if (typeof id === 'string') return sendLeafId(reply, accept, id);
    return id.then((later) => sendLeafId(reply, accept, later));
  });

  const bound = { bound: batchBound(batchLimit, maxBatch, layout) };
  contractRoute<typeof SNOWFLAKE_BATCH, string | Buffer>(app, SNOWFLAKE_BATCH, bound).handle(
    async (request, reply) => {
      const count = parseBatchCount(request.query.count);
      const source = worker();
      // Minted between time units with the event loop running: a large batch never stalls
      // health checks, lease renewals or other requests.
      const ids = await source.nextBatchAsync(count);
      issued.snowflake += count;
      if (wantsOctets(request.headers.accept)) return reply.type(OCTET_TYPE).send(idsOctets(ids));
      return reply
        .type(JSON_TYPE)
        .send(
          await idsJsonInSlices(`{"workerId":${decomposeId(ids[0] ?? 0n, layout).workerId},`, ids),
        );
    },
  );

  contractRoute(app, SNOWFLAKE_DECODE).handle((request) => {
    const parts = decomposeId(request.params.id, layout);
    return { id: request.params.id, layout: layout.name, ...parts, date: parts.date.toISOString() };
  });

  // Any method, as Leaf's mapping; the ID from the query string and a form body, as Spring binds
  // it, parsed as Java's Long.parseLong and decoded with Leaf's arithmetic (leaf-decode.ts).
  leafRoute<typeof LEAF_DECODE, string>(app, LEAF_DECODE, { form: true }).handle(
    (request, reply) => {
      const form = readsForm(request.method, request.headers['content-type']);
      const body = typeof request.body === 'string' && form ? request.body : undefined;
      const raw = springParameter(request.url, 'snowflakeId', body);
      // Spring's own 400 (MissingServletRequestParameterException) for a parameter not sent.
      if (raw === undefined)
        throw new IdMintError(
          'INVALID_ID',
          'snowflakeId is required: /decodeSnowflakeId?snowflakeId=<id>',
        );
      const id = parseJavaLong(raw);
      const answer = id === undefined ? LEAF_DECODE_FAILURE : leafDecodeBody(id, layout);
      reply.type(LEAF_JSON_TYPE).send(answer);
    },
  );
}

/**
 * The bound on a snowflake batch: api.maxBatch, or what the layout issues in a batch window when
 * that is less.
 */
export function batchBound(limit: number, maxBatch: number, layout: Layout): CountBound {
  const bound =
    limit < maxBatch
      ? `${limit}: what layout "${layout.name}" issues in ${BATCH_WINDOW_MS} ms`
      : `${limit} (api.maxBatch)`;
  return { max: limit, bound };
}

/**
 * {@link idsJson} for batches of any size: the text is built a slice at a time with the event
 * loop let run between slices, since joining 400,000 IDs at once takes 60 ms or more.
 */
async function idsJsonInSlices(head: string, ids: readonly bigint[]): Promise<string> {
  if (ids.length <= JSON_SLICE) return idsJson(head, ids);
  const parts: string[] = [];
  for (let i = 0; i < ids.length; i += JSON_SLICE) {
    if (i > 0) await yieldToEventLoop();
    parts.push(ids.slice(i, i + JSON_SLICE).join('","'));
  }
  return `${head}"ids":["${parts.join('","')}"]}`;
}
