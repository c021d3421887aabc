import { resolveLayout } from '../../../src/core/layout.ts';
import { SnowflakeGenerator } from '../../../src/core/snowflake.ts';
import { workerRollback } from '../../../src/service/snowflake-worker.ts';
import { seededRandom } from '../random.ts';
import { DriftClock } from './drift-clock.ts';
import { Checker } from './invariants.ts';
import { drawParams, scheduleNodes, type ScheduleParams } from './schedule.ts';
import { SimCoordinator } from './sim-coordinator.ts';
import { SimNetwork } from './sim-network.ts';
import { SimNode, type GeneratorFactory, type NodeCounts } from './sim-node.ts';
import { World } from './world.ts';

/**
 * The lease terms of every schedule: the production defaults (TTL 10 s, margin 1 s, 3 s; a 3 s
 * margin under switch-worker, see SWITCH_MARGIN_MS).
 */
export const TTL_MS = 10_000;
/**
 * Three nodes share two worker IDs, so one always waits to take over; eight under switch-worker,
 * so a node has an ID to move to.
 */
export const NODES = 3;
export const WORKER_IDS = 2;
export const SWITCH_WORKER_IDS = 8;
/** Virtual time one schedule runs. */
export const DURATION_MS = 60_000;
/** Registry time 0 is this instant (a node clock reads it plus its offset). */
const EPOCH = Date.UTC(2027, 0, 1);

export interface SimOptions {
  /** The generator each lease gets: the real one unless a test breaks it on purpose. */
  readonly generator?: GeneratorFactory;
  /** The safety margin the holders run with (default 1,000 ms; 0 is allowed, and unsafe). */
  readonly marginMs?: number;
  /**
   * Invariants counted (tally `<name> broken (tolerated)`) instead of stopping the run, to show
   * what else still holds when one is given up.
   */
  readonly tolerate?: readonly string[];
  /** The largest clock drift a schedule draws (default MAX_DRIFT, under margin / TTL). */
  readonly maxDrift?: number;
  /**
   * Test only, a broken coordinator whose renewals may end a lease earlier than an earlier one
   * left it (with the schedules' shortened grants).
   */
  readonly renewMayShorten?: boolean;
  /** Overrides of what the seed draws (after drawing, so the rest of the schedule is unchanged). */
  readonly params?: Partial<ScheduleParams>;
  /** How many of the last events a failure shows. */
  readonly logSize?: number;
  /**
   * Test only, a broken ZooKeeper flavour: its session's requests may land out of order and
   * twice, as they never do over its TCP connection, which its tokenless release relies on.
   */
  readonly zookeeperUnordered?: boolean;
  readonly durationMs?: number;
}

export interface SimResult {
  readonly seed: number;
  readonly params: ScheduleParams;
  /** The first invariant broken, if any. */
  readonly violation: string | undefined;
  /** The schedule's last events (all of them up to logSize). */
  readonly log: string[];
  readonly events: number;
  readonly issued: number;
  /** The sum of the IDs issued, mod 2^64 (a replay must match it). */
  readonly idSum: bigint;
  readonly takeovers: number;
  readonly reclaims: number;
  readonly counts: NodeCounts;
  /** How often each kind of fault and lease event happened. */
  readonly tally: ReadonlyMap<string, number>;
}

const realGenerator: GeneratorFactory = (
  { workerId, lastTimestamp },
  { clock, layout, rollback },
) => new SnowflakeGenerator({ clock: clock.clock, layout, workerId, lastTimestamp, rollback });

/** The layout of borrow schedules: 2 sequence bits (4 IDs per ms), so bursts borrow. */
const BORROW_LAYOUT = resolveLayout({
  name: 'sim-borrow',
  timeBits: 51,
  workerBits: 10,
  sequenceBits: 2,
  epoch: Date.UTC(2026, 0, 1),
});

/**
 * Runs one seeded schedule: three nodes running the real LeaseHolder over the simulated
 * registry, every choice drawn from `seed`, so a seed replays exactly. Between two events the
 * code under test runs until it waits again (one macrotask turn drains its promise chains), so
 * the order of everything it does is fixed by the seed too.
 */
export async function simulate(seed: number, options: SimOptions = {}): Promise<SimResult> {
  const world = new World(seed, seededRandom(seed), options.logSize ?? 40);
  const params: ScheduleParams = { ...drawParams(world, options.maxDrift), ...options.params };
  const checker = new Checker(world, options.tolerate);
  const workerIds = params.switchWorker ? SWITCH_WORKER_IDS : WORKER_IDS;
  const coordinator = new SimCoordinator(workerIds, TTL_MS, params.style, (...write) =>
    checker.wrote(...write),
  );
  checker.watch(coordinator);
  coordinator.renewMayShorten = options.renewMayShorten ?? false;
  if (params.shortGrants) {
    coordinator.grant = () => {
      world.count('renewal granted less than the TTL');
      return Math.round(world.uniform(TTL_MS / 2, TTL_MS));
    };
  }
  const network = new SimNetwork(world, params.network);
  // borrow's lead is reached only once a time unit's sequence runs out: 4 IDs per ms, then.
  const layout = params.rollback === 'borrow' ? BORROW_LAYOUT : resolveLayout(undefined);
  // The terms' and the generators' parts of the rollback option, split as SnowflakeWorker does.
  const rollback = workerRollback(
    params.switchWorker
      ? { policy: 'switch-worker' }
      : params.rollback === 'borrow'
        ? { policy: 'borrow', maxLeadMs: params.leadMs }
        : { policy: 'wait' },
  );
  const nodes: SimNode[] = [];
  for (let i = 0; i < NODES; i++) {
    const offset = world.uniform(-params.offsetMs, params.offsetMs);
    nodes.push(
      new SimNode(world, coordinator, network, checker, {
        name: `node${i}`,
        port: 7000 + i,
        clock: new DriftClock(EPOCH + offset, 0, params.drift),
        layout,
        maxWorkers: workerIds,
        switchWorker: rollback.switchWorker,
        rollback: rollback.generatorRollback,
        leadMs: rollback.leadMs,
        marginMs: options.marginMs ?? params.marginMs,
        peerCheck: params.peerCheck,
        maxPeerSkewMs: params.maxPeerSkewMs,
        lagMs: params.lagMs,
        callTimeoutMs: params.callTimeoutMs,
        signals: params.signals,
        ordered: options.zookeeperUnordered !== true,
        restartMs: 1000,
        generator: options.generator ?? realGenerator,
      }),
    );
  }
  scheduleNodes(world, nodes, params);
  const end = options.durationMs ?? DURATION_MS;
  let events = 0;
  for (;;) {
    const event = world.queue.pop();
    if (event === undefined || event.at > end) break;
    if (event.at > world.now) {
      world.now = event.at;
      for (const node of nodes) node.setup.clock.advanceTo(world.now);
    }
    events++;
    if (event.run()) await drain();
    for (const node of nodes) {
      const able = node.able();
      if (able !== undefined) checker.able(able.issuer, able.validUntil);
      node.checkRetired();
    }
    if (world.failed) break;
  }
  const counts: NodeCounts = {
    starts: 0,
    startFailures: 0,
    leaseLosses: 0,
    fenced: 0,
    unexpected: 0,
  };
  for (const node of nodes) {
    for (const key of Object.keys(counts) as (keyof NodeCounts)[]) counts[key] += node.counts[key];
  }
  return {
    seed,
    params,
    violation: checker.violation,
    log: world.log.lines(),
    events,
    issued: checker.issuedCount,
    idSum: checker.idSum,
    takeovers: checker.takeovers,
    reclaims: checker.reclaims,
    counts,
    tally: world.tally,
  };
}

/** Lets the code under test run until it waits on something the simulation decides. */
function drain(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
