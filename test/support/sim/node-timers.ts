import type { TimerHandle, Timers } from '../../../src/ports/timers.ts';
import type { DriftClock } from './drift-clock.ts';
import type { Endpoint } from './sim-network.ts';
import type { World } from './world.ts';

interface SimTimer extends TimerHandle {
  cancelled: boolean;
}

/**
 * The Timers port for one process of a node, in virtual time: a timer of `ms` fires once the
 * node's own clock has moved about `ms` (the host's oscillator drives both), plus up to `lagMs`
 * of event-loop lag; never early. It fires in the process that set it: a crash drops it, a pause
 * holds it until the process resumes.
 */
export class NodeTimers implements Timers {
  readonly #world: World;
  readonly #node: Endpoint;
  readonly #incarnation: number;
  readonly #clock: DriftClock;
  readonly #lagMs: number;

  constructor(world: World, node: Endpoint, clock: DriftClock, lagMs: number) {
    this.#world = world;
    this.#node = node;
    this.#incarnation = node.incarnation;
    this.#clock = clock;
    this.#lagMs = lagMs;
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const timer: SimTimer = { cancelled: false };
    const world = this.#world;
    const lag = this.#lagMs > 0 && world.chance(0.2) ? world.uniform(0, this.#lagMs) : 0;
    world.after(this.#clock.registryDelay(Math.max(1, ms)) + lag, () => {
      if (timer.cancelled) return false;
      return this.#node.deliver(this.#incarnation, () => {
        if (timer.cancelled) return;
        timer.cancelled = true;
        callback();
      });
    });
    return timer;
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    if (handle !== undefined) (handle as SimTimer).cancelled = true;
  }
}
