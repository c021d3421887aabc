import { IdMintError, isIdMintError } from '../core/errors.ts';
import type { Clock } from '../ports/clock.ts';
import type { IssuerLeases } from '../ports/issuer-lease.ts';
import { withTimeout } from '../shared/timeout.ts';

// One cluster-ordered tag's issuer lease as this node sees it (docs/segments.md, Cluster order):
// held here until a deadline, or held by another node at an address, or to be claimed. The
// deadline is the fence: the tag's buffer issues only while the clock is below it.

/** The fixed terms every issuer lease of this node is claimed and renewed on. */
export interface IssuerTerms {
  readonly leases: IssuerLeases;
  /** This node's ID in the lease: unique per process run. */
  readonly node: string;
  /**
   * The URL other nodes forward to, read at each claim (known only once the server listens).
   * Throws ISSUER_UNAVAILABLE naming the fix when this node has none another node can reach.
   */
  readonly address: () => string;
  /** Monotonic: it may jump forwards (which only fences earlier), never backwards. */
  readonly clock: Clock;
  /** The lease's TTL, timed by the store's clock. */
  readonly ttlMs: number;
  /**
   * The node stops issuing this long before the lease could expire: covers the drift between its
   * clock and the store's over one TTL (the worker lease's safety margin).
   */
  readonly marginMs: number;
  /** How often the lease is renewed (a third of what the TTL leaves after the margin). */
  readonly renewIntervalMs: number;
  /** The least time between two claims of one tag by this node. */
  readonly retryMs: number;
  /** How long one store call may take before its outcome is treated as unknown. */
  readonly callTimeoutMs: number;
  /** Told of every claim, loss and handover, for the log. Must not throw. */
  readonly onEvent?: ((event: IssuerEvent) => void) | undefined;
  /**
   * A lease under which nothing was issued for this long is given back (renewed only while the
   * tag is in use); the next request claims it again, with a fresh range.
   */
  readonly idleReleaseMs: number;
}

/** Something that happened to a tag's issuer lease on this node. */
export interface IssuerEvent {
  readonly type: 'claimed' | 'lost' | 'released' | 'renew-failed' | 'idle';
  readonly tag: string;
  readonly epoch: bigint;
  readonly error?: IdMintError;
}

/** Where a tag's requests go: served here, or forwarded to the holder at `address`. */
export type IssuerLocation =
  | { readonly local: true }
  | { readonly local: false; readonly node: string; readonly address: string };

const LOCAL: IssuerLocation = { local: true };

/** What /status and /metrics show of one cluster-ordered tag. */
export interface IssuerStats {
  readonly tag: string;
  /** `self` while this node issues it, the holder's address when another node does, else null. */
  readonly issuer: string | null;
  /** The latest epoch this node has seen (its own or the holder's); null before any. */
  readonly epoch: string | null;
  /** Times the issuer changed as seen from here (a new epoch after the first one seen). */
  readonly handovers: number;
  /** Successful claims by this node. */
  readonly claims: number;
  /** Requests this node forwarded to the holder. */
  forwarded: number;
  /** Forwarded requests this node answered as the issuer. */
  servedForwarded: number;
}

/**
 * One tag's issuer lease on this node. {@link deadline} is the fence: the tag's IDs are issued
 * here only while the clock reads below it, which is one comparison on the hot path. It is set
 * to the clock read before a claim or renewal was sent, plus the TTL, less the margin: the store
 * times the lease from when it handled the request, later, so by the time the lease can expire
 * (and another node claim it) this node has stopped.
 */
export class IssuerHolding {
  readonly tag: string;
  /** Clock time until which this node issues the tag; -Infinity while it does not. */
  deadline = Number.NEGATIVE_INFINITY;
  /** The epoch this node holds, or undefined. */
  #epoch: bigint | undefined;
  #remote: { node: string; address: string; epoch: bigint; until: number } | undefined;
  #claiming: Promise<IssuerLocation> | undefined;
  #nextClaimAt = Number.NEGATIVE_INFINITY;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  #lastEpoch: bigint | undefined;
  readonly #t: IssuerTerms;
  /**
   * Called with the new epoch before a new holding opens the fence: the tag's buffered ranges
   * must go, as the previous holder may have issued above them.
   */
  readonly #onNewHolding: (epoch: bigint) => void;
  /** A count that grows while the tag is drawn from here (its buffer's issued IDs). */
  readonly #activity: () => number;
  #lastActivity = { count: -1, at: 0 };
  readonly #stats: {
    handovers: number;
    claims: number;
    forwarded: number;
    servedForwarded: number;
  } = { handovers: 0, claims: 0, forwarded: 0, servedForwarded: 0 };

  constructor(
    tag: string,
    terms: IssuerTerms,
    onNewHolding: (epoch: bigint) => void,
    activity: () => number = () => 0,
  ) {
    this.tag = tag;
    this.#t = terms;
    this.#onNewHolding = onNewHolding;
    this.#activity = activity;
  }

  /** True while this node may issue the tag. */
  serving(): boolean {
    return this.#t.clock.now() < this.deadline;
  }

  /** The holder's address while another node is known to hold the lease, else undefined. */
  remote(): string | undefined {
    const remote = this.#remote;
    return remote !== undefined && this.#t.clock.now() < remote.until ? remote.address : undefined;
  }

  /**
   * Where the tag is served now: here (claiming the lease if nobody holds it), or at the holder.
   * Throws ISSUER_UNAVAILABLE when the store cannot be asked (or this node has no address), and
   * TAG_NOT_FOUND from the store.
   */
  locate(): Promise<IssuerLocation> {
    const now = this.#t.clock.now();
    if (now < this.deadline) return Promise.resolve(LOCAL);
    const remote = this.#remote;
    if (remote !== undefined && now < remote.until)
      return Promise.resolve({ local: false, node: remote.node, address: remote.address });
    this.#claiming ??= this.#claim().finally(() => {
      this.#claiming = undefined;
    });
    return this.#claiming;
  }

  /**
   * The holder at `address` did not serve a forwarded request (unreachable, or it no longer
   * issues the tag): ask the store again at the next {@link locate}.
   */
  forgetRemote(address: string): void {
    if (this.#remote?.address === address) this.#remote = undefined;
  }

  /** Counts a request forwarded to the holder. */
  countForwarded(): void {
    this.#stats.forwarded++;
  }

  /** Counts a forwarded request served here as the issuer. */
  countServedForwarded(): void {
    this.#stats.servedForwarded++;
  }

  stats(): IssuerStats {
    const serving = this.serving();
    return {
      tag: this.tag,
      issuer: serving ? 'self' : (this.remote() ?? null),
      epoch: this.#lastEpoch === undefined ? null : this.#lastEpoch.toString(),
      ...this.#stats,
    };
  }

  /**
   * Stops issuing for good, at once: the fence closes, renewals stop (none can lift it again) and
   * no claim is made any more. The lease is kept until {@link close}.
   */
  stop(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.deadline = Number.NEGATIVE_INFINITY;
  }

  /**
   * Stops issuing and gives the lease back (the caller has stopped drawing the tag's IDs and
   * given its buffered ones back first). Never throws: a lease not released runs out by itself.
   */
  async close(): Promise<void> {
    this.stop();
    await this.#claiming?.catch(() => undefined);
    const epoch = this.#epoch;
    this.#epoch = undefined;
    if (epoch === undefined) return;
    const { leases, node, callTimeoutMs } = this.#t;
    try {
      await withTimeout(leases.releaseIssuer(this.tag, node, epoch), callTimeoutMs, () =>
        unavailable(this.tag, `releasing its issuer lease took longer than ${callTimeoutMs} ms`),
      );
      this.#t.onEvent?.({ type: 'released', tag: this.tag, epoch });
    } catch {
      // Runs out by itself within the TTL: another node waits that long at most.
    }
  }

  async #claim(): Promise<IssuerLocation> {
    const { clock, leases, node, ttlMs, marginMs, callTimeoutMs } = this.#t;
    if (this.#closed) return this.#holderWhileClosing();
    const wait = this.#nextClaimAt - clock.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    this.#nextClaimAt = clock.now() + this.#t.retryMs;
    const address = this.#t.address();
    // The fence is timed from before the request: the store starts the TTL later than this.
    const sentAt = clock.now();
    let result: Awaited<ReturnType<IssuerLeases['claimIssuer']>>;
    try {
      result = await withTimeout(
        leases.claimIssuer(this.tag, node, address, ttlMs),
        callTimeoutMs,
        () =>
          unavailable(this.tag, `claiming its issuer lease took longer than ${callTimeoutMs} ms`),
      );
    } catch (error) {
      if (isIdMintError(error, 'TAG_NOT_FOUND') || isIdMintError(error, 'ISSUER_UNAVAILABLE'))
        throw error;
      throw unavailable(this.tag, `its store could not be asked who issues it`, error);
    }
    if (result.held) {
      const { epoch } = result.lease;
      if (this.#closed) {
        await leases.releaseIssuer(this.tag, node, epoch).catch(() => undefined);
        throw unavailable(this.tag, 'this node is shutting down');
      }
      this.#noteEpoch(epoch);
      this.#stats.claims++;
      this.#epoch = epoch;
      this.#remote = undefined;
      // Every buffered range goes before the fence opens: a fresh range is allocated after this
      // claim, above everything any earlier holder could issue.
      this.#onNewHolding(epoch);
      this.#lastActivity = { count: -1, at: clock.now() };
      this.deadline = sentAt + Math.min(ttlMs, result.lease.ttlMs) - marginMs;
      this.#t.onEvent?.({ type: 'claimed', tag: this.tag, epoch });
      this.#schedule();
      return LOCAL;
    }
    this.#noteEpoch(result.epoch);
    // Nobody can claim before the holder's lease runs out: no need to ask again before then,
    // unless forwarding to it fails (forgetRemote).
    this.#remote = {
      node: result.node,
      address: result.address,
      epoch: result.epoch,
      until: clock.now() + Math.max(result.remainingMs, this.#t.retryMs),
    };
    return { local: false, node: result.node, address: result.address };
  }

  /**
   * A node shutting down claims nothing, but forwards the requests still reaching it to the node
   * that took the lease over.
   */
  async #holderWhileClosing(): Promise<IssuerLocation> {
    const { clock, leases, callTimeoutMs, retryMs } = this.#t;
    const holder = await withTimeout(leases.currentIssuer(this.tag), callTimeoutMs, () =>
      unavailable(this.tag, 'this node is shutting down'),
    ).catch(() => undefined);
    if (holder === undefined || holder.address === '')
      throw unavailable(this.tag, 'this node is shutting down and no other node issues it yet');
    this.#remote = {
      node: holder.node,
      address: holder.address,
      epoch: holder.epoch,
      until: clock.now() + Math.max(holder.remainingMs, retryMs),
    };
    return { local: false, node: holder.node, address: holder.address };
  }

  /** True once the activity count has not moved for idleReleaseMs. */
  #idle(now: number): boolean {
    const count = this.#activity();
    if (count !== this.#lastActivity.count) {
      this.#lastActivity = { count, at: now };
      return false;
    }
    return now - this.#lastActivity.at >= this.#t.idleReleaseMs;
  }

  #noteEpoch(epoch: bigint): void {
    if (this.#lastEpoch !== undefined && epoch !== this.#lastEpoch) this.#stats.handovers++;
    if (this.#lastEpoch === undefined || epoch > this.#lastEpoch) this.#lastEpoch = epoch;
  }

  #schedule(): void {
    clearTimeout(this.#timer);
    if (this.#closed || this.#epoch === undefined) return;
    this.#timer = setTimeout(() => void this.#renew(), this.#t.renewIntervalMs);
    // A forgotten close() must not keep the process alive.
    this.#timer.unref?.();
  }

  async #renew(): Promise<void> {
    const epoch = this.#epoch;
    if (epoch === undefined || this.#closed) return;
    const { clock, leases, node, ttlMs, marginMs, renewIntervalMs } = this.#t;
    if (this.#idle(clock.now())) {
      // Nothing issued here for a while: fenced at once, then the lease goes back, so that a node
      // that gets the tag's traffic now issues it itself instead of forwarding to this one.
      this.#epoch = undefined;
      this.deadline = Number.NEGATIVE_INFINITY;
      await leases.releaseIssuer(this.tag, node, epoch).catch(() => undefined);
      this.#t.onEvent?.({ type: 'idle', tag: this.tag, epoch });
      return;
    }
    const sentAt = clock.now();
    try {
      await withTimeout(leases.renewIssuer(this.tag, node, epoch, ttlMs), renewIntervalMs, () =>
        unavailable(this.tag, `renewing its issuer lease took longer than ${renewIntervalMs} ms`),
      );
      // A renewal confirmed for this very epoch: the lease never lapsed (the store renews only a
      // live lease, and a claim by anyone would have raised the epoch), so the buffered ranges
      // are still above everything issued, even if the deadline passed meanwhile.
      if (this.#epoch === epoch && !this.#closed)
        this.deadline = Math.max(this.deadline, sentAt + ttlMs - marginMs);
    } catch (error) {
      const failure = isIdMintError(error)
        ? error
        : unavailable(this.tag, 'renewing its issuer lease failed', error);
      if (failure.code === 'LEASE_LOST' && this.#epoch === epoch) {
        this.#epoch = undefined;
        this.deadline = Number.NEGATIVE_INFINITY;
        this.#t.onEvent?.({ type: 'lost', tag: this.tag, epoch, error: failure });
        return;
      }
      this.#t.onEvent?.({ type: 'renew-failed', tag: this.tag, epoch, error: failure });
    }
    this.#schedule();
  }
}

/** ISSUER_UNAVAILABLE for `tag`, saying why. */
export function unavailable(tag: string, why: string, cause?: unknown): IdMintError {
  return new IdMintError('ISSUER_UNAVAILABLE', `tag "${tag}": ${why}`, {
    ...(cause === undefined ? {} : { cause }),
    details: { tag },
  });
}
