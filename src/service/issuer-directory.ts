import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { IdMintError } from '../core/errors.ts';
import { leaseRenewIntervalMs } from '../core/lease-policy.ts';
import type { Clock } from '../ports/clock.ts';
import type { IssuerLeases } from '../ports/issuer-lease.ts';
import {
  IssuerHolding,
  unavailable,
  type IssuerEvent,
  type IssuerStats,
} from './issuer-holding.ts';

/** Options for {@link IssuerDirectory}. */
export interface IssuerDirectoryOptions {
  /** The store's issuer leases (SegmentStore.issuers). */
  readonly leases: IssuerLeases;
  readonly clock: Clock;
  readonly ttlMs: number;
  /** Stops issuing this long before the lease could expire (the worker lease's safety margin). */
  readonly marginMs: number;
  readonly retryMs: number;
  readonly callTimeoutMs: number;
  /** A lease under which nothing was issued for this long is given back. Default 6 TTLs. */
  readonly idleReleaseMs?: number;
  /** This node's ID in the leases; default host, pid and a random part (unique per run). */
  readonly node?: string;
  readonly onEvent?: (event: IssuerEvent) => void;
}

/**
 * The issuer leases of the cluster-ordered tags this node has served or forwarded: one
 * {@link IssuerHolding} per tag, created on the tag's first use, all on the same terms. The
 * address other nodes forward to is set once the server listens ({@link setAddress}).
 */
export class IssuerDirectory {
  readonly #holdings = new Map<string, IssuerHolding>();
  readonly #options: IssuerDirectoryOptions;
  readonly #renewIntervalMs: number;
  readonly node: string;
  #address = '';
  #why = 'the server is not listening yet';

  constructor(options: IssuerDirectoryOptions) {
    this.#options = options;
    // The worker lease's rule: the TTL less the margin holds at least two renewals.
    this.#renewIntervalMs = leaseRenewIntervalMs(options.ttlMs, {
      safetyMarginMs: options.marginMs,
    });
    this.node = options.node ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  }

  /**
   * Sets the URL other nodes reach this node at (`http://host:port`), or, with `why`, says that
   * it has none (a wildcard listen address and no segment.advertiseUrl): its claims then fail.
   */
  setAddress(address: string, why?: string): void {
    this.#address = address;
    this.#why = why ?? '';
  }

  address(): string {
    return this.#address;
  }

  /** The tag's holding, created (nothing claimed yet) on first use. */
  holding(
    tag: string,
    onNewHolding: (epoch: bigint) => void,
    activity?: () => number,
  ): IssuerHolding {
    let holding = this.#holdings.get(tag);
    if (holding === undefined) {
      const { leases, clock, ttlMs, marginMs, retryMs, callTimeoutMs, onEvent } = this.#options;
      holding = new IssuerHolding(
        tag,
        {
          leases,
          node: this.node,
          address: () => {
            if (this.#address === '')
              throw new IdMintError(
                'ISSUER_UNAVAILABLE',
                `tag "${tag}": this node has no address other nodes can reach (${this.#why}), ` +
                  'so it cannot issue a cluster-ordered tag; set segment.advertiseUrl',
                { details: { tag } },
              );
            return this.#address;
          },
          clock,
          ttlMs,
          marginMs,
          renewIntervalMs: this.#renewIntervalMs,
          retryMs,
          callTimeoutMs,
          onEvent,
          idleReleaseMs: this.#options.idleReleaseMs ?? 6 * ttlMs,
        },
        onNewHolding,
        activity,
      );
      this.#holdings.set(tag, holding);
    }
    return holding;
  }

  /** The tag's holding if it has one. */
  get(tag: string): IssuerHolding | undefined {
    return this.#holdings.get(tag);
  }

  /** One entry per cluster-ordered tag this node has used, sorted by tag. */
  stats(): IssuerStats[] {
    return [...this.#holdings.values()]
      .map((holding) => holding.stats())
      .sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
  }

  /** Gives every lease back; the caller has stopped issuing first. Never throws. */
  async close(): Promise<void> {
    await Promise.all([...this.#holdings.values()].map((holding) => holding.close()));
  }
}

export { unavailable };
