import type {
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
  RouteHandlerMethod,
} from 'fastify';
import { IdMintError } from '../../core/errors.ts';
import type { AnswerOf, CountBound, RouteContract, RouteTypes } from '../../contract/route.ts';

/** A handler for a contract's route, typed by it (see RouteTypes). */
export type ContractHandler<C extends RouteContract, Answer = AnswerOf<C>> = RouteHandlerMethod<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  RouteTypes<C, Answer>
>;

/** What a route adds to its contract when it is registered. */
export interface RouteExtras {
  /** The server's bound on `count` or `size`, for a contract whose query is made for one. */
  readonly bound?: CountBound;
  /** Answer HEAD as GET without the body, and document it (probes and monitors use it). */
  readonly exposeHead?: boolean;
  /**
   * The route forwarded TinyId draws arrive on: it also accepts TinyId's token in
   * TINYID_TOKEN_HEADER on a forwarded request, for the tag in its path (see installAuth).
   */
  readonly tinyIdForwarding?: boolean;
}

/**
 * Fastify's `config` and `schema` for a contract's route: its access (the auth plugin reads it),
 * the documented path and query (the OpenAPI plugin merges them in: see plugins/openapi.ts), the
 * body Fastify validates, and the answers it serializes and documents.
 */
export function routeOptions(contract: RouteContract, extras: RouteExtras = {}) {
  const { params, body } = contract;
  let querystring = contract.querystring;
  if (typeof querystring === 'function') {
    if (extras.bound === undefined) {
      throw new IdMintError(
        'INTERNAL_ERROR',
        `route ${contract.url} documents a bounded query: give its bound`,
      );
    }
    querystring = querystring(extras.bound);
  }
  const docs = {
    ...(params === undefined ? {} : { params }),
    ...(querystring === undefined ? {} : { querystring }),
  };
  const head = extras.exposeHead === true;
  return {
    config: {
      access: contract.access,
      ...(Object.keys(docs).length === 0 ? {} : { docs }),
      ...(head ? { swagger: { exposeHeadRoute: true } } : {}),
      ...(extras.tinyIdForwarding === true ? { tinyIdForwarding: true } : {}),
    },
    schema: {
      operationId: contract.operationId,
      summary: contract.summary,
      tags: [contract.section],
      ...(body === undefined ? {} : { body }),
      response: contract.response,
    },
    ...(head ? { exposeHeadRoute: true } : {}),
  };
}

/**
 * A contract's route, registered at its method and URL once given its handler:
 * `contractRoute(app, CONTRACT).handle(handler)`. In two steps so that TypeScript infers the
 * contract from the contract alone and then checks the handler against it: inferred from both
 * in one call, each route cost the type check over a million instantiations.
 */
export function contractRoute<C extends RouteContract, Answer = AnswerOf<C>>(
  app: FastifyInstance,
  contract: C,
  extras: RouteExtras = {},
): { handle(handler: ContractHandler<C, Answer>): void } {
  const { method, url } = contract;
  return {
    handle(handler) {
      app.route<RouteTypes<C, Answer>>({ method, url, ...routeOptions(contract, extras), handler });
    },
  };
}
