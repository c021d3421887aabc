import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { OCTET_TYPE, maxBatchBound } from '../../contract/common.ts';
import { LEAF_SEGMENT_ID, SEGMENT_BATCH } from '../../contract/segment.ts';
import { IdMintError } from '../../core/errors.ts';
import type { SegmentRun } from '../../core/segment-buffer.ts';
import type { SegmentService } from '../../service/segment-service.ts';
import {
  failOpaqueTag,
  segmentIdText,
  segmentIdTexts,
  type OpaqueIds,
} from '../../service/opaque-ids.ts';
import { checkTag } from '../../core/segment-limits.ts';
import type { PeriodicSequence } from '../../core/periodic.ts';
import type { PeriodicSegments } from '../../service/periodic-segments.ts';
import { parseCount } from '../input.ts';
import { JSON_TYPE } from '../plugins/errors.ts';
import type { IssuedCounts } from '../plugins/metrics.ts';
import { contractRoute } from './from-contract.ts';
import { drawOrdered, runsOf, type OrderedDrawDeps } from '../ordered-draws.ts';
import {
  idsJson,
  idsOctets,
  leafIdType,
  leafRoute,
  runsJson,
  wantsOctets,
  writeRunOctets,
} from './shared.ts';

/** What the segment routes need. */
export interface SegmentRouteDeps {
  /** Absent when segment mode is off: the routes then answer MODE_DISABLED. */
  readonly service: SegmentService | undefined;
  readonly maxBatch: number;
  readonly issued: IssuedCounts;
  /**
   * The opaque keys; absent when none are configured (an opaque tag is then OPAQUE_UNAVAILABLE).
   */
  readonly opaque?: OpaqueIds | undefined;
  /**
   * Periodic tags' formatted IDs; absent, periodic tags are not served (their rows issue nothing).
   */
  readonly periodic?: PeriodicSegments | undefined;
  /** Forwarding of cluster-ordered tags to their issuer; absent: such tags are served here only. */
  readonly ordered?: OrderedDrawDeps | undefined;
}

/**
 * Segment mode: Leaf's `/api/segment/get/{tag}` and the JSON `/v1/segment/{tag}` batch route.
 *
 * The single-ID route answers from the tag's buffer without a Promise whenever an ID is buffered,
 * which is all but a few requests per range; only a miss (unknown tag, range being loaded, store
 * trouble) takes the async path, where the tag is checked and the service waits or fails.
 *
 * Both routes serve any tag a store holds (core's checkTag: up to 128 characters, Unicode,
 * spaces, `/`), sent percent-encoded in the path as Leaf's clients send it; the router decodes it
 * (`%2F` included, which stays inside the one path segment).
 */
export function segmentRoutes(app: FastifyInstance, deps: SegmentRouteDeps): void {
  const { maxBatch, issued } = deps;
  const service = (): SegmentService => {
    if (deps.service === undefined) {
      throw new IdMintError(
        'MODE_DISABLED',
        'segment mode is turned off on this server (segment.enabled / IDMINT_SEGMENT_ENABLED)',
      );
    }
    return deps.service;
  };

  const { opaque: keys } = deps;
  // An opaque tag on a node without keys is refused before an ID is drawn for it.
  const checkKeys = (segments: SegmentService, tag: string): boolean => {
    const opaque = segments.isOpaque(tag);
    if (opaque && keys === undefined) failOpaqueTag(tag);
    return opaque;
  };

  const { periodic } = deps;
  /** A periodic tag's next formatted ID on Leaf's route: a number as text, or refused. */
  const periodicSingle = async (
    tag: string,
    sequence: PeriodicSequence,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<void> => {
    // Leaf's clients read the answer as a long: an ID with letters would break them.
    if (!sequence.numeric) failNotNumeric(tag, sequence);
    const text = periodic?.nextSync(tag) ?? (await periodic?.next(tag));
    issued.addSegment(tag, 1);
    reply.type(leafIdType(request.headers.accept)).send(text);
  };

  const slowSingle = async (
    tag: string,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<void> => {
    const segments = service();
    // A tag first seen here may be periodic: its own row issues nothing, its periods do.
    // A cluster-ordered tag is never periodic: its requests (forwarded ones on every node but
    // the issuer come here) need no periodic look-up, which asks the store now and then.
    const sequence = segments.isOrdered(tag) ? undefined : await periodic?.lookup(checkTag(tag));
    if (sequence !== undefined) return periodicSingle(tag, sequence, request, reply);
    const wasOpaque = checkKeys(segments, checkTag(tag));
    // A cluster-ordered tag another node issues is drawn there (the fast path found nothing).
    const id = await drawOrdered(
      deps.ordered,
      segments,
      request,
      tag,
      () => segments.next(tag),
      async (forwarder, address, auth) => (await forwarder.ids(address, tag, 1, auth))[0] as bigint,
    );
    // Known as opaque before the draw (a tag dropped meanwhile) or after it (a tag first looked up
    // now).
    const text = segmentIdText(keys, tag, id, wasOpaque || segments.isOpaque(tag));
    issued.addSegment(tag, 1);
    reply.type(leafIdType(request.headers.accept)).send(text);
  };

  leafRoute(app, LEAF_SEGMENT_ID).handle((request, reply) => {
    const tag = request.params.tag;
    const segments = deps.service;
    const sequence = segments === undefined ? undefined : periodic?.known(tag);
    if (sequence !== undefined) return periodicSingle(tag, sequence, request, reply);
    // Only tags the service already holds can have a buffered ID, so the fast path needs no tag
    // check. Drawing and encoding run without a pause: the tag's opaque mark cannot change between.
    const opaque = segments !== undefined && checkKeys(segments, tag);
    const id = segments?.nextSync(tag);
    if (id === undefined) return slowSingle(tag, request, reply);
    const text = segmentIdText(keys, tag, id, opaque);
    issued.addSegment(tag, 1);
    reply.type(leafIdType(request.headers.accept)).send(text);
    return undefined;
  });

  /** A batch's runs, drawn here or, for a cluster-ordered tag another node issues, there. */
  const orderedRuns = (
    segments: SegmentService,
    tag: string,
    count: number,
    request: FastifyRequest,
  ): Promise<SegmentRun[]> =>
    drawOrdered(
      deps.ordered,
      segments,
      request,
      tag,
      () => takeRuns(segments, tag, count),
      async (forwarder, address, auth) => runsOf(await forwarder.ids(address, tag, count, auth)),
    );

  /**
   * A binary batch of a tag not known as opaque, taken from the buffer as runs (the range route's
   * form: no BigInt per ID) and written straight into the answer. Runs never span two ranges, so
   * a batch crossing a boundary takes several, as a JSON batch would. A tag first looked up here
   * that turns out opaque gets its opaque IDs, never its dense ones.
   */
  const octetBatch = async (
    segments: SegmentService,
    tag: string,
    count: number,
    request: FastifyRequest,
  ): Promise<Buffer> => {
    const runs = await orderedRuns(segments, tag, count, request);
    let bytes: Buffer;
    if (segments.isOpaque(tag)) bytes = idsOctets(segmentIdTexts(keys, tag, runIds(runs), true));
    else {
      bytes = Buffer.allocUnsafe(count * 8);
      let filled = 0;
      for (const run of runs) filled = writeRunOctets(bytes, filled, run);
    }
    issued.addSegment(tag, count);
    return bytes;
  };

  /**
   * A JSON batch of a tag not known as opaque, from runs as {@link octetBatch}, its digits written
   * straight into the answer's bytes (runsJson): BigInts joined into one string cost several times
   * more per ID at 100,000 IDs than at 10,000, and held the event loop for the whole batch.
   */
  const jsonBatch = async (
    segments: SegmentService,
    tag: string,
    count: number,
    request: FastifyRequest,
  ): Promise<Buffer | string> => {
    const runs = await orderedRuns(segments, tag, count, request);
    // A tag may hold quotes, backslashes and control characters: escaped as JSON.
    const head = `{"tag":${JSON.stringify(tag)},`;
    const json = segments.isOpaque(tag)
      ? idsJson(head, segmentIdTexts(keys, tag, runIds(runs), true))
      : await runsJson(head, runs);
    issued.addSegment(tag, count);
    return json;
  };

  contractRoute<typeof SEGMENT_BATCH, string | Buffer>(app, SEGMENT_BATCH, {
    bound: maxBatchBound(maxBatch),
    // Another node's forwarded TinyId draws of a cluster-ordered tag come here (forwarding.ts).
    tinyIdForwarding: true,
  }).handle(async (request, reply) => {
    const tag = checkTag(request.params.tag);
    const count = parseCount(request.query.count, maxBatch);
    const segments = service();
    const octets = wantsOctets(request.headers.accept);
    const sequence = segments.isOrdered(tag)
      ? undefined
      : (periodic?.known(tag) ?? (await periodic?.lookup(tag)));
    if (periodic !== undefined && sequence !== undefined) {
      // Formatted IDs, all of one period; in binary only an all-digit template's, as 64-bit
      // numbers.
      if (octets && !sequence.numeric) failNotNumeric(tag, sequence);
      const batch = await periodic.nextBatch(tag, count);
      issued.addSegment(tag, count);
      if (octets) return reply.type(OCTET_TYPE).send(idsOctets(batch.ids));
      const head = `{"tag":${JSON.stringify(tag)},"period":"${batch.period}",`;
      return reply.type(JSON_TYPE).send(idsJson(head, batch.ids));
    }
    const wasOpaque = checkKeys(segments, tag);
    if (!wasOpaque)
      return octets
        ? reply.type(OCTET_TYPE).send(await octetBatch(segments, tag, count, request))
        : reply.type(JSON_TYPE).send(await jsonBatch(segments, tag, count, request));
    // A tag known as opaque: its IDs encoded one by one (FF1) whatever the form.
    const ids = segments.nextBatchSync(tag, count) ?? (await segments.nextBatch(tag, count));
    const texts = segmentIdTexts(keys, tag, ids, true);
    issued.addSegment(tag, count);
    if (octets) return reply.type(OCTET_TYPE).send(idsOctets(texts));
    return reply.type(JSON_TYPE).send(idsJson(`{"tag":${JSON.stringify(tag)},`, texts));
  });
}

/**
 * PERIODIC_NOT_NUMERIC: the route answers numbers and the tag's template prints more than digits.
 */
export function failNotNumeric(tag: string, sequence: PeriodicSequence): never {
  throw new IdMintError(
    'PERIODIC_NOT_NUMERIC',
    `tag "${tag}" is periodic with template "${sequence.template}", whose IDs are not numbers; ` +
      `this route answers numbers only, use /v1/segment/{tag}`,
    { details: { tag, template: sequence.template } },
  );
}

/**
 * The tag's next `count` IDs as runs (the range route's form), waiting for ranges as a batch does.
 */
async function takeRuns(
  segments: SegmentService,
  tag: string,
  count: number,
): Promise<SegmentRun[]> {
  const runs: SegmentRun[] = [];
  for (let taken = 0; taken < count; ) {
    const run = await segments.nextRange(tag, count - taken);
    runs.push(run);
    taken += run.count;
  }
  return runs;
}

/** Every ID of `runs`, in order, as BigInts (for the opaque encoding, which takes them so). */
function runIds(runs: readonly SegmentRun[]): bigint[] {
  return runs.flatMap((run) =>
    Array.from({ length: run.count }, (_, i) => run.start + BigInt(i * run.stride)),
  );
}
