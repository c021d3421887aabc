// The shape of GET /v1/status (src/server/routes/status.ts has the schema the server answers with).

export interface RouteActivity {
  readonly route: string;
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly p99Ms: number | null;
}

export interface TagStatus {
  readonly tag: string;
  readonly serving: 'memory' | 'loading' | 'failing' | 'not-loaded';
  readonly step: number;
  readonly tagStep: number;
  readonly remaining: number;
  readonly fill: number;
  readonly range: { readonly start: string; readonly end: string; readonly position: string } | null;
  readonly next: { readonly start: string; readonly end: string } | null;
  readonly nextLoad: 'ready' | 'loading' | 'pending' | 'failing';
  readonly idsUntilNextLoad: number | null;
  readonly loads: number;
  readonly loadFailures: number;
  readonly lastLoadMs: number | null;
  readonly maxLoadMs: number;
  readonly lastError: { readonly code: string; readonly message: string | null } | null;
  readonly idsPerSecond: number | null;
  readonly rates: readonly number[] | null;
  readonly steps: readonly { readonly at: string; readonly step: number; readonly ms: number }[];
}

export interface SegmentStatus {
  readonly store: string;
  readonly lastTagRefreshAt: string | null;
  readonly tagRefreshFailures: number;
  readonly total: number;
  readonly inUse: number;
  readonly matched: number;
  readonly offset: number;
  readonly limit: number;
  readonly nextAfter: string | null;
  readonly tags: readonly TagStatus[];
}

export interface SnowflakeStatus {
  readonly layout: {
    readonly name: string;
    readonly timeBits: number;
    readonly datacenterBits: number;
    readonly workerBits: number;
    readonly sequenceBits: number;
    readonly timeUnitMs: number;
    readonly epoch: string;
    readonly expiresAt: string;
    readonly maxIdsPerSecond: number;
  };
  readonly workerId: number;
  readonly datacenterId: number;
  readonly registry: string;
  readonly status: 'active' | 'fenced' | 'recovering' | 'closed';
  readonly validUntil: string | null;
  readonly expiresInMs: number | null;
  readonly horizon: string | null;
  readonly lastRenewedAt: string | null;
  readonly renewFailures: number;
  readonly leaseLosses: number;
  readonly workerSwitches: number;
  readonly lastError: string | null;
  readonly peerClock: {
    readonly check: string;
    readonly checkedAt: string;
    readonly peers: number;
    readonly offsetMs: number | null;
    readonly maxPeerSkewMs: number;
    readonly skipped: string | null;
  } | null;
  readonly rollbacks: { readonly count: number; readonly policy: string };
  readonly idsPerSecond: number | null;
  readonly rates: readonly number[] | null;
}

export interface Status {
  readonly time: string;
  readonly version: string;
  readonly uptimeSeconds: number;
  readonly auth: { readonly enabled: boolean; readonly admin: boolean };
  readonly server: {
    readonly requests: { readonly requestsPerSecond: number; readonly rates: readonly number[]; readonly routes: readonly RouteActivity[] } | null;
    readonly errors: readonly { readonly code: string; readonly count: number }[];
    readonly health: readonly { readonly name: string; readonly ok: boolean; readonly detail: string }[];
  };
  readonly segment: SegmentStatus | null;
  readonly snowflake: SnowflakeStatus | null;
}

/** The tag list's query: search, sort and page, done by the server. */
export interface TagQuery {
  readonly q: string;
  readonly sort: 'tag' | 'fill' | 'remaining' | 'rate' | 'step' | 'latency' | 'failures';
  readonly order: 'asc' | 'desc';
  readonly offset: number;
  readonly limit: number;
  /** Every tag, or only those in use on this node. */
  readonly tags: 'all' | 'in-use';
}
