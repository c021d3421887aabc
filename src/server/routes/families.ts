import type { FastifyInstance } from 'fastify';
import { maxBatchBound } from '../../contract/common.ts';
import {
  DECODE_ANY,
  DECODE_OPAQUE_SEGMENT,
  DECODE_OPAQUE_SNOWFLAKE,
  FAMILY_ROUTES,
  OPAQUE_SNOWFLAKE_BATCH,
  OPAQUE_SNOWFLAKE_DIGITS,
} from '../../contract/ids.ts';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { IdMintError, isIdMintError } from '../../core/errors.ts';
import { decodeAny } from '../../core/id-formats.ts';
import { decomposeId, type Layout } from '../../core/layout.ts';
import { checkTag, tagNotFound } from '../../core/segment-limits.ts';
import { maxBatchFor } from '../../core/snowflake.ts';
import type { Clock } from '../../ports/clock.ts';
import type { SegmentStore } from '../../ports/segment-store.ts';
import type { IdFamilies } from '../../service/id-families.ts';
import { noOpaqueKeys, type OpaqueIds } from '../../service/opaque-ids.ts';
import { batchBoundReason, type SnowflakeWorker } from '../../service/snowflake-worker.ts';
import { parseCount } from '../input.ts';
import { JSON_TYPE } from '../plugins/errors.ts';
import type { IssuedCounts } from '../plugins/metrics.ts';
import { contractRoute } from './from-contract.ts';
import { idsJson } from './shared.ts';

/** What the family and opaque routes need. */
export interface FamilyRouteDeps {
  readonly families: IdFamilies;
  /** api.maxBatch: the `count` bound, as for every batch route. */
  readonly maxBatch: number;
  /** The server's snowflake layout, for decimal IDs at /v1/decode and opaque snowflake IDs. */
  readonly layout: Layout;
  /**
   * Clock of the snowflake bound on decoding opaque snowflake IDs (nothing later than a day ahead
   * decodes).
   */
  readonly clock: Clock;
  /**
   * The opaque keys; absent when none are configured (the opaque routes answer OPAQUE_UNAVAILABLE).
   */
  readonly opaque: OpaqueIds | undefined;
  /** Snowflake mode, for opaque snowflake IDs; absent when off (MODE_DISABLED). */
  readonly worker: SnowflakeWorker | undefined;
  /** Segment mode's store, for an opaque tag's `max_id` when decoding; absent when off. */
  readonly store: SegmentStore | undefined;
  /** Where IDs handed out are counted (idmint_ids_issued_total). */
  readonly issued: IssuedCounts;
}

/** IDs generated per slice, with the event loop let run between slices (a few ms each). */
const SLICE = 16_384;

/**
 * The ID families (`/v1/uuid7`, `/v1/uuid4`, `/v1/ulid`, `/v1/objectid`), decoding of any ID
 * idmint makes (`/v1/decode/{id}`), and opaque IDs: opaque snowflake IDs and, with the admin
 * token, decoding an opaque ID back to its dense ID. Batch routes take the same `count` and the
 * same token as `/v1/snowflake`; the IDs come from generators made once for the server's life.
 */
export function familyRoutes(app: FastifyInstance, deps: FamilyRouteDeps): void {
  const { families, maxBatch, layout, issued } = deps;

  for (const route of FAMILY_ROUTES) {
    contractRoute<typeof route, string>(app, route, { bound: maxBatchBound(maxBatch) }).handle(
      async (request, reply) => {
        const count = parseCount(request.query.count, maxBatch);
        const body = await idsInSlices(count, (n) => families.next(route.family, n));
        issued.addFamily(route.family, count);
        return reply.type(JSON_TYPE).send(body);
      },
    );
  }

  contractRoute(app, DECODE_ANY).handle((request) => {
    const id = request.params.id;
    if (/^[1-9][0-9]{24}$/.test(id)) {
      throw new IdMintError(
        'INVALID_ID',
        `"${id}" has the shape of an opaque snowflake ID (${OPAQUE_SNOWFLAKE_DIGITS} ` +
          `digits): only the keys can ` +
          `decode it, at /v1/opaque/snowflake/{id} with the admin token`,
      );
    }
    const { date, ...parts } = decodeAny(id, { layout });
    return { ...parts, ...(date === undefined ? {} : { date: date.toISOString() }) };
  });

  const keys = (what: string): OpaqueIds => deps.opaque ?? failNoKeys(what);
  const worker = (): SnowflakeWorker => {
    if (deps.worker === undefined) {
      throw new IdMintError(
        'MODE_DISABLED',
        'snowflake mode is turned off on this server (snowflake.enabled / ' +
          'IDMINT_SNOWFLAKE_ENABLED), and with it ' +
          'opaque snowflake IDs',
      );
    }
    return deps.worker;
  };
  const store = (): SegmentStore => {
    if (deps.store === undefined) {
      throw new IdMintError(
        'MODE_DISABLED',
        'segment mode is turned off on this server (segment.enabled / ' +
          'IDMINT_SEGMENT_ENABLED), and with it opaque ' +
          'segment IDs',
      );
    }
    return deps.store;
  };

  const layoutBound = deps.worker?.maxBatch ?? maxBatchFor(layout);
  const snowflakeLimit = Math.min(maxBatch, layoutBound);
  const opaqueBound = { bound: maxBatchBound(snowflakeLimit) };
  contractRoute<typeof OPAQUE_SNOWFLAKE_BATCH, string>(
    app,
    OPAQUE_SNOWFLAKE_BATCH,
    opaqueBound,
  ).handle(async (request, reply) => {
    let count: number;
    try {
      count = parseCount(request.query.count, snowflakeLimit);
    } catch (error) {
      if (snowflakeLimit < maxBatch && isIdMintError(error, 'INVALID_ARGUMENT'))
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `${error.message}: ${batchBoundReason(layout, snowflakeLimit)}`,
        );
      throw error;
    }
    const codec = keys('opaque snowflake IDs');
    const ids = await worker().nextBatchAsync(count);
    issued.snowflake += count;
    return reply.type(JSON_TYPE).send(idsJson('{', codec.snowflakeIds(ids)));
  });

  contractRoute(app, DECODE_OPAQUE_SNOWFLAKE).handle((request) => {
    const id = request.params.id;
    const decoded = keys('decoding opaque IDs').decodeSnowflake(id, layout, deps.clock.now());
    const parts = decomposeId(decoded.dense, layout);
    return {
      id,
      dense: decoded.dense.toString(),
      keyId: decoded.keyId,
      layout: layout.name,
      ...parts,
      date: parts.date.toISOString(),
    };
  });

  contractRoute(app, DECODE_OPAQUE_SEGMENT).handle(async (request) => {
    const tag = checkTag(request.params.tag);
    const codec = keys('decoding opaque IDs');
    const record = await store().getTag(tag);
    if (record === undefined) throw tagNotFound(tag);
    // A plain tag never issued an opaque ID (tags only ever turn opaque, never back).
    if (record.opaque !== true)
      throw new IdMintError(
        'INVALID_ID',
        `tag "${tag}" is not opaque: its IDs are its dense IDs, and none of them is an opaque ID`,
      );
    const decoded = codec.decodeSegment(tag, request.params.id, record.maxId);
    return { tag, id: decoded.id, dense: decoded.dense.toString(), keyId: decoded.keyId };
  });
}

function failNoKeys(what: string): never {
  throw noOpaqueKeys(what);
}

/**
 * `{"ids":[...]}` for `count` IDs made `SLICE` at a time, the event loop let run between slices:
 * a batch of a million never stalls health checks or other requests. The IDs need no escaping
 * (hex, dashes, base32), so joining is exact.
 */
async function idsInSlices(count: number, make: (n: number) => string[]): Promise<string> {
  if (count <= SLICE) return `{"ids":["${make(count).join('","')}"]}`;
  const parts: string[] = [];
  for (let done = 0; done < count; done += SLICE) {
    if (done > 0) await yieldToEventLoop();
    parts.push(make(Math.min(SLICE, count - done)).join('","'));
  }
  return `{"ids":["${parts.join('","')}"]}`;
}
