// An in-memory IssuerLeases (src/ports/issuer-lease.ts) for unit tests of the service: one lease
// per tag, timed by an injected clock standing for the store's, as the real stores keep it in the
// tag's own database. Faults are switches: `down` fails every call (STORE_UNAVAILABLE), `hold`
// keeps calls waiting until released, as a partition does.
import { IdMintError } from '../../src/core/errors.ts';
import type { IssuerBusy, IssuerLease, IssuerLeases } from '../../src/ports/issuer-lease.ts';

interface Entry {
  node: string;
  address: string;
  epoch: bigint;
  ttlMs: number;
  expiresAt: number;
}

export class MemoryIssuerLeases implements IssuerLeases {
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  readonly #epochs = new Map<string, bigint>();
  /** Tags the store has; undefined: every tag. */
  readonly #tags: Set<string> | undefined;
  /** Every call fails with STORE_UNAVAILABLE while set. */
  down = false;
  /** Calls wait for this promise (then run) while set: a store that does not answer. */
  hold: Promise<void> | undefined;
  /** Every call, for assertions: `claim tag node`, `renew tag node epoch`, ... */
  readonly calls: string[] = [];

  constructor(now: () => number, tags?: readonly string[]) {
    this.#now = now;
    this.#tags = tags === undefined ? undefined : new Set(tags);
  }

  async #enter(call: string): Promise<void> {
    this.calls.push(call);
    if (this.hold !== undefined) await this.hold;
    if (this.down) throw new IdMintError('STORE_UNAVAILABLE', 'the test store is down');
  }

  #live(tag: string): Entry | undefined {
    const entry = this.#entries.get(tag);
    return entry !== undefined && entry.expiresAt > this.#now() ? entry : undefined;
  }

  async claimIssuer(
    tag: string,
    node: string,
    address: string,
    ttlMs: number,
  ): Promise<{ readonly held: true; readonly lease: IssuerLease } | IssuerBusy> {
    await this.#enter(`claim ${tag} ${node}`);
    if (this.#tags !== undefined && !this.#tags.has(tag))
      throw new IdMintError('TAG_NOT_FOUND', `tag "${tag}" not found`);
    const live = this.#live(tag);
    if (live !== undefined && live.node !== node) {
      return {
        held: false,
        node: live.node,
        address: live.address,
        epoch: live.epoch,
        remainingMs: Math.max(0, live.expiresAt - this.#now()),
      };
    }
    const epoch = (this.#epochs.get(tag) ?? 0n) + 1n;
    this.#epochs.set(tag, epoch);
    this.#entries.set(tag, { node, address, epoch, ttlMs, expiresAt: this.#now() + ttlMs });
    return { held: true, lease: { tag, node, address, epoch, ttlMs } };
  }

  async renewIssuer(tag: string, node: string, epoch: bigint, ttlMs: number): Promise<void> {
    await this.#enter(`renew ${tag} ${node} ${epoch}`);
    const live = this.#live(tag);
    if (live === undefined || live.node !== node || live.epoch !== epoch)
      throw new IdMintError(
        'LEASE_LOST',
        `tag "${tag}": the issuer lease of epoch ${epoch} is gone`,
      );
    // Never ends the lease earlier than it did (the port's rule: a renewal the holder never
    // heard back from may land after one that granted more).
    live.expiresAt = Math.max(live.expiresAt, this.#now() + ttlMs);
    live.ttlMs = ttlMs;
  }

  async releaseIssuer(tag: string, node: string, epoch: bigint): Promise<void> {
    await this.#enter(`release ${tag} ${node} ${epoch}`);
    const live = this.#live(tag);
    if (live !== undefined && live.node === node && live.epoch === epoch) this.#entries.delete(tag);
  }

  async currentIssuer(tag: string): Promise<IssuerBusy | undefined> {
    await this.#enter(`current ${tag}`);
    const live = this.#live(tag);
    return live === undefined
      ? undefined
      : {
          held: false,
          node: live.node,
          address: live.address,
          epoch: live.epoch,
          remainingMs: Math.max(0, live.expiresAt - this.#now()),
        };
  }
}
