import { IdMintError, isIdMintError } from '../../../src/core/errors.ts';
import type { Layout } from '../../../src/core/layout.ts';
import type { SnowflakeGenerator } from '../../../src/core/snowflake.ts';
import type { RollbackPolicyOptions } from '../../../src/core/clock-policy.ts';
import { LeaseHolder } from '../../../src/service/lease-holder.ts';
import type { LeaseTerms } from '../../../src/service/lease-holding.ts';
import { checkPeerClocks } from '../../../src/service/peer-clock-check.ts';
import type { DriftClock } from './drift-clock.ts';
import type { Checker, Issuer, PeerVerdict } from './invariants.ts';
import type { SimCoordinator } from './sim-coordinator.ts';
import type { Endpoint, SimNetwork } from './sim-network.ts';
import { NodeTimers } from './node-timers.ts';
import { SimRegistryClient } from './sim-registry.ts';
import { STEP_BACK_EVERY_MS } from './schedule.ts';
import type { World } from './world.ts';

/** Makes the generator of a lease: the real one, or a deliberately broken one (test only). */
export type GeneratorFactory = (
  make: { readonly workerId: number; readonly lastTimestamp: number | undefined },
  node: {
    readonly clock: DriftClock;
    readonly layout: Layout;
    readonly marginMs: number;
    readonly rollback: RollbackPolicyOptions;
  },
) => SnowflakeGenerator;

/** What a node is made of, fixed per schedule. */
export interface NodeSetup {
  readonly name: string;
  readonly port: number;
  readonly clock: DriftClock;
  readonly layout: Layout;
  readonly maxWorkers: number;
  /** The `switch-worker` rollback policy (its generators run `rollback`, which is `wait`). */
  readonly switchWorker: boolean;
  readonly rollback: RollbackPolicyOptions;
  /** How far a `borrow` generator may lead its clock (LeaseTerms.leadMs); 0 otherwise. */
  readonly leadMs: number;
  readonly marginMs: number;
  /** The start-up peer clock check run before each start, as SnowflakeWorker.start runs it. */
  readonly peerCheck: 'off' | 'refuse' | 'warn';
  readonly maxPeerSkewMs: number;
  /** Event-loop lag: a timer fires up to this late. */
  readonly lagMs: number;
  /** The registry driver's timeout for one call. */
  readonly callTimeoutMs: number;
  readonly signals: boolean;
  /** `zookeeper`: its session's requests land in order, none twice (false: broken, test only). */
  readonly ordered: boolean;
  /** How long a supervisor waits before starting the worker again after a failed start. */
  readonly restartMs: number;
  readonly generator: GeneratorFactory;
}

/** What a node has seen, for the run's counters. */
export interface NodeCounts {
  starts: number;
  startFailures: number;
  leaseLosses: number;
  fenced: number;
  /** next() failures other than LEASE_LOST: none expected with steady clocks. */
  unexpected: number;
}

/**
 * One node: a process running the real LeaseHolder with real generators over the simulated
 * registry, on its own drifting clock and virtual timers. The schedule pauses it (SIGSTOP: its
 * timers and answers wait, its clock runs on), crashes it (memory lost, requests in flight keep
 * travelling) and restarts it, closes it gracefully, cuts its link, and asks it for IDs.
 */
export class SimNode implements Endpoint {
  readonly setup: NodeSetup;
  readonly counts: NodeCounts = {
    starts: 0,
    startFailures: 0,
    leaseLosses: 0,
    fenced: 0,
    unexpected: 0,
  };
  readonly #world: World;
  readonly #coordinator: SimCoordinator;
  readonly #network: SimNetwork;
  readonly #checker: Checker;
  #incarnation = 0;
  #up = false;
  #paused = false;
  #deferred: (() => void)[] = [];
  #partitionedUntil = Number.NEGATIVE_INFINITY;
  #holder: LeaseHolder | undefined;
  #generator: SnowflakeGenerator | undefined;
  /** The generators this process adopted before the current one (the last few): all retired. */
  #retired: SnowflakeGenerator[] = [];
  /** Registry time of the last in-process step back of the clock. */
  #steppedBackAt = Number.NEGATIVE_INFINITY;
  readonly #issuers = new WeakMap<SnowflakeGenerator, Issuer>();

  constructor(
    world: World,
    coordinator: SimCoordinator,
    network: SimNetwork,
    checker: Checker,
    setup: NodeSetup,
  ) {
    this.#world = world;
    this.#coordinator = coordinator;
    this.#network = network;
    this.#checker = checker;
    this.setup = setup;
  }

  get name(): string {
    return this.setup.name;
  }

  get incarnation(): number {
    return this.#incarnation;
  }

  get up(): boolean {
    return this.#up;
  }

  cutOff(): boolean {
    return this.#world.now < this.#partitionedUntil;
  }

  deliver(incarnation: number, fn: () => void): boolean {
    if (incarnation !== this.#incarnation || !this.#up) return false;
    if (this.#paused) {
      this.#deferred.push(fn);
      return false;
    }
    fn();
    return true;
  }

  /** Starts a new process of this node: a new LeaseHolder, as a supervisor would. */
  boot(): void {
    this.#incarnation++;
    this.#up = true;
    this.#paused = false;
    this.#deferred = [];
    const world = this.#world;
    const { clock, lagMs, callTimeoutMs, signals, ordered } = this.setup;
    const timers = new NodeTimers(world, this, clock, lagMs);
    const client = new SimRegistryClient({
      world,
      network: this.#network,
      coordinator: this.#coordinator,
      checker: this.#checker,
      node: this,
      timers,
      callTimeoutMs,
      signals,
      ordered,
    });
    this.#retired = [];
    this.#start(this.#terms(timers, client), client, this.#incarnation);
  }

  #terms(timers: NodeTimers, client: SimRegistryClient): LeaseTerms {
    const { clock, layout, maxWorkers, marginMs, port, switchWorker, rollback } = this.setup;
    return {
      registry: client,
      identity: { host: 'sim', port },
      clock: clock.clock,
      timers,
      maxWorkers,
      marginMs,
      leadMs: this.setup.leadMs,
      renewIntervalMs: undefined,
      switchWorker,
      createGenerator: (workerId, lastTimestamp) => {
        const generator = this.setup.generator(
          { workerId, lastTimestamp },
          { clock, layout, marginMs, rollback },
        );
        const token = client.tokens.get(workerId) ?? -1;
        // LEAD holds a generator to its own policy's lead, whatever the terms say.
        const { policy } = generator;
        const leadMs = policy.name === 'borrow' ? policy.maxLeadMs : 0;
        this.#issuers.set(generator, { node: this.name, workerId, token, leadMs });
        return generator;
      },
    };
  }

  #start(terms: LeaseTerms, client: SimRegistryClient, incarnation: number): void {
    const world = this.#world;
    this.counts.starts++;
    world.log.add(world.now, this.name, `starts (process ${incarnation})`);
    this.#checkPeers(terms, client)
      .then(() => this.#startHolder(terms, incarnation))
      .catch((error: unknown) => {
        if (incarnation !== this.#incarnation) return;
        this.counts.startFailures++;
        const code = isIdMintError(error) ? error.code : String(error);
        world.log.add(
          world.now,
          this.name,
          `start failed: ${code} ${error instanceof Error ? error.message : ''}`,
        );
        world.count(`start failed: ${code}`);
        terms.timers.setTimeout(
          () => this.#start(terms, client, incarnation),
          this.setup.restartMs,
        );
      });
  }

  /**
   * What SnowflakeWorker.start does before it takes a lease: the real peer clock check, its
   * verdict checked against the peers' answer as the client received it (PEERS).
   */
  async #checkPeers(terms: LeaseTerms, client: SimRegistryClient): Promise<void> {
    const { peerCheck: check, maxPeerSkewMs } = this.setup;
    if (check === 'off') return;
    const world = this.#world;
    const asked = client.peerAnswers;
    let verdict: PeerVerdict = 'ok';
    try {
      const { report, event } = await checkPeerClocks({
        registry: terms.registry,
        clock: terms.clock,
        check,
        maxPeerSkewMs,
      });
      if (report.skipped !== null) verdict = 'skipped';
      else if (event !== undefined) verdict = 'skew';
      if (event !== undefined) {
        world.count(event.type);
        world.log.add(world.now, this.name, `${event.type}: ${event.message}`);
      }
    } catch (error) {
      verdict = isIdMintError(error, 'CLOCK_SKEW') ? 'skew' : 'failed';
      throw error;
    } finally {
      const answer = client.peerAnswers > asked ? client.lastPeers : undefined;
      this.#checker.peerCheck(this.name, answer, terms.clock.now(), maxPeerSkewMs, verdict);
    }
  }

  #startHolder(terms: LeaseTerms, incarnation: number): Promise<void> {
    const world = this.#world;
    return LeaseHolder.start(terms, {
      adopted: (generator) => {
        if (incarnation !== this.#incarnation) return;
        const before = this.#generator;
        if (before !== undefined) this.#retired = [before, ...this.#retired.slice(0, 2)];
        this.#generator = generator;
        const issuer = this.#issuers.get(generator);
        world.log.add(world.now, this.name, `adopts worker ${issuer?.workerId} (${issuer?.token})`);
      },
      onEvent: (event) => {
        if (event.type === 'lease-lost') this.counts.leaseLosses++;
        world.count(event.type);
        // The in-process `switch` transition, told from a switch while establishing a lease.
        if (event.type === 'switched-worker' && event.message.startsWith('the clock went back'))
          world.count('switched-worker in a process');
        world.log.add(world.now, this.name, `${event.type}: ${event.message}`);
      },
    }).then((holder) => {
      if (incarnation === this.#incarnation) this.#holder = holder;
    });
  }

  /**
   * The lease this node's generator could issue under right now (up, clock below its fence,
   * paused or not: a paused node issues the moment it resumes), with its fence; undefined when
   * it could issue nothing.
   */
  able(): { readonly issuer: Issuer; readonly validUntil: number } | undefined {
    const generator = this.#generator;
    if (!this.#up || generator === undefined) return undefined;
    const validUntil = generator.validUntil();
    if (this.setup.clock.clock.now() >= validUntil) return undefined;
    const issuer = this.#issuers.get(generator);
    return issuer === undefined ? undefined : { issuer, validUntil };
  }

  /**
   * RETIRED, after every step: none of the generators this process adopted before its current
   * one could issue now (a switch, a loss, a recovery retires a lease before adopting the next).
   */
  checkRetired(): void {
    if (!this.#up || this.#retired.length === 0) return;
    const now = this.setup.clock.clock.now();
    for (const generator of this.#retired) {
      const issuer = this.#issuers.get(generator);
      if (issuer === undefined || now >= generator.validUntil()) continue;
      this.#checker.retired(issuer, `${this.name} could issue until ${generator.validUntil()}`);
    }
  }

  /** Asks the generator for `count` IDs now, as requests would. */
  issue(count: number): void {
    const generator = this.#generator;
    if (!this.#up || this.#paused || generator === undefined) return;
    const issuer = this.#issuers.get(generator);
    if (issuer === undefined) throw new Error('a generator the node did not make');
    // A fenced generator throws LEASE_LOST, and building that error is most of the cost of a
    // schedule: ask a fenced one now and then only (it must still refuse), an open one always.
    const world = this.#world;
    if (this.setup.clock.clock.now() >= generator.validUntil() && !world.chance(0.05)) {
      this.#fenced();
      return;
    }
    this.#askRetired();
    const clock = this.setup.clock.clock;
    for (let i = 0; i < count && !world.failed; i++) {
      let id: bigint;
      try {
        id = generator.next();
      } catch (error) {
        if (isIdMintError(error, 'LEASE_LOST')) this.#fenced();
        else if (isIdMintError(error, 'CLOCK_MOVED_BACKWARDS') && this.setup.switchWorker) {
          // What SnowflakeWorker does with a generator's refusal under switch-worker.
          this.#holder?.requestSwitch();
          world.count('switch requested');
        } else {
          this.counts.unexpected++;
          const why = error instanceof IdMintError ? error.message : String(error);
          this.#world.log.add(this.#world.now, this.name, `next() failed: ${why}`);
        }
        return;
      }
      const timestamp = generator.lastTimestamp();
      if (timestamp > clock.now() && i === count - 1) world.count('borrowed ahead of the clock');
      this.#checker.issued(issuer, id, timestamp, clock.now());
    }
  }

  /**
   * Now and then, asks a retired generator for an ID, as a batch minted across a switch
   * (SnowflakeWorker.nextBatchAsync keeps the generator it started with) would: it must refuse.
   */
  #askRetired(): void {
    const retired = this.#retired[0];
    if (retired === undefined || !this.#world.chance(0.05)) return;
    const issuer = this.#issuers.get(retired);
    if (issuer === undefined) return;
    let id: bigint;
    try {
      id = retired.next();
    } catch {
      this.#world.count('retired generator refused');
      return;
    }
    this.#checker.retired(issuer, `${this.name} issued ${id} from a retired generator`);
  }

  /**
   * A request found the generator fenced: as SnowflakeWorker does for a request that waits (a
   * stall outran the renewal), ask the holder for the renewal that may confirm the lease, which
   * starts one now when none is in flight. The next issue asks the generator again.
   */
  #fenced(): void {
    this.counts.fenced++;
    if (this.#holder?.confirmation() !== undefined) this.#world.count('fenced request waited');
  }

  /** SIGSTOP for `ms`: nothing of the process runs; its clock does. */
  pause(ms: number): void {
    if (!this.#up || this.#paused) return;
    this.#paused = true;
    const world = this.#world;
    const incarnation = this.#incarnation;
    world.log.add(world.now, this.name, `paused for ${ms.toFixed(0)} ms`);
    world.count('pause');
    world.after(ms, () => {
      if (incarnation !== this.#incarnation || !this.#paused) return false;
      this.#paused = false;
      world.log.add(world.now, this.name, `resumed (${this.#deferred.length} events held)`);
      const held = this.#deferred;
      this.#deferred = [];
      for (const fn of held) world.after(0, () => this.deliver(incarnation, fn));
      return false;
    });
  }

  /** Cuts the node's link both ways for `ms`. */
  partition(ms: number): void {
    const until = this.#world.now + ms;
    this.#partitionedUntil = Math.max(this.#partitionedUntil, until);
    this.#world.log.add(this.#world.now, this.name, `cut off for ${ms.toFixed(0)} ms`);
    this.#world.count('partition');
  }

  /**
   * SIGKILL, then a restart after `restartMs`, on a wall clock stepped by `stepMs` meanwhile
   * (backwards too: the new process reads the wall clock the old one's monotonic clock hid).
   */
  crash(restartMs: number, stepMs = 0): void {
    if (!this.#up) return;
    this.#world.count('crash');
    this.#down(`crashed; restarts in ${restartMs.toFixed(0)} ms`, restartMs, stepMs);
  }

  /**
   * The wall clock steps back by `ms` while the process runs: seen only by a process reading a
   * `SystemClock` (the `MonotonicClock` hides it), the case `switch-worker` moves worker IDs for.
   * At most once per STEP_BACK_EVERY_MS; false when refused.
   */
  stepBack(ms: number): boolean {
    const world = this.#world;
    if (!this.#up || world.now - this.#steppedBackAt < STEP_BACK_EVERY_MS) return false;
    this.#steppedBackAt = world.now;
    this.setup.clock.step(-ms);
    world.count('clock stepped back in a process');
    world.log.add(world.now, this.name, `clock stepped back ${ms.toFixed(0)} ms`);
    return true;
  }

  /** The wall clock steps forwards by `ms` while the process runs (NTP, an operator). */
  stepForward(ms: number): void {
    this.setup.clock.step(ms);
    this.#world.count('clock stepped forwards');
    this.#world.log.add(this.#world.now, this.name, `clock stepped forwards ${ms.toFixed(0)} ms`);
  }

  /** close() (a graceful shutdown), then a restart `restartMs` after it ends. */
  shutdown(restartMs: number): boolean {
    const holder = this.#holder;
    if (!this.#up || this.#paused || holder === undefined) return false;
    const world = this.#world;
    const incarnation = this.#incarnation;
    world.log.add(world.now, this.name, 'close()');
    world.count('close');
    const done = (how: string) => {
      if (incarnation !== this.#incarnation) return;
      this.#down(`closed (${how}); restarts in ${restartMs.toFixed(0)} ms`, restartMs);
    };
    holder.close().then(
      () => done('released'),
      (error: unknown) => done(`release failed: ${isIdMintError(error) ? error.code : error}`),
    );
    return true;
  }

  #down(why: string, restartMs: number, stepMs = 0): void {
    const world = this.#world;
    this.#up = false;
    this.#paused = false;
    this.#incarnation++;
    this.#deferred = [];
    this.#holder = undefined;
    this.#generator = undefined;
    world.log.add(world.now, this.name, why);
    world.after(restartMs, () => {
      if (stepMs !== 0) {
        this.setup.clock.step(stepMs);
        world.count(stepMs < 0 ? 'restart on a clock stepped back' : 'restart on a clock ahead');
        world.log.add(world.now, this.name, `clock stepped ${stepMs.toFixed(0)} ms`);
      }
      this.boot();
      return true;
    });
  }
}
