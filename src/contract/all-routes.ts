import * as ids from './ids.ts';
import * as operations from './operations.ts';
import type { RouteContract } from './route.ts';
import * as segment from './segment.ts';
import * as snowflake from './snowflake.ts';
import * as status from './status.ts';
import * as tags from './tags.ts';
import * as tinyid from './tinyid.ts';

/**
 * Every route contract the contract modules export (the families' one per family), for the
 * checks that hold the server and the contract together: a contract added to any module is in it.
 */
export const ALL_ROUTES: readonly RouteContract[] = [
  ...ids.FAMILY_ROUTES,
  ...[ids, operations, segment, snowflake, status, tags, tinyid].flatMap((module) =>
    Object.values(module).filter(isRoute),
  ),
];

function isRoute(value: unknown): value is RouteContract {
  return typeof value === 'object' && value !== null && 'operationId' in value && 'url' in value;
}
