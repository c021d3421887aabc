import Type from 'typebox';
import {
  MAX_SEGMENT_DATABASES,
  MAX_TAG_STEP,
  SEGMENT_SERVICE_BOUNDS,
} from '../core/segment-limits.ts';
import { DEFAULT_MAX_PEER_SKEW_MS } from '../core/lease-policy.ts';
import { DEFAULT_STEP_POLICY } from '../core/step-policy.ts';
import { SQL_IDENTIFIER, SQL_IDENTIFIER_RULE } from '../sql/sql-driver.ts';
import { DEFAULT_SEGMENT_STORE_URL } from '../backends/sqlite/sqlite-backend.ts';
import {
  DEFAULT_FENCE_RANGES,
  DEFAULT_SEGMENT_TABLE,
  DEFAULT_STORE_TIMEOUT_MS,
  FENCE_RANGES_BOUNDS,
  STORE_TIMEOUT_BOUNDS,
} from '../stores/store-support.ts';
import type { Static } from 'typebox';
import { backendUrl, backendUrlList, decimal, duration, integer, onOff, text } from './keys.ts';
import type { ConfigRule, Frozen } from './rules.ts';

/**
 * Segment mode: the store and the service over it. Where a library component checks the same
 * value (SegmentService, the stores, the step policy), its bound is imported, never retyped; the
 * configuration's own upper limits are tighter, operator-sized ones, and a test proves the library
 * accepts each of them.
 */

const service = SEGMENT_SERVICE_BOUNDS;

/** How long an issuer lease runs by default: a few renewals (every 3 s) fit in it. */
export const DEFAULT_ISSUER_TTL_MS = 10_000;
/** Tries to reach an issuer, by default: a tenth of the default wait for a range. */
export const DEFAULT_ISSUER_RETRY_MS = 200;
/**
 * An advertised URL: empty, or http(s) with a host and a non-zero port; wildcard hosts (`0.0.0.0`,
 * `::`, `[::]`) and port 0 name no node another node could reach.
 */
const ADVERTISE_URL =
  /^$|^https?:\/\/(?!0\.0\.0\.0[:/]|\[::\][:/])[A-Za-z0-9.\-_[\]:%]+:(?!0+(?:\/|$))[0-9]{1,5}\/?$/;

export const SegmentConfig = Type.Object(
  {
    enabled: onOff({
      env: 'IDMINT_SEGMENT_ENABLED',
      default: true,
      doc: 'Serve segment mode (`/api/segment`, `/v1/segment`, `/v1/tags`).',
    }),
    store: backendUrl({
      env: 'IDMINT_SEGMENT_STORE',
      default: DEFAULT_SEGMENT_STORE_URL,
      role: 'segment-store',
      doc:
        'Where tags and their ranges live: sqlite:FILE, sqlite::memory:, postgres://, ' +
        'mysql:// or mariadb://, redis:// or rediss://.',
    }),
    table: text({
      env: 'IDMINT_SEGMENT_TABLE',
      default: DEFAULT_SEGMENT_TABLE,
      doc:
        "Table (SQL) or key prefix (Redis) of the tags; Leaf's own `leaf_alloc` by default, " +
        'so a Leaf database works as is.',
      pattern: SQL_IDENTIFIER,
      allowed: SQL_IDENTIFIER_RULE,
    }),
    timeoutMs: duration({
      env: 'IDMINT_SEGMENT_TIMEOUT_MS',
      default: DEFAULT_STORE_TIMEOUT_MS,
      min: STORE_TIMEOUT_BOUNDS.min,
      max: 600_000,
      doc:
        'Each store call is abandoned after this long (STORE_UNAVAILABLE); a range whose ' +
        'allocation timed out is skipped, never guessed. A start that cannot reach the store ' +
        '(each database of a set) fails within it, not once per step.',
    }),
    poolSize: integer({
      env: 'IDMINT_SEGMENT_POOL_SIZE',
      default: 10,
      min: 1,
      max: 1000,
      doc: 'Database connections in the pool (PostgreSQL, MySQL).',
    }),
    prefetchThreshold: decimal({
      env: 'IDMINT_SEGMENT_PREFETCH_THRESHOLD',
      default: service.prefetchThreshold.fallback,
      min: service.prefetchThreshold.min,
      max: service.prefetchThreshold.max,
      doc: 'Share of a range issued before the next one is loaded in the background (Leaf: 10%).',
    }),
    waitTimeoutMs: duration({
      env: 'IDMINT_SEGMENT_WAIT_TIMEOUT_MS',
      default: service.waitTimeoutMs.fallback,
      min: service.waitTimeoutMs.min,
      max: 600_000,
      doc: 'How long a request waits for a range being loaded before SEGMENTS_NOT_READY.',
    }),
    retryAfterMs: duration({
      env: 'IDMINT_SEGMENT_RETRY_AFTER_MS',
      default: service.retryAfterMs.fallback,
      min: service.retryAfterMs.min,
      max: 600_000,
      doc:
        'After a failed load, how long requests that find nothing buffered fail fast before ' +
        'the store is tried again.',
    }),
    tagRefreshMs: duration({
      env: 'IDMINT_SEGMENT_TAG_REFRESH_MS',
      default: service.tagRefreshMs.fallback,
      min: service.tagRefreshMs.min,
      max: 86_400_000,
      doc:
        'How often the tags changed since the last read are read (tags created elsewhere ' +
        'appear, steps and opaque marks change); 0: never.',
    }),
    tagFullRefreshMs: duration({
      env: 'IDMINT_SEGMENT_TAG_FULL_REFRESH_MS',
      default: service.tagFullRefreshMs.fallback,
      min: service.tagFullRefreshMs.min,
      max: 86_400_000,
      doc:
        'How often a refresh reads every tag instead of the changes, which is how deleted ' +
        'tags go and how writes that did not touch update_time are seen; 0: every refresh.',
    }),
    periodSkewMs: duration({
      env: 'IDMINT_SEGMENT_PERIOD_SKEW_MS',
      default: 2 * DEFAULT_MAX_PEER_SKEW_MS,
      min: 0,
      max: 600_000,
      doc:
        "The most two nodes' clocks may differ, for periodic tags: after its clock passes a " +
        "period boundary a node issues none of the tag's IDs for this long, so no node issues " +
        "a new period's ID before the boundary by any node's clock (default: twice " +
        "snowflake.maxPeerSkewMs's default, as each node is within it of the peers' mean; " +
        'docs/segments.md, Periodic sequences).',
    }),
    maxStep: integer({
      env: 'IDMINT_SEGMENT_MAX_STEP',
      default: DEFAULT_STEP_POLICY.maxStep,
      min: 1,
      max: MAX_TAG_STEP,
      doc:
        "The dynamic step never grows past this, unless a tag's own step is larger (Leaf: " +
        '1,000,000).',
    }),
    rangeDurationMs: integer({
      env: 'IDMINT_SEGMENT_RANGE_DURATION_MS',
      default: DEFAULT_STEP_POLICY.growBelowMs,
      min: 1,
      max: 86_400_000,
      doc:
        'Target lifetime of a range: one used up faster doubles the step, one lasting over ' +
        'twice as long halves it (Leaf: 15 min).',
    }),
    fenceRanges: integer({
      env: 'IDMINT_SEGMENT_FENCE_RANGES',
      default: DEFAULT_FENCE_RANGES,
      min: FENCE_RANGES_BOUNDS.min,
      max: FENCE_RANGES_BOUNDS.max,
      doc:
        "When the store's database is found on a new history (a promoted replica, a " +
        'restarted Redis, a ' +
        "table first seen), every tag's max_id is raised by this many of the largest ranges " +
        'a node may ' +
        "take, max(segment.maxStep, the tag's step), once, before any ID is issued from it. " +
        'It must cover ' +
        'what a lagging replica can lose (docs/segments.md, Failover and restore).',
    }),
    issuerTtlMs: duration({
      env: 'IDMINT_SEGMENT_ISSUER_TTL_MS',
      default: DEFAULT_ISSUER_TTL_MS,
      // The 1 s safety margin and two renewals must fit in it (leaseRenewIntervalMs).
      min: 1500,
      max: 600_000,
      doc:
        "The issuer lease of a cluster-ordered tag, by the store's clock: its holder renews it " +
        'every third of what is left after a 1 s safety margin (3 s at most) and stops issuing ' +
        'that margin before it could run out; after a holder dies, the tag has no issuer for up ' +
        'to this long (docs/segments.md, Cluster order).',
    }),
    issuerRetryMs: duration({
      env: 'IDMINT_SEGMENT_ISSUER_RETRY_MS',
      default: DEFAULT_ISSUER_RETRY_MS,
      min: 10,
      max: 60_000,
      doc:
        "How long a node waits between tries to reach a cluster-ordered tag's issuer (claim " +
        'the lease, or forward to its holder) while a request is waiting for one.',
    }),
    advertiseUrl: text({
      env: 'IDMINT_SEGMENT_ADVERTISE_URL',
      default: '',
      doc:
        'The URL other nodes reach this node at, to forward requests for the cluster-ordered ' +
        'tags it issues; empty: http://host:port of the listen address (refused for a ' +
        'wildcard host such as 0.0.0.0).',
      pattern: ADVERTISE_URL,
      allowed: 'empty, or http(s)://host:port with a host other nodes can reach, not 0.0.0.0 or ::',
    }),
    stores: backendUrlList({
      env: 'IDMINT_SEGMENT_STORES',
      default: [],
      role: 'segment-store',
      max: MAX_SEGMENT_DATABASES,
      doc:
        'A set of databases in place of segment.store, so segment mode has no single database ' +
        'to lose: the one at index r issues only IDs ≡ r (mod their number). Same order ' +
        'everywhere; after changing it, run `idmint db init` (docs/segments.md, Several ' +
        'databases).',
    }),
  },
  { additionalProperties: false },
);

/** Rules between the segment keys. */
export const SEGMENT_RULES: readonly ConfigRule<Frozen<Static<typeof SegmentConfig>>>[] = [
  (segment, check) => {
    // Two places naming the databases would leave it unclear which one serves.
    if (segment.stores.length > 0 && check.isSet('segment.store'))
      check.fail(
        'segment.stores',
        'segment.store and segment.stores are both set: use segment.stores alone for a set ' +
          'of databases, segment.store alone for one',
      );
  },
];
