import type { FastifyRequest } from 'fastify';
import { IdMintError, isIdMintError } from '../core/errors.ts';
import type { SegmentRun } from '../core/segment-buffer.ts';
import { isIssuedElsewhere, type SegmentService } from '../service/segment-service.ts';
import { unavailable } from '../service/issuer-holding.ts';
import { FORWARDED_HEADER, type Forwarder } from './forwarding.ts';

/** What the routes need to serve cluster-ordered tags: the forwarder and its time bounds. */
export interface OrderedDrawDeps {
  readonly forwarder: Forwarder;
  /** How long a request may look for an issuer (segment.waitTimeoutMs). */
  readonly waitTimeoutMs: number;
  /** Between two tries (segment.issuerRetryMs). */
  readonly retryMs: number;
}

/**
 * Serves a draw here, or at the issuer of a cluster-ordered tag that another node issues. `local`
 * draws here (for a plain tag, at once: this costs a plain tag one set look-up on the slow path);
 * a cluster-ordered tag another node issues goes to `remote`, which the route turns into its own
 * answer. A forwarded request is never forwarded again: it is answered ISSUER_UNAVAILABLE by a node
 * that does not issue the tag. Failing issuers are retried (the lease may be changing hands)
 * until `waitTimeoutMs` has passed, then ISSUER_UNAVAILABLE.
 */
export async function drawOrdered<T>(
  deps: OrderedDrawDeps | undefined,
  service: SegmentService,
  request: FastifyRequest,
  tag: string,
  local: () => Promise<T>,
  remote: (forwarder: Forwarder, address: string, authorization: string | undefined) => Promise<T>,
  authorization: string | undefined = header(request.headers.authorization),
): Promise<T> {
  const forwarded = request.headers[FORWARDED_HEADER] !== undefined;
  const started = performance.now();
  /** Why the last try failed, for the final error: it may name the fix. */
  let last: unknown;
  for (;;) {
    let address = service.issuerOf(tag);
    if (address === undefined) {
      try {
        const result = await local();
        if (forwarded && service.isOrdered(tag)) service.issuers?.get(tag)?.countServedForwarded();
        return result;
      } catch (error) {
        address = isIssuedElsewhere(error);
        if (address === undefined && !retryable(error, forwarded)) throw error;
        if (address === undefined) last = error;
      }
    }
    if (address !== undefined) {
      if (forwarded)
        throw unavailable(tag, 'this node does not issue it and the request was forwarded already');
      if (deps === undefined) throw unavailable(tag, 'this node cannot forward requests');
      const holding = service.issuers?.get(tag);
      try {
        holding?.countForwarded();
        if (address === '') throw unavailable(tag, 'its issuer has no address');
        return await remote(deps.forwarder, address, authorization);
      } catch (error) {
        if (!retryable(error, false)) throw error;
        holding?.forgetRemote(address);
        last = error;
      }
    }
    const waitMs = deps?.waitTimeoutMs ?? 0;
    const retryMs = deps?.retryMs ?? 0;
    if (performance.now() - started + retryMs >= waitMs) {
      const why = last instanceof Error ? ` (last: ${last.message})` : '';
      throw unavailable(tag, `no issuer could be reached within ${waitMs} ms${why}; retry`, last);
    }
    // After a failed forward the store is asked again at once (a holder that gave the lease back
    // is replaced by this node's claim); claims themselves come at most once per retryMs.
    if (address === undefined) await new Promise((resolve) => setTimeout(resolve, retryMs));
  }
}

/**
 * Worth another try within the wait: the issuer is unreachable, no longer issues the tag, or the
 * lease could not be claimed. A forwarded request is answered at once: its sender retries.
 */
function retryable(error: unknown, forwarded: boolean): boolean {
  if (forwarded) return false;
  return isIdMintError(error, 'ISSUER_UNAVAILABLE') || isIdMintError(error, 'SERVER_UNAVAILABLE');
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** `count` IDs of `tag` as runs of consecutive IDs (the forwarded answer's, in the batch form). */
export function runsOf(ids: readonly bigint[]): SegmentRun[] {
  const runs: SegmentRun[] = [];
  let start = ids[0];
  let count = 0;
  for (const id of ids) {
    if (start !== undefined && id === start + BigInt(count)) {
      count++;
      continue;
    }
    if (start !== undefined && count > 0)
      runs.push({ start, end: start + BigInt(count), stride: 1, count });
    start = id;
    count = 1;
  }
  if (start !== undefined && count > 0)
    runs.push({ start, end: start + BigInt(count), stride: 1, count });
  return runs;
}

/** ORDERED_RANGE_REFUSED: a range its caller issues later would break a cluster-ordered tag. */
export function refuseOrdered(service: SegmentService, tag: string, what: string): void {
  if (service.isOrdered(tag))
    throw new IdMintError(
      'ORDERED_RANGE_REFUSED',
      `tag "${tag}" is cluster-ordered: ${what} would be issued after its answer, out of order ` +
        'with other nodes; draw its IDs from the server',
      { details: { tag } },
    );
}
