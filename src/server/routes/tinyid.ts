import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RouteContract } from '../../contract/route.ts';
import {
  TINYID_NEXT_ID,
  TINYID_NEXT_ID_SIMPLE,
  TINYID_NEXT_SEGMENT_ID,
  TINYID_NEXT_SEGMENT_ID_SIMPLE,
} from '../../contract/tinyid.ts';
import type { Logger } from 'pino';
import { IdMintError, type ErrorCode } from '../../core/errors.ts';
import { checkTag } from '../../core/segment-limits.ts';
import type { SegmentRun } from '../../core/segment-buffer.ts';
import type { SegmentService } from '../../service/segment-service.ts';
import type { Authorizer } from '../plugins/auth.ts';
import { JSON_TYPE, publicMessage, toIdMintError } from '../plugins/errors.ts';
import type { IssuedCounts } from '../plugins/metrics.ts';
import { clip } from '../input.ts';
import { drawRun, refuseOpaque, refusePeriodic, segmentsOn } from './range.ts';
import { failNotNumeric } from './segment.ts';
import type { PeriodicSegments } from '../../service/periodic-segments.ts';
import { routeOptions } from './from-contract.ts';
import { drawOrdered, refuseOrdered, type OrderedDrawDeps } from '../ordered-draws.ts';
import { LEAF_ALLOW, LEAF_METHODS, leafContentType } from './shared.ts';

/** What the TinyId routes need. */
export interface TinyIdRouteDeps {
  readonly service: SegmentService | undefined;
  /**
   * TinyId's `batch.size.max`: a larger batchSize is lowered to it, as TinyId does (not refused).
   * The server passes the larger of `api.maxBatch` and {@link TINYID_BATCH_SIZE_MAX}.
   */
  readonly maxBatch: number;
  readonly issued: IssuedCounts;
  /** Checks TinyId's `token` parameter against idmint's tokens (auth.tokens, auth.adminToken). */
  readonly authorizer: Authorizer;
  /** Where a 5xx's details go: TinyId's answer carries only its public sentence. */
  readonly log: Logger;
  /**
   * Counts a failure by the code idmint's own routes would answer it with (the error counts of
   * the dashboard and `idmint_http_errors_total`): TinyId's answers are HTTP 200 and never reach
   * the error handler that counts the others.
   */
  readonly onError: (code: ErrorCode) => void;
  /** Periodic tags: formatted IDs on the ID routes (all-digit templates), refused as segments. */
  readonly periodic?: PeriodicSegments | undefined;
  /** Forwarding of cluster-ordered tags to their issuer. */
  readonly ordered?: OrderedDrawDeps | undefined;
}

/**
 * TinyId's `batch.size.max` (tinyid-server application.properties): its routes lower a larger
 * batchSize to it. The TinyId routes keep it unless `api.maxBatch` is higher, so a client asking
 * TinyId's largest batch gets as many IDs as from TinyId.
 */
export const TINYID_BATCH_SIZE_MAX = 100_000;

/** TinyId's ErrorCode.TOKEN_ERR and ErrorCode.SYS_ERR (tinyid-server vo/ErrorCode.java). */
const TOKEN_ERR = { code: 5, message: 'token is error' } as const;
const SYS_ERR = 6;

/** TinyId's `Response<T>` as Jackson writes it: `data`, `code` (200 on success), `message`. */
function tinyIdJson(data: string, code = 200, message = ''): string {
  return `{"data":${data},"code":${code},"message":${JSON.stringify(message)}}`;
}

/**
 * The message TinyId's controller puts in a SYS_ERR answer (its exception's message). An unknown
 * tag says what TinyId says ("can not find biztype:x"); other failures say idmint's code and, for
 * a 5xx, only its public sentence (the log has the details, as for every idmint route). `nextId`
 * draws through TinyId's CachedIdGenerator, whose querySegmentId wraps every failure as "error
 * query segmentId: <message>"; `nextSegmentId` calls the segment service directly, unwrapped.
 */
function sysMessage(
  error: IdMintError,
  request: FastifyRequest,
  tag: string,
  route: 'ids' | 'segment',
): string {
  const message =
    error.code === 'TAG_NOT_FOUND'
      ? `can not find biztype:${tag}`
      : `${error.code}: ${publicMessage(error, request.id)}`;
  return route === 'ids' ? `error query segmentId: ${message}` : message;
}

/** TinyId's parameters: Spring reads the query string, then a form body, first value wins. */
interface TinyIdParams {
  readonly bizType: string | undefined;
  readonly token: string | undefined;
  readonly batchSize: string | undefined;
}

function paramsOf(request: FastifyRequest): TinyIdParams {
  const query = new URLSearchParams(
    request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : '',
  );
  const form = typeof request.body === 'string' ? new URLSearchParams(request.body) : undefined;
  const get = (name: string) => query.get(name) ?? form?.get(name) ?? undefined;
  return { bizType: get('bizType'), token: get('token'), batchSize: get('batchSize') };
}

/**
 * TinyId's `Integer batchSize` as Spring binds it: absent or empty is 1 (TinyId's default), past
 * the maximum is lowered to it (TinyId's checkBatchSize); 0 or less asks for nothing. What Spring
 * cannot bind as an Integer is a 400 (idmint's INVALID_ARGUMENT, where Spring sends its own page).
 */
function batchSizeOf(raw: string | undefined, max: number): number {
  if (raw === undefined || raw.trim() === '') return 1;
  const text = raw.trim();
  if (!/^[-+]?[0-9]{1,10}$/.test(text) || Math.abs(Number(text)) > 2 ** 31 - 1) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `batchSize must be an integer (TinyId's Integer), got "${clip(raw)}"`,
    );
  }
  return Math.min(Number(text), max);
}

/**
 * TinyId's SegmentId for a run: IDs are `(currentId, maxId]` stepping by `delta`, each `≡
 * remainder (mod delta)`, and TinyId's client loads the next segment once it passes `loadingId`
 * (20% in, TinyId's LOADING_PERCENT). currentId is one stride below the first ID.
 */
export function tinyIdSegment(run: SegmentRun): {
  currentId: bigint;
  loadingId: bigint;
  maxId: bigint;
  delta: number;
  remainder: number;
} {
  const stride = BigInt(run.stride);
  const currentId = run.start - stride;
  return {
    currentId,
    loadingId: currentId + ((run.end - run.start) * 20n) / 100n,
    maxId: run.end - stride,
    delta: run.stride,
    remainder: Number(run.start % stride),
  };
}

/**
 * Didi TinyId's HTTP API (tinyid-server IdContronller under its `/tinyid` context path), so TinyId
 * clients and their configuration work unchanged: `nextId`, `nextIdSimple`, `nextSegmentId`,
 * `nextSegmentIdSimple`, every method, parameters in the query or a form body.
 *
 * Answers are TinyId's, byte for byte where it matters to its clients: always HTTP 200; the JSON
 * routes `{"data":...,"code":200,"message":""}`, a bad token `{"data":null,"code":5,"message":
 * "token is error"}`, any other failure code 6 with a message; the Simple routes the bare text, or
 * an empty body for any failure (TinyId's client reads empty as "no answer"). Only a batchSize
 * that is no integer comes as an idmint error (400), where Spring's binding error is its own page.
 *
 * The token is TinyId's `token` parameter, checked against idmint's tokens: one whose tags allow
 * `bizType`, or the admin token; with auth off every token is accepted (docs/api.md).
 */
export function tinyIdRoutes(app: FastifyInstance, deps: TinyIdRouteDeps): void {
  const { maxBatch, issued, authorizer, log, onError } = deps;

  /** A request answered with TinyId's token error, counted under idmint's `code`. */
  const refused = (code: ErrorCode) => {
    onError(code);
    return { token: false } as const;
  };

  /** Runs `draw` for an allowed token and a served tag: its result, a bad token, or a failure. */
  const serve = async <T>(
    request: FastifyRequest,
    ids: boolean,
    draw: (
      service: SegmentService,
      tag: string,
      params: TinyIdParams,
      request: FastifyRequest,
    ) => Promise<T>,
  ): Promise<{ ok: T } | { token: false } | { error: IdMintError; tag: string }> => {
    const params = paramsOf(request);
    // TinyId binds and bounds batchSize before it checks the token (nextSegmentId takes none).
    if (ids) batchSizeOf(params.batchSize, maxBatch);
    const tag = params.bizType;
    // TinyId answers "token is error" for a missing bizType too (its token check fails on it).
    if (tag === undefined || tag === '') return refused('INVALID_ARGUMENT');
    const refusal = authorizer.tokenRefusal(params.token, tag);
    if (refusal !== undefined) return refused(refusal);
    try {
      return { ok: await draw(segmentsOn(deps.service), checkTag(tag), params, request) };
    } catch (error) {
      const failure = toIdMintError(error);
      onError(failure.code);
      if (failure.status >= 500)
        log.error(
          { reqId: request.id, code: failure.code, err: failure.message },
          'tinyid route failed',
        );
      return { error: failure, tag };
    }
  };

  const drawIds = async (
    service: SegmentService,
    tag: string,
    params: TinyIdParams,
    request: FastifyRequest,
  ): Promise<(bigint | string)[]> => {
    const count = batchSizeOf(params.batchSize, maxBatch);
    // A cluster-ordered tag is never periodic: no look-up (see the segment routes).
    const sequence = service.isOrdered(tag)
      ? undefined
      : (deps.periodic?.known(tag) ?? (await deps.periodic?.lookup(tag)));
    if (deps.periodic !== undefined && sequence !== undefined) {
      // TinyId's clients read Longs: only an all-digit template's IDs (at most 18 digits) fit.
      if (!sequence.numeric) failNotNumeric(tag, sequence);
      if (count < 1) return [];
      const batch = await deps.periodic.nextBatch(tag, count);
      issued.addSegment(tag, count);
      return batch.ids;
    }
    refuseOpaque(service, tag);
    if (count < 1) return [];
    const ids =
      service.nextBatchSync(tag, count) ??
      // A cluster-ordered tag another node issues is drawn there, with TinyId's token in a header
      // of its own, which the issuer checks for this tag as this route does (never as a bearer
      // token: a token of auth.tinyidTokenFile is no bearer token).
      (await drawOrdered(
        deps.ordered,
        service,
        request,
        tag,
        () => service.nextBatch(tag, count),
        (forwarder, address) => forwarder.ids(address, tag, count, undefined, params.token),
      ));
    refuseOpaque(service, tag);
    issued.addSegment(tag, count);
    return ids;
  };

  const drawSegment = async (
    service: SegmentService,
    tag: string,
  ): Promise<ReturnType<typeof tinyIdSegment>> => {
    // A segment of the tag's configured step, as TinyId's is (the rest of the buffered range when
    // fewer are left).
    await refusePeriodic(deps.periodic, tag);
    // TinyId's client issues a segment's IDs itself, later: never for a cluster-ordered tag.
    // Checked before the draw and after it (a tag first looked up by the draw is known only then).
    const what = 'a segment TinyId issues itself';
    refuseOrdered(service, tag, what);
    const run = await drawRun(service, tag, 'step');
    refuseOrdered(service, tag, what);
    issued.addSegment(tag, run.count);
    return tinyIdSegment(run);
  };

  const route = (
    contract: RouteContract,
    handler: (request: FastifyRequest, reply: FastifyReply) => Promise<void>,
  ) => {
    const { url } = contract;
    app.register(async (scope) => {
      // Spring reads form parameters from the body; any other body is read and ignored.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser(
        'application/x-www-form-urlencoded',
        { parseAs: 'string' },
        (_request, body, done) => done(null, body),
      );
      scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, _body, done) =>
        done(null, undefined),
      );
      // GET is the one the OpenAPI document shows; the other methods answer the same, hidden beside
      // it.
      scope.get(url, routeOptions(contract), handler);
      const others = LEAF_METHODS.filter((method) => method !== 'GET');
      scope.route({
        method: others,
        url,
        config: { access: contract.access },
        schema: { hide: true },
        handler,
      });
      scope.options(
        url,
        { config: { access: 'open' }, schema: { hide: true } },
        (_request, reply) => {
          reply.header('allow', LEAF_ALLOW).code(200).send();
        },
      );
    });
  };

  route(TINYID_NEXT_ID, async (request, reply) => {
    const result = await serve(request, true, drawIds);
    const body =
      'ok' in result
        ? tinyIdJson(`[${result.ok.join(',')}]`)
        : 'token' in result
          ? tinyIdJson('null', TOKEN_ERR.code, TOKEN_ERR.message)
          : tinyIdJson('null', SYS_ERR, sysMessage(result.error, request, result.tag, 'ids'));
    reply.type(JSON_TYPE).send(body);
  });

  route(TINYID_NEXT_ID_SIMPLE, async (request, reply) => {
    const result = await serve(request, true, drawIds);
    // TinyId joins with commas; an empty list fails in its StringBuilder and answers "".
    reply
      .type(leafContentType(request.headers.accept))
      .send('ok' in result ? result.ok.join(',') : '');
  });

  route(TINYID_NEXT_SEGMENT_ID, async (request, reply) => {
    const result = await serve(request, false, drawSegment);
    const segment = (s: ReturnType<typeof tinyIdSegment>) =>
      `{"maxId":${s.maxId},"loadingId":${s.loadingId},"currentId":${s.currentId},` +
      `"delta":${s.delta},"remainder":${s.remainder}}`;
    const body =
      'ok' in result
        ? tinyIdJson(segment(result.ok))
        : 'token' in result
          ? tinyIdJson('null', TOKEN_ERR.code, TOKEN_ERR.message)
          : tinyIdJson('null', SYS_ERR, sysMessage(result.error, request, result.tag, 'segment'));
    reply.type(JSON_TYPE).send(body);
  });

  route(TINYID_NEXT_SEGMENT_ID_SIMPLE, async (request, reply) => {
    const result = await serve(request, false, drawSegment);
    const text =
      'ok' in result
        ? [
            result.ok.currentId,
            result.ok.loadingId,
            result.ok.maxId,
            result.ok.delta,
            result.ok.remainder,
          ].join(',')
        : '';
    reply.type(leafContentType(request.headers.accept)).send(text);
  });
}
