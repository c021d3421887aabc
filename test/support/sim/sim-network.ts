import type { Answer } from './sim-coordinator.ts';
import type { World } from './world.ts';

/** A node as the network sees it. */
export interface Endpoint {
  readonly name: string;
  /** Which process of the node is running (a crash and restart starts the next). */
  readonly incarnation: number;
  /** True while the node's link drops every message both ways (a partition). */
  cutOff(): boolean;
  /**
   * Runs `fn` in the node's process `incarnation`: dropped if that process is gone, held while it
   * is paused (run when it resumes). True when it ran.
   */
  deliver(incarnation: number, fn: () => void): boolean;
}

/** How the schedule treats messages; drawn per seed. */
export interface NetworkFaults {
  /** Delays are uniform up to this (ms)... */
  readonly latencyMs: number;
  /** ...except this share, delayed up to tailMs: past every timeout, so they land late. */
  readonly tailShare: number;
  readonly tailMs: number;
  /** Share of messages lost. */
  readonly loss: number;
  /** Share of requests delivered twice (a driver's retry), the copy later. */
  readonly duplicate: number;
}

/**
 * Carries requests from nodes to the coordinator and answers back, each message delayed, lost or
 * (requests) duplicated as the seed says: messages overtake one another, so requests land and
 * answers arrive in any order. A request keeps travelling after its sender gave up on it or died.
 */
export class SimNetwork {
  readonly #world: World;
  readonly #faults: NetworkFaults;

  constructor(world: World, faults: NetworkFaults) {
    this.#world = world;
    this.#faults = faults;
  }

  /** Sends a request; `handle` runs at the coordinator on arrival, its answer is sent back. */
  request<T>(
    from: Endpoint,
    what: string,
    handle: () => Answer<T>,
    onAnswer: (answer: Answer<T>) => void,
  ): void {
    const world = this.#world;
    const incarnation = from.incarnation;
    const copies = world.chance(this.#faults.duplicate) ? 2 : 1;
    if (copies > 1) world.count('duplicated request');
    for (let copy = 0; copy < copies; copy++) {
      const label = copy === 0 ? what : `${what} (duplicate)`;
      this.#carry(from, `-> ${label}`, () => {
        const answer = handle();
        world.log.add(
          world.now,
          'registry',
          `${from.name} ${label}: ${answer.ok ? 'ok' : answer.code}`,
        );
        this.#carry(from, `<- ${label}`, () => from.deliver(incarnation, () => onAnswer(answer)));
        return false;
      });
    }
  }

  /** A message from the coordinator to a node's process (the lease-lost signal). */
  notify(to: Endpoint, incarnation: number, what: string, fn: () => void): void {
    this.#carry(to, `<- ${what}`, () => to.deliver(incarnation, fn));
  }

  #carry(node: Endpoint, what: string, arrive: () => boolean): void {
    const world = this.#world;
    const faults = this.#faults;
    if (node.cutOff() || world.chance(faults.loss)) {
      world.log.add(world.now, node.name, `${what} LOST`);
      world.count('message lost');
      return;
    }
    const delay = world.chance(faults.tailShare)
      ? world.uniform(faults.latencyMs, faults.tailMs)
      : world.uniform(0.1, faults.latencyMs);
    world.after(delay, () => {
      if (node.cutOff()) {
        world.log.add(world.now, node.name, `${what} LOST (partition)`);
        return false;
      }
      return arrive();
    });
  }
}
