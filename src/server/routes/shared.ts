/** Content type of Leaf-compatible single-ID answers. */
export const TEXT_TYPE = 'text/plain; charset=utf-8';

const errorResponse = (description: string) => ({ description, $ref: 'Error#' }) as const;

/** Error answers every ID route may give, for the OpenAPI document. */
export const ERRORS = {
  '4XX': errorResponse('Invalid input (400), auth (401, 403), unknown tag or disabled mode (404), conflict (409).'),
  '5XX': errorResponse('Store, registry or clock trouble (503, with Retry-After when retrying helps).'),
} as const;

/**
 * `{<head>"ids":["1","2",...]}` built as one string: the IDs are decimal strings (they exceed
 * 2^53) and nothing in them needs escaping, so joining is exact and several times faster than a
 * generic serializer on 10,000-element arrays. `head` is the opening brace and any fields before
 * `ids`, ending in a comma.
 */
export function idsJson(head: string, ids: readonly bigint[]): string {
  return ids.length === 0 ? `${head}"ids":[]}` : `${head}"ids":["${ids.join('","')}"]}`;
}
