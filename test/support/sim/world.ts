import { EventLog } from './event-log.ts';
import { EventQueue } from './event-queue.ts';

/**
 * What every part of one simulated schedule shares: the seeded PRNG (every choice the schedule
 * makes is drawn from it, in an order fixed by the seed), virtual time (the registry's clock)
 * and its agenda, and the log of recent events.
 */
export class World {
  readonly seed: number;
  readonly random: () => number;
  readonly queue = new EventQueue();
  readonly log: EventLog;
  /** Virtual time, ms: the registry's clock. */
  now = 0;
  /** How often each kind of thing happened (faults, lease events), to show what was covered. */
  readonly tally = new Map<string, number>();
  /** Set by the checker on the first violation: the run stops there. */
  failed = false;

  constructor(seed: number, random: () => number, logSize: number) {
    this.seed = seed;
    this.random = random;
    this.log = new EventLog(logSize);
  }

  /** Runs `run` `delayMs` from now (it returns true when it may have woken the code under test). */
  after(delayMs: number, run: () => boolean): void {
    this.queue.push(this.now + Math.max(0, delayMs), run);
  }

  count(what: string): void {
    this.tally.set(what, (this.tally.get(what) ?? 0) + 1);
  }

  /** A number uniform in [min, max). */
  uniform(min: number, max: number): number {
    return min + (max - min) * this.random();
  }

  /** A number between min and max spread evenly over its orders of magnitude. */
  logUniform(min: number, max: number): number {
    return min * (max / min) ** this.random();
  }

  chance(p: number): boolean {
    return this.random() < p;
  }

  pick<T>(options: readonly T[]): T {
    return options[Math.floor(this.random() * options.length)] as T;
  }
}
