// The page's own state for the tag list: the query it sends to GET /v1/status. The answers'
// types are the HTTP contract's (src/contract/status.ts), which the server is typed by.

import type { StatusQuery } from '../contract/status.ts';

/** The tag list's query, every part set: search, sort and page, done by the server. */
export type TagQuery = Required<Omit<StatusQuery, 'after'>>;
