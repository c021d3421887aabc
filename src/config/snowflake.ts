import Type, { type Static } from 'typebox';
import { CLOCK_NAMES } from '../clocks/named-clock.ts';
import { ROLLBACK_LIMITS, ROLLBACK_POLICIES } from '../core/clock-policy.ts';
import { DEFAULT_LAYOUT, LAYOUT_PRESETS, getLayout } from '../core/layout.ts';
import {
  DEFAULT_OPERATION_TIMEOUT_MS,
  DEFAULT_TTL_MS,
  LEASE_TTL_BOUNDS,
  REGISTRY_NAME_PATTERN,
  REGISTRY_NAME_RULE,
} from '../registries/common.ts';
import {
  DEFAULT_LOCK_DIR,
  DEFAULT_STATIC_TTL_MS,
} from '../registries/static/static-worker-registry.ts';
import {
  DEFAULT_FENCED_WAIT_MS,
  DEFAULT_MAX_PEER_SKEW_MS,
  DEFAULT_SAFETY_MARGIN_MS,
  MAX_START_WAIT_MS,
  PEER_CLOCK_CHECKS,
  WORKER_OPTION_BOUNDS,
  leaseRenewIntervalMs,
} from '../core/lease-policy.ts';
import { SQL_IDENTIFIER, SQL_IDENTIFIER_RULE } from '../sql/sql-driver.ts';
import {
  backendUrl,
  duration,
  durationOrZero,
  integer,
  integerOrWord,
  oneOf,
  onOff,
  text,
} from './keys.ts';
import type { ConfigRule, Frozen } from './rules.ts';

/**
 * Snowflake mode: the worker registry and its lease, the layout, the clock and the rollback
 * policy. Bounds that a library component checks too (the registries' TTLs, the worker's options,
 * the rollback policy's limits) are imported from it; the rules below are the ones between keys,
 * including every combination the worker would refuse only once it runs.
 */

/** The generator's rollback policies, plus the worker's own `switch-worker`. */
export const WORKER_ROLLBACK_POLICIES = [...ROLLBACK_POLICIES, 'switch-worker'] as const;

const rollbackBound = (key: keyof typeof ROLLBACK_LIMITS, env: string, doc: string) =>
  integer({
    env,
    default: ROLLBACK_LIMITS[key].fallback,
    min: 0,
    max: ROLLBACK_LIMITS[key].max,
    doc,
  });

export const RollbackConfig = Type.Object(
  {
    policy: oneOf({
      env: 'IDMINT_ROLLBACK_POLICY',
      default: 'wait',
      values: WORKER_ROLLBACK_POLICIES,
      doc:
        'What to do when the clock goes back (docs/layouts.md#clock-rollback); ' +
        '`switch-worker` waits out small rollbacks and moves to another worker ID on a larger ' +
        'one. With the monotonic clock only wait, borrow and switch-worker are accepted.',
    }),
    maxBackwardMs: rollbackBound(
      'maxBackwardMs',
      'IDMINT_ROLLBACK_MAX_BACKWARD_MS',
      '`wait` and `switch-worker`, with the system clock only: the largest rollback that is ' +
        'waited out.',
    ),
    maxLeadMs: rollbackBound(
      'maxLeadMs',
      'IDMINT_ROLLBACK_MAX_LEAD_MS',
      '`borrow` only: how far issued time may run ahead of the clock (after a rollback, or ' +
        "when a millisecond's sequence is used up).",
    ),
    maxWaitMs: rollbackBound(
      'maxWaitMs',
      'IDMINT_ROLLBACK_MAX_WAIT_MS',
      'Every policy: how long a request may wait for the clock beyond the next time unit ' +
        "once a unit's sequence is used up; `borrow`: also once the lead is used up.",
    ),
    historyMs: rollbackBound(
      'historyMs',
      'IDMINT_ROLLBACK_HISTORY_MS',
      '`history` only (so with the system clock): the window of remembered sequences.',
    ),
  },
  { additionalProperties: false },
);

export const SnowflakeConfig = Type.Object(
  {
    enabled: onOff({
      env: 'IDMINT_SNOWFLAKE_ENABLED',
      default: true,
      doc: 'Serve snowflake mode (`/api/snowflake`, `/v1/snowflake`).',
    }),
    registry: backendUrl({
      env: 'IDMINT_WORKER_REGISTRY',
      default: 'static:0',
      role: 'worker-registry',
      doc:
        'Where the worker ID is leased: static:N, zookeeper://host:2181/name, ' +
        'etcd://host:2379/name, redis://host:6379/0 (or rediss://), or a postgres://, ' +
        'mysql://, mariadb:// or sqlite: URL.',
    }),
    cluster: text({
      env: 'IDMINT_WORKER_CLUSTER',
      default: 'idmint',
      doc:
        'Cluster name for the redis://, SQL and static registries: worker IDs are unique ' +
        'within it (static: on this ' +
        'host). ZooKeeper and etcd take it from the URL path.',
      pattern: REGISTRY_NAME_PATTERN,
      allowed: REGISTRY_NAME_RULE,
    }),
    table: text({
      env: 'IDMINT_WORKER_TABLE',
      default: 'worker_node',
      doc: 'Table of the SQL registry.',
      pattern: SQL_IDENTIFIER,
      allowed: SQL_IDENTIFIER_RULE,
    }),
    stateDir: text({
      env: 'IDMINT_WORKER_STATE_DIR',
      default: './data',
      doc:
        "static: directory of the state file that keeps the worker's last timestamp across " +
        'restarts.',
      pattern: /^[^\0]+$/,
      allowed: 'a directory path',
    }),
    lockDir: text({
      env: 'IDMINT_WORKER_LOCK_DIR',
      default: DEFAULT_LOCK_DIR,
      doc:
        'static: host-wide directory of worker-ID locks, the same for every idmint process ' +
        'of the host, so two of ' +
        'them (two directories, a server and idmint next) never run one worker ID of a ' +
        'cluster (docs/workers.md).',
      pattern: /^[^\0]+$/,
      allowed: 'a directory path',
    }),
    leaseTtlMs: durationOrZero({
      env: 'IDMINT_LEASE_TTL_MS',
      default: 0,
      min: LEASE_TTL_BOUNDS.min,
      max: LEASE_TTL_BOUNDS.max,
      zero: `the registry's default: ${DEFAULT_TTL_MS}; ${DEFAULT_STATIC_TTL_MS} for static`,
      doc:
        `Lease lifetime: a node that cannot renew stops issuing before it ends, and its ` +
        `worker ID is free after it. 0: the registry's default (${DEFAULT_TTL_MS / 1000} s; ` +
        `${DEFAULT_STATIC_TTL_MS / 1000} s for static).`,
    }),
    registryTimeoutMs: duration({
      env: 'IDMINT_REGISTRY_TIMEOUT_MS',
      default: DEFAULT_OPERATION_TIMEOUT_MS,
      min: 1,
      max: 600_000,
      doc:
        'Bound on connecting to the registry and on each round trip (REGISTRY_UNAVAILABLE): ' +
        'a start that cannot reach the registry fails within it, not once per step.',
    }),
    cacheFile: text({
      env: 'IDMINT_WORKER_CACHE_FILE',
      default: '',
      doc:
        "Leaf's weak dependency: keep the worker ID in this local file so the node can " +
        'restart while the coordinator is down (read docs/workers.md first). Empty: off.',
      pattern: /^[^\0]*$/,
      allowed: 'empty, or a file path',
    }),
    waitTimeoutMs: duration({
      env: 'IDMINT_SNOWFLAKE_WAIT_TIMEOUT_MS',
      default: DEFAULT_FENCED_WAIT_MS,
      min: WORKER_OPTION_BOUNDS.waitTimeoutMs.min,
      max: WORKER_OPTION_BOUNDS.waitTimeoutMs.max,
      doc:
        'How long a request that finds the generator fenced waits for the renewal due or in ' +
        'flight to confirm the lease (after a stall of the process) before LEASE_LOST; 0: ' +
        'refuse at once.',
    }),
    peerClockCheck: oneOf({
      env: 'IDMINT_PEER_CLOCK_CHECK',
      default: 'refuse',
      values: PEER_CLOCK_CHECKS,
      doc:
        "At start-up, compare the clock with the live peers' (Leaf's check): refuse to start, " +
        'warn, or skip when it is off by more than maxPeerSkewMs.',
    }),
    maxPeerSkewMs: integer({
      env: 'IDMINT_MAX_PEER_SKEW_MS',
      default: DEFAULT_MAX_PEER_SKEW_MS,
      min: WORKER_OPTION_BOUNDS.maxPeerSkewMs.min,
      max: WORKER_OPTION_BOUNDS.maxPeerSkewMs.max,
      doc:
        "Largest distance allowed from the mean of the live peers' clocks (Leaf: 5 s); not " +
        'with peerClockCheck off.',
    }),
    layout: oneOf({
      env: 'IDMINT_LAYOUT',
      default: DEFAULT_LAYOUT,
      values: LAYOUT_PRESETS,
      doc: 'Bit layout preset (docs/layouts.md); every node of a cluster must use the same.',
    }),
    // The layout decides the real limit (a rule below); 2^31-1 is the most any layout allows.
    datacenterId: integer({
      env: 'IDMINT_DATACENTER_ID',
      default: 0,
      min: 0,
      max: 2 ** 31 - 1,
      doc: 'Datacenter ID, for layouts with a datacenter field (`twitter`).',
    }),
    sequenceSpread: integerOrWord({
      env: 'IDMINT_SEQUENCE_SPREAD',
      default: 'layout',
      min: 0,
      max: 2 ** 29,
      word: 'layout',
      meaning: "the layout's: 100 for leaf, as Leaf, 0 for the others",
      doc:
        "Start each millisecond's sequence at a random value below this (Leaf uses 100), so " +
        'low-traffic IDs are not all even.',
    }),
    clock: oneOf({
      env: 'IDMINT_CLOCK',
      default: 'monotonic',
      values: CLOCK_NAMES,
      doc:
        'The clock snowflake IDs are made from (docs/layouts.md#choosing-the-clock): ' +
        'monotonic never goes back while the server runs; system shows every step of the ' +
        'system clock to the rollback policy.',
    }),
    rollback: RollbackConfig,
  },
  { additionalProperties: false },
);

/** The validated snowflake part of the configuration. */
type SnowflakeSection = Frozen<Static<typeof SnowflakeConfig>>;

/** The spread the worker is given: undefined for `layout`, so the layout's applies. */
export function configuredSpread(snowflake: SnowflakeSection): number | undefined {
  return snowflake.sequenceSpread === 'layout' ? undefined : snowflake.sequenceSpread;
}

/** The lease TTL the worker will get: the configured one, or the registry's default. */
export function effectiveLeaseTtlMs(snowflake: SnowflakeSection): number {
  if (snowflake.leaseTtlMs !== 0) return snowflake.leaseTtlMs;
  return snowflake.registry.startsWith('static:') ? DEFAULT_STATIC_TTL_MS : DEFAULT_TTL_MS;
}

/**
 * Where each rollback bound takes effect; set anywhere else it would do nothing, so it is refused.
 * `maxWaitMs` is absent: every policy waits for the next time unit when one is used up.
 */
const ROLLBACK_BOUND_SCOPE = {
  maxBackwardMs: {
    where: 'the wait and switch-worker policies with snowflake.clock = system',
    applies: (s: SnowflakeSection) =>
      s.clock === 'system' &&
      (s.rollback.policy === 'wait' || s.rollback.policy === 'switch-worker'),
  },
  maxLeadMs: {
    where: 'the borrow policy',
    applies: (s: SnowflakeSection) => s.rollback.policy === 'borrow',
  },
  historyMs: {
    where: 'the history policy',
    applies: (s: SnowflakeSection) => s.rollback.policy === 'history',
  },
} as const;

/** Rules between the snowflake keys. A disabled mode is not checked: none of its keys act. */
export const SNOWFLAKE_RULES: readonly ConfigRule<SnowflakeSection>[] = [
  (s, check) => {
    const layout = getLayout(s.layout);
    if (s.datacenterId > layout.maxDatacenterId) {
      check.fail(
        'snowflake.datacenterId',
        `layout "${layout.name}" allows datacenter IDs from 0 to ${layout.maxDatacenterId}`,
      );
    }
    const maxSpread = Math.floor((layout.maxSequence + 1) / 2);
    if (s.sequenceSpread !== 'layout' && s.sequenceSpread > maxSpread)
      check.fail(
        'snowflake.sequenceSpread',
        `layout "${layout.name}" allows a spread from 0 to ${maxSpread} (half its sequence space)`,
      );
  },
  // The worker renews a lease at intervals carved out of the TTL after its safety margin; a TTL
  // too short for that would pass here and fail at start-up, or renew every millisecond.
  (s, check) => {
    if (!s.enabled || s.leaseTtlMs === 0) return;
    let interval: number;
    try {
      interval = leaseRenewIntervalMs(s.leaseTtlMs, { safetyMarginMs: DEFAULT_SAFETY_MARGIN_MS });
    } catch (error) {
      return check.fail('snowflake.leaseTtlMs', (error as Error).message);
    }
    const shortest = WORKER_OPTION_BOUNDS.renewIntervalMs.min;
    if (interval < shortest) {
      check.fail(
        'snowflake.leaseTtlMs',
        `after the ${DEFAULT_SAFETY_MARGIN_MS} ms safety margin the lease would be renewed ` +
          `every ${interval} ms, below the shortest renewal interval (${shortest} ms): raise ` +
          `the TTL`,
      );
    }
  },
  // A node restarted after a kill waits until its clock passes the horizon its predecessor
  // reserved: the fence (TTL minus margin) plus the borrow lead. The worker refuses to wait longer
  // than MAX_START_WAIT_MS, so a lead past that would make every such restart fail.
  (s, check) => {
    if (!s.enabled || s.rollback.policy !== 'borrow') return;
    const fence = effectiveLeaseTtlMs(s) - DEFAULT_SAFETY_MARGIN_MS;
    if (fence + s.rollback.maxLeadMs > MAX_START_WAIT_MS) {
      check.fail(
        'snowflake.rollback.maxLeadMs',
        `with a ${effectiveLeaseTtlMs(s)} ms lease it must be at most ` +
          `${MAX_START_WAIT_MS - fence} (start-up waits at most ${MAX_START_WAIT_MS} ms)`,
      );
    }
  },
  (s, check) => {
    if (!s.enabled) return;
    const policy = s.rollback.policy;
    if (s.clock === 'monotonic' && (policy === 'refuse' || policy === 'history')) {
      check.fail(
        'snowflake.rollback.policy',
        `"${policy}" never acts with snowflake.clock = monotonic: ` +
          'set snowflake.clock (IDMINT_CLOCK) to system, or use wait, borrow or switch-worker',
      );
    }
    if (policy === 'switch-worker' && s.registry.startsWith('static:')) {
      check.fail(
        'snowflake.rollback.policy',
        '"switch-worker" needs a coordinated registry: a static one has a single worker ID',
      );
    }
    for (const [key, scope] of Object.entries(ROLLBACK_BOUND_SCOPE)) {
      if (check.isSet(`snowflake.rollback.${key}`) && !scope.applies(s)) {
        check.fail(
          `snowflake.rollback.${key}`,
          `applies only to ${scope.where} (here: policy ${policy}, clock ${s.clock}), so it ` +
            `would have no effect`,
        );
      }
    }
    if (check.isSet('snowflake.maxPeerSkewMs') && s.peerClockCheck === 'off') {
      check.fail('snowflake.maxPeerSkewMs', 'has no effect with snowflake.peerClockCheck = off');
    }
  },
];
