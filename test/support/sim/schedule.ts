import { DEFAULT_SAFETY_MARGIN_MS as MARGIN_MS } from '../../../src/core/lease-policy.ts';
import type { CoordinatorStyle } from './sim-coordinator.ts';
import type { NetworkFaults } from './sim-network.ts';
import type { SimNode } from './sim-node.ts';
import type { World } from './world.ts';

/**
 * What one schedule is like, drawn from its seed: the coordinator's flavour, how far clocks
 * drift, how the network treats messages, how often nodes are paused, cut off, crashed or
 * closed. Schedules differ in kind as well as in order, so ten thousand seeds cover calm runs
 * and storms.
 */
export interface ScheduleParams {
  readonly style: CoordinatorStyle;
  readonly signals: boolean;
  /** Every node clock's rate stays within 1 +- drift of the registry's clock. */
  readonly drift: number;
  /** Node clocks start up to this far (ms) either side of the registry's. */
  readonly offsetMs: number;
  readonly network: NetworkFaults;
  readonly lagMs: number;
  /** Two faults of one node come a quarter of this to twice this apart (log-uniform). */
  readonly faultGapMs: number;
  /** Two requests for IDs at one node come 1 ms to twice this apart (log-uniform). */
  readonly issueGapMs: number;
  readonly callTimeoutMs: number;
  /** Wall-clock steps: forwards while running, either way across a restart; up to this (ms). */
  readonly clockStepMs: number;
  /**
   * The `switch-worker` rollback policy, with eight worker IDs instead of two: a node restarted
   * on a clock behind its ID's record moves to an ID last used before its clock.
   */
  readonly switchWorker: boolean;
  /** Renewals are granted between half the TTL and all of it, not always all of it. */
  readonly shortGrants: boolean;
  /** The holders' safety margin: MARGIN_MS, or SWITCH_MARGIN_MS under switch-worker. */
  readonly marginMs: number;
  /**
   * Under switch-worker, a process's wall clock (a `SystemClock`, not the `MonotonicClock`) also
   * steps back while it runs, by more than `wait` waits out and at most this (ms), once per
   * STEP_BACK_EVERY_MS per node: the in-process `switch` transition. 0 otherwise.
   */
  readonly stepBackMs: number;
  /**
   * The generators' rollback policy: `borrow` leads its clock by up to `leadMs` once a time
   * unit's sequence runs out (with a 4-IDs-per-ms layout and bursts, so it does).
   */
  readonly rollback: 'wait' | 'borrow';
  /** `borrow`'s maxLeadMs (the holder's LeaseTerms.leadMs); 0 under `wait`. */
  readonly leadMs: number;
  /** The start-up peer clock check (src/service/peer-clock-check.ts), before each start. */
  readonly peerCheck: 'off' | 'refuse' | 'warn';
  readonly maxPeerSkewMs: number;
}

/**
 * The drift the schedules draw up to: just under safetyMarginMs / TTL (1,000 / 10,000 ms), the
 * bound the fence needs (margin >= TTL x drift).
 */
export const MAX_DRIFT = 0.099;

/**
 * The margin of switch-worker schedules: a clock stepped back by S while a lease runs keeps its
 * fence open S longer in real time, so the fence needs margin >= TTL x drift + S (3,000 >= 990 +
 * 1,900 for a step at most STEP_BACK_MS within one fence's life).
 */
export const SWITCH_MARGIN_MS = 3000;
export const STEP_BACK_MS = 1900;
/** A node's clock steps back at most once in this long (ms), so steps never add up in a fence. */
export const STEP_BACK_EVERY_MS = 20_000;

export function drawParams(world: World, maxDrift = MAX_DRIFT): ScheduleParams {
  const switchWorker = world.chance(0.25);
  // borrow is a generator policy; switch-worker runs its generators under `wait`.
  const borrow = !switchWorker && world.chance(0.3);
  return {
    style: world.pick(['sql', 'redis', 'zookeeper'] as const),
    signals: world.chance(0.5),
    drift: world.pick([0, 0.01, 0.05, maxDrift]),
    offsetMs: world.pick([0, 20, 500, 3000]),
    network: {
      latencyMs: world.pick([1, 10, 100, 800]),
      tailShare: world.pick([0, 0.02, 0.1]),
      tailMs: world.pick([3000, 12_000]),
      loss: world.pick([0, 0.02, 0.1, 0.3]),
      duplicate: world.pick([0, 0.05]),
    },
    lagMs: world.pick([0, 20, 300]),
    faultGapMs: world.pick([2000, 6000, 15_000]),
    issueGapMs: world.pick([100, 300, 1000]),
    callTimeoutMs: world.pick([2000, 5000]),
    // switch-worker is for a clock behind a worker ID's record: its schedules always step.
    clockStepMs: world.pick(switchWorker ? [1000, 15_000] : [0, 0, 1000, 15_000]),
    switchWorker,
    shortGrants: world.chance(0.25),
    marginMs: switchWorker ? SWITCH_MARGIN_MS : MARGIN_MS,
    stepBackMs: switchWorker ? STEP_BACK_MS : 0,
    rollback: borrow ? 'borrow' : 'wait',
    leadMs: borrow ? world.pick([20, 200, 1000]) : 0,
    peerCheck: world.pick(['off', 'off', 'refuse', 'warn'] as const),
    maxPeerSkewMs: world.pick([1000, 5000]),
  };
}

/**
 * Puts each node's random processes on the agenda: requests for IDs, clock rate changes and
 * faults (pause, partition, crash, graceful close), each re-arming itself until the end.
 */
export function scheduleNodes(world: World, nodes: readonly SimNode[], p: ScheduleParams): void {
  for (const node of nodes) {
    world.after(world.uniform(0, 2000), () => {
      node.boot();
      return true;
    });
    const ask = () => {
      // Under borrow, now and then a burst that runs a time unit's sequence out and borrows.
      const burst = p.rollback === 'borrow' && world.chance(0.05);
      const count = burst ? world.logUniform(8, 160) : 1 + world.random() * 3;
      node.issue(Math.floor(count));
      world.after(world.logUniform(1, 2 * p.issueGapMs), ask);
      return false;
    };
    world.after(world.uniform(0, p.issueGapMs), ask);
    const drift = () => {
      const clock = node.setup.clock;
      // Half the time at an extreme of the bound: where a missing margin shows first.
      const rate = world.chance(0.5)
        ? 1 + (world.chance(0.5) ? 1 : -1) * p.drift
        : 1 + world.uniform(-p.drift, p.drift);
      clock.setRate(rate);
      world.after(world.logUniform(200, 20_000), drift);
      return false;
    };
    drift();
    const fault = () => {
      world.after(world.logUniform(p.faultGapMs / 4, p.faultGapMs * 2), fault);
      const kind = world.random();
      const step = p.clockStepMs;
      if (kind < 0.35) node.pause(world.logUniform(10, 20_000));
      else if (kind < 0.7) node.partition(world.logUniform(100, 25_000));
      else if (kind < 0.8) {
        // Half the crashes of a stepping schedule restart on a wall clock stepped either way;
        // under switch-worker, every crash restarts on a clock stepped back.
        const by = p.switchWorker
          ? -Math.round(world.uniform(0, step))
          : step > 0 && world.chance(0.5)
            ? Math.round(world.uniform(-step, step))
            : 0;
        node.crash(world.logUniform(10, 15_000), by);
      } else if (kind < 0.9 && p.stepBackMs > 0 && (kind >= 0.85 || world.chance(0.5))) {
        // More than `wait` waits out (5 ms), so the generator refuses and asks for a switch.
        if (!node.stepBack(world.logUniform(6, p.stepBackMs))) node.pause(world.uniform(0, 100));
      } else if (kind < 0.85 && step > 0) node.stepForward(world.logUniform(1, step));
      else if (!node.shutdown(world.logUniform(10, 5000))) node.pause(world.uniform(0, 100));
      return true;
    };
    world.after(world.logUniform(p.faultGapMs / 4, p.faultGapMs * 2), fault);
  }
}
