import type { FastifyInstance } from 'fastify';
import { maxBatchBound } from '../../contract/common.ts';
import { SEGMENT_RANGE } from '../../contract/segment.ts';
import { IdMintError } from '../../core/errors.ts';
import { checkTag } from '../../core/segment-limits.ts';
import type { SegmentRun } from '../../core/segment-buffer.ts';
import type { PeriodicSegments } from '../../service/periodic-segments.ts';
import type { SegmentService } from '../../service/segment-service.ts';
import { parseCount } from '../input.ts';
import type { IssuedCounts } from '../plugins/metrics.ts';
import { contractRoute } from './from-contract.ts';
import { drawOrdered, type OrderedDrawDeps } from '../ordered-draws.ts';
import { ORDERING_HEADER } from '../forwarding.ts';

/** What the range route needs. */
export interface RangeRouteDeps {
  /** Absent when segment mode is off: the route then answers MODE_DISABLED. */
  readonly service: SegmentService | undefined;
  /** Largest `size`: api.maxBatch, the batch route's limit. */
  readonly maxBatch: number;
  readonly issued: IssuedCounts;
  /** Periodic tags, refused here (PERIODIC_RANGE_REFUSED); absent: their own rows issue nothing. */
  readonly periodic?: PeriodicSegments | undefined;
  /** Forwarding of cluster-ordered tags to their issuer. */
  readonly ordered?: OrderedDrawDeps | undefined;
}

/** The segment service, or MODE_DISABLED. */
export function segmentsOn(service: SegmentService | undefined): SegmentService {
  if (service === undefined) {
    throw new IdMintError(
      'MODE_DISABLED',
      'segment mode is turned off on this server (segment.enabled / IDMINT_SEGMENT_ENABLED)',
    );
  }
  return service;
}

/**
 * OPAQUE_RANGE_REFUSED for an opaque tag: a range (or TinyId's dense IDs) is the tag's dense
 * numbers, exactly what its opaque IDs exist to hide.
 */
export function refuseOpaque(service: SegmentService, tag: string): void {
  if (service.isOpaque(tag)) {
    throw new IdMintError(
      'OPAQUE_RANGE_REFUSED',
      `tag "${tag}" is opaque: draw its IDs from /v1/segment/{tag}, not as a range`,
      { details: { tag } },
    );
  }
}

/**
 * PERIODIC_RANGE_REFUSED for a periodic tag: a range is issued by its caller, on the caller's
 * clock, so nothing would keep its IDs inside their period (docs/segments.md, Periodic sequences).
 */
export async function refusePeriodic(
  periodic: PeriodicSegments | undefined,
  tag: string,
): Promise<void> {
  if ((periodic?.known(tag) ?? (await periodic?.lookup(tag))) !== undefined)
    throw new IdMintError(
      'PERIODIC_RANGE_REFUSED',
      `tag "${tag}" is periodic: its IDs are handed out formatted, one by one or in batches ` +
        `(/v1/segment/{tag}), never as a range a caller issues itself`,
      { details: { tag } },
    );
}

/**
 * A run drawn for an opaque-checked tag. The tag is checked before the draw and again after it
 * (a tag first looked up by the draw is known as opaque only then): a run drawn for a tag found
 * opaque afterwards is dropped, its IDs never issued to anyone.
 */
export async function drawRun(
  service: SegmentService,
  tag: string,
  size: number | 'step',
): Promise<SegmentRun> {
  refuseOpaque(service, tag);
  const run = await service.nextRange(tag, size);
  refuseOpaque(service, tag);
  return run;
}

/**
 * `GET /v1/segment/{tag}/range?size=N`: exactly N of the tag's IDs as one contiguous run, for a
 * caller that issues them itself (idmint's client in local mode). The run comes from the tag's
 * buffered range when it holds N, else from one allocation of N in the store
 * (SegmentService.exactRange), so no ID of it is ever handed out again and a caller reserving a
 * block never has to stitch several together.
 */
export function rangeRoutes(app: FastifyInstance, deps: RangeRouteDeps): void {
  const { maxBatch, issued } = deps;
  contractRoute(app, SEGMENT_RANGE, { bound: maxBatchBound(maxBatch) }).handle(
    async (request, reply) => {
      const tag = checkTag(request.params.tag);
      if (request.query.size === undefined)
        throw new IdMintError(
          'INVALID_ARGUMENT',
          `size is required: how many IDs the range holds, 1 to ${maxBatch}`,
        );
      const size = parseCount(request.query.size, maxBatch, 'size');
      await refusePeriodic(deps.periodic, tag);
      const service = segmentsOn(deps.service);
      // Checked before and after the draw, as drawRun does: a tag first looked up by the draw is
      // known as opaque only then, and its run is dropped, never answered.
      refuseOpaque(service, tag);
      // A cluster-ordered tag's range comes from its issuer, which may be another node.
      const run = await drawOrdered(
        deps.ordered,
        service,
        request,
        tag,
        () => service.exactRange(tag, size),
        (forwarder, address, auth) => forwarder.range(address, tag, size, auth),
      );
      refuseOpaque(service, tag);
      issued.addSegment(tag, run.count);
      // The client's local mode issues a range's IDs later, one by one: for a cluster-ordered tag
      // that would break the order, so it is told, and refuses (ORDERED_RANGE_REFUSED).
      if (service.isOrdered(tag)) reply.header(ORDERING_HEADER, 'cluster');
      return {
        tag,
        start: run.start.toString(),
        end: run.end.toString(),
        last: (run.end - BigInt(run.stride)).toString(),
        stride: run.stride,
        size: run.count,
      };
    },
  );
}
