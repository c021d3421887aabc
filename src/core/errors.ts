/**
 * The one error type idmint throws, and the registry of every error code it can carry.
 *
 * Codes are stable API: clients branch on them, so a code is never renamed or reused for a
 * different condition. Every code here must be documented in docs/errors.md (a test checks).
 */

/** What a code means for a caller: the HTTP status it maps to, and whether retrying can help. */
export interface ErrorCodeInfo {
  /** HTTP status the server answers with. */
  readonly status: number;
  /** True when the same request may succeed later (the server adds `Retry-After`). */
  readonly retryable: boolean;
  /** One line for docs and `--help`: when this code is raised. */
  readonly summary: string;
}

/** Every error code idmint raises. Add new codes here, and document them in docs/errors.md. */
export const ERROR_CODES = {
  INVALID_ARGUMENT: {
    status: 400,
    retryable: false,
    summary: 'An argument (count, tag, option, flag) is missing, malformed or out of range.',
  },
  INVALID_ID: {
    status: 400,
    retryable: false,
    summary:
      'An ID to decode is malformed for its format (decimal, UUID, ULID, ObjectId), does ' +
      'not fit the layout, or is not an opaque ID of the tag under a configured key.',
  },
  LAYOUT_INVALID: {
    status: 500,
    retryable: false,
    summary: 'A bit layout is inconsistent: bit counts, epoch or time unit out of range.',
  },
  CONFIG_INVALID: {
    status: 500,
    retryable: false,
    summary:
      'A configuration value is invalid; the message names the key, the value and what is allowed.',
  },
  DRIVER_MISSING: {
    status: 500,
    retryable: false,
    summary:
      'The database or coordinator driver a URL needs is not installed; the message names ' +
      'the npm package.',
  },
  UNAUTHORIZED: {
    status: 401,
    retryable: false,
    summary: 'The request carries no bearer token, or one that is not configured.',
  },
  FORBIDDEN: {
    status: 403,
    retryable: false,
    summary:
      'The token is valid but not allowed this tag or route (admin routes need the admin token).',
  },
  ROUTE_NOT_FOUND: {
    status: 404,
    retryable: false,
    summary: 'No route answers this method and path (the message points to /openapi.json).',
  },
  METHOD_NOT_ALLOWED: {
    status: 405,
    retryable: false,
    summary:
      'The path exists but not for this method; the Allow header lists the methods it takes.',
  },
  REQUEST_TIMEOUT: {
    status: 408,
    retryable: false,
    summary:
      'The request did not arrive whole within api.requestTimeoutMs; the connection is closed.',
  },
  MODE_DISABLED: {
    status: 404,
    retryable: false,
    summary:
      'The route belongs to a mode (segment or snowflake) that this server runs with turned off.',
  },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    retryable: false,
    summary: 'The request body is larger than the configured limit (api.bodyLimit).',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    retryable: false,
    summary: 'The request body is not JSON (send Content-Type: application/json).',
  },
  EXPECTATION_FAILED: {
    status: 417,
    retryable: false,
    summary:
      'The request has an Expect header other than 100-continue, the only expectation the ' +
      'server meets.',
  },
  HEADERS_TOO_LARGE: {
    status: 431,
    retryable: false,
    summary: "The request's headers are larger than the server accepts (16 KiB in all).",
  },
  SERVER_UNAVAILABLE: {
    status: 503,
    retryable: true,
    summary:
      'Client side: the idmint server could not be reached, or did not answer within the timeout.',
  },
  INTERNAL_ERROR: {
    status: 500,
    retryable: false,
    summary: 'An unexpected failure (a bug); the server logs it with its stack.',
  },
  TAG_NOT_FOUND: {
    status: 404,
    retryable: false,
    summary: 'No business tag of that name exists in the segment store.',
  },
  TAG_EXISTS: {
    status: 409,
    retryable: false,
    summary: 'A business tag of that name already exists.',
  },
  SEGMENTS_NOT_READY: {
    status: 503,
    retryable: true,
    summary:
      "The tag's buffered ranges are used up and loading the next one did not finish in " +
      'time, or the segment service is shutting down.',
  },
  STORE_UNAVAILABLE: {
    status: 503,
    retryable: true,
    summary:
      'The segment store (database) failed or timed out, and no buffered range is left to ' +
      'serve from.',
  },
  TAG_MISCONFIGURED: {
    status: 500,
    retryable: false,
    summary:
      "A tag's stored row allows no allocation (a step of 0 or less, a negative max_id, " +
      "written outside idmint; or a residue class that is not the store's, in a set of " +
      'databases); fix the row or the configuration.',
  },
  ID_SPACE_EXHAUSTED: {
    status: 503,
    retryable: false,
    summary:
      "A tag's next range would pass 2^63-1; nothing is allocated rather than a wrapped range.",
  },
  REGISTRY_UNAVAILABLE: {
    status: 503,
    retryable: true,
    summary: 'The worker registry (coordinator) cannot be reached.',
  },
  WORKER_IDS_EXHAUSTED: {
    status: 503,
    retryable: true,
    summary:
      'Every worker ID the layout allows is held by a live node; the message names the limit.',
  },
  CLOCK_MOVED_BACKWARDS: {
    status: 503,
    retryable: true,
    summary:
      'The clock is behind the last timestamp used, by more than the rollback policy tolerates.',
  },
  CLOCK_SKEW: {
    status: 503,
    retryable: true,
    summary:
      "The local clock is further from the mean of the live peers' clocks than the " +
      'configured threshold, so the worker refuses to start.',
  },
  LEASE_LOST: {
    status: 503,
    retryable: true,
    summary:
      "The worker ID's lease is not confirmed, so the generator is fenced and issues no IDs " +
      'until it is renewed.',
  },
  ISSUER_UNAVAILABLE: {
    status: 503,
    retryable: true,
    summary:
      'A cluster-ordered tag has no issuer this node can reach in time: its lease is held by ' +
      'a node that does not answer, or is changing hands, or its store cannot be reached.',
  },
  MONOTONIC_OVERFLOW: {
    status: 503,
    retryable: true,
    summary:
      "A monotonic ULID generator's 80-bit random part would overflow within its " +
      "millisecond (the ULID spec's error); the next millisecond starts afresh.",
  },
  OPAQUE_DOMAIN_EXHAUSTED: {
    status: 503,
    retryable: false,
    summary:
      "A dense ID is past its opaque domain's limit, so it has no opaque form; nothing is " +
      'issued rather than a wrapped or repeated ID.',
  },
  OPAQUE_UNAVAILABLE: {
    status: 503,
    retryable: false,
    summary:
      'Opaque IDs are asked for (an opaque tag, an opaque route) but not set up here: the ' +
      'server has no opaque keys (IDMINT_OPAQUE_KEYS), or the segment table lacks the ' +
      'opaque column (idmint db init adds it).',
  },
  OPAQUE_RANGE_REFUSED: {
    status: 409,
    retryable: false,
    summary:
      "A range of dense IDs (the range route, TinyId's routes) is asked for an opaque tag: " +
      'a raw range would show what its opaque IDs hide, so none is handed out.',
  },
  ORDERED_RANGE_REFUSED: {
    status: 409,
    retryable: false,
    summary:
      "A range a caller issues itself (the client's local mode, TinyId's segment routes) is " +
      'asked for a cluster-ordered tag: IDs issued later from it would break the order.',
  },
  RANGES_EXHAUSTED: {
    status: 503,
    retryable: true,
    summary:
      "Client side, local mode: the tag's held ranges are used up and no server answered a " +
      'range request; the client keeps trying by itself.',
  },
  PERIOD_SEQUENCE_EXHAUSTED: {
    status: 503,
    retryable: false,
    summary:
      "A periodic tag's sequence has used every number its {seq:N} digits hold in the current " +
      'period; nothing is issued (never wrapped) until the next period.',
  },
  PERIOD_SWITCHING: {
    status: 503,
    retryable: true,
    summary:
      'A periodic tag is at its period boundary: the node waits out the allowed clock skew ' +
      'before issuing IDs of the new period; retry shortly.',
  },
  PERIODIC_RANGE_REFUSED: {
    status: 409,
    retryable: false,
    summary:
      "A range (the range route, TinyId's segment routes) is asked for a periodic tag: its IDs " +
      "would be issued on the caller's clock, outside the period boundary rule.",
  },
  PERIODIC_NOT_NUMERIC: {
    status: 409,
    retryable: false,
    summary:
      "A periodic tag's template prints letters or separators, and the route asked answers " +
      "numbers only (Leaf's segment route, TinyId's routes).",
  },
  TIME_OVERFLOW: {
    status: 503,
    retryable: false,
    summary:
      'The time field of a layout or an ID family is used up: the next ID would wrap or ' +
      'turn negative, so none is issued.',
  },
} as const satisfies Record<string, ErrorCodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Structured details attached to an error, for logs and JSON error bodies. */
export type ErrorDetails = Readonly<Record<string, string | number | boolean | null>>;

/**
 * The error idmint throws for every known failure. `code` is stable; `message` is for humans and
 * says what is wrong and, where it helps, what is allowed.
 */
export class IdMintError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  readonly details: ErrorDetails | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options?: { cause?: unknown; details?: ErrorDetails },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'IdMintError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
    this.retryable = ERROR_CODES[code].retryable;
    this.details = options?.details;
  }
}

/** True when `error` is an IdMintError, optionally with the given code. */
export function isIdMintError(error: unknown, code?: ErrorCode): error is IdMintError {
  return error instanceof IdMintError && (code === undefined || error.code === code);
}
