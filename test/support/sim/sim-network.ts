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
 * One connection's order (ZooKeeper's session over TCP): what is sent on it arrives in the order
 * sent, each way, and never twice. Holds the last arrival time scheduled each way.
 */
export interface Channel {
  up: number;
  down: number;
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
    channel?: Channel,
  ): void {
    const world = this.#world;
    const incarnation = from.incarnation;
    const copies = channel === undefined && world.chance(this.#faults.duplicate) ? 2 : 1;
    if (copies > 1) world.count('duplicated request');
    for (let copy = 0; copy < copies; copy++) {
      const label = copy === 0 ? what : `${what} (duplicate)`;
      this.#carry(from, `-> ${label}`, channel, 'up', () => {
        const answer = handle();
        world.log.add(
          world.now,
          'registry',
          `${from.name} ${label}: ${answer.ok ? 'ok' : answer.code}`,
        );
        this.#carry(from, `<- ${label}`, channel, 'down', () =>
          from.deliver(incarnation, () => onAnswer(answer)),
        );
        return false;
      });
    }
  }

  /** A message from the coordinator to a node's process (the lease-lost signal). */
  notify(to: Endpoint, incarnation: number, what: string, fn: () => void): void {
    this.#carry(to, `<- ${what}`, undefined, 'down', () => to.deliver(incarnation, fn));
  }

  #carry(
    node: Endpoint,
    what: string,
    channel: Channel | undefined,
    way: 'up' | 'down',
    arrive: () => boolean,
  ): void {
    const world = this.#world;
    const faults = this.#faults;
    if (node.cutOff() || world.chance(faults.loss)) {
      world.log.add(world.now, node.name, `${what} LOST`);
      world.count('message lost');
      return;
    }
    let delay = world.chance(faults.tailShare)
      ? world.uniform(faults.latencyMs, faults.tailMs)
      : world.uniform(0.1, faults.latencyMs);
    if (channel !== undefined) {
      // In order: never before what was sent on the channel earlier (ties keep the send order).
      delay = Math.max(delay, channel[way] - world.now);
      channel[way] = world.now + delay;
    }
    world.after(delay, () => {
      if (node.cutOff()) {
        world.log.add(world.now, node.name, `${what} LOST (partition)`);
        return false;
      }
      return arrive();
    });
  }
}
