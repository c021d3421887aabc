import type { Clock } from '../ports/clock.ts';
import type { IssuerLeases } from '../ports/issuer-lease.ts';
import type { TagListing } from '../ports/segment-store.ts';
import { IdMintError, isIdMintError } from '../core/errors.ts';
import {
  type SegmentBuffer,
  closedError,
  type SegmentBufferSettings,
  type SegmentRun,
} from '../core/segment-buffer.ts';
import { DEFAULT_SAFETY_MARGIN_MS } from '../core/lease-policy.ts';
import { FencedBuffer } from './fenced-buffer.ts';
import { IssuerDirectory } from './issuer-directory.ts';
import type { IssuerEvent, IssuerLocation } from './issuer-holding.ts';

/** The issuer leases' terms; every duration in ms. */
export interface IssuerOptions {
  /** The lease's TTL by the store's clock. Default 10000. */
  readonly ttlMs?: number;
  /** Issuing stops this long before the lease could expire. Default 1000 (the worker lease's). */
  readonly marginMs?: number;
  /** A lease under which nothing was issued for this long is given back. Default 6 TTLs. */
  readonly idleReleaseMs?: number;
  /** The least time between two claims of one tag. Default 200. */
  readonly retryMs?: number;
  /** This node's ID in the leases; default host, pid and a random part. */
  readonly node?: string;
  /** Told of claims, losses and releases. Must not throw. */
  readonly onEvent?: (event: IssuerEvent) => void;
}

/**
 * The segment service's buffers as {@link OrderedTags} sees them: the service owns the map of
 * tags to buffers; this module only reads it and puts a fresh buffer in a tag's place.
 */
export interface TagBuffers {
  /** The tag's buffer now, if it has one. */
  get(tag: string): SegmentBuffer | undefined;
  /** Puts `buffer` in the tag's place, as a buffer created now (a refresh under way keeps it). */
  install(tag: string, buffer: SegmentBuffer): void;
  /** True once the service is closing: no buffer is replaced any more. */
  closing(): boolean;
}

/** Options for {@link OrderedTags}. */
export interface OrderedTagsOptions {
  /** The store's issuer leases (SegmentStore.issuers); undefined when it keeps none. */
  readonly leases: IssuerLeases | undefined;
  readonly clock: Clock;
  readonly issuers: IssuerOptions;
  /** How long one lease call may take (the service's loadTimeoutMs). */
  readonly callTimeoutMs: number;
  /** The settings every buffer of the service is made with. */
  readonly settings: SegmentBufferSettings;
  readonly buffers: TagBuffers;
}

/**
 * The cluster-ordered tags (`ordering: cluster`, docs/segments.md, Cluster order) of one
 * {@link SegmentService}: which tags are ordered, their issuer leases, their fenced buffers, the
 * buffer replaced on each new holding or exact range, and the hand-over at shutdown. A plain
 * tag's buffer passes through {@link served}, {@link current}, {@link locate} and
 * {@link exactRunAllocated} unchanged, so the service calls them without asking which it has.
 */
export class OrderedTags {
  /** Tags known to be cluster-ordered: served only under their issuer lease. */
  readonly #tags = new Set<string>();
  /** The issuer leases, where the store keeps them. */
  readonly directory: IssuerDirectory | undefined;
  readonly #settings: SegmentBufferSettings;
  readonly #buffers: TagBuffers;

  constructor(options: OrderedTagsOptions) {
    const { leases, issuers } = options;
    this.#settings = options.settings;
    this.#buffers = options.buffers;
    this.directory =
      leases === undefined
        ? undefined
        : new IssuerDirectory({
            leases,
            clock: options.clock,
            ttlMs: issuers.ttlMs ?? 10_000,
            marginMs: issuers.marginMs ?? DEFAULT_SAFETY_MARGIN_MS,
            retryMs: issuers.retryMs ?? 200,
            callTimeoutMs: options.callTimeoutMs,
            ...(issuers.node === undefined ? {} : { node: issuers.node }),
            ...(issuers.idleReleaseMs === undefined
              ? {}
              : { idleReleaseMs: issuers.idleReleaseMs }),
            ...(issuers.onEvent === undefined ? {} : { onEvent: issuers.onEvent }),
          });
  }

  /** True when `tag` is cluster-ordered as far as the service has read. */
  has(tag: string): boolean {
    return this.#tags.has(tag);
  }

  /**
   * Takes a tag record's ordering (a tag, once cluster-ordered, stays so here). True when the
   * record is cluster-ordered and `buffer` is a plain one (the tag was deleted and created again
   * ordered): the caller drops that buffer at once, and the next draw adopts the tag fenced.
   */
  supersedes(record: TagListing, buffer: SegmentBuffer | undefined): boolean {
    if (record.ordering !== 'cluster') return false;
    this.#tags.add(record.tag);
    return buffer !== undefined && !(buffer instanceof FencedBuffer);
  }

  /**
   * For a cluster-ordered tag another node is known to issue (and this node does not), that
   * node's address, to forward to; undefined otherwise (serve here, which claims as needed).
   */
  issuerOf(tag: string): string | undefined {
    if (!this.#tags.has(tag)) return undefined;
    const holding = this.directory?.get(tag);
    return holding === undefined || holding.serving() ? undefined : holding.remote();
  }

  /** Where the tag of `buffer` is served now: here for a plain tag, else as its lease says. */
  locate(buffer: SegmentBuffer): Promise<IssuerLocation> {
    if (!(buffer instanceof FencedBuffer)) return Promise.resolve({ local: true });
    return buffer.holding.locate();
  }

  /** A new cluster-ordered tag's buffer, behind its issuer lease (nothing claimed yet). */
  fencedBuffer(tag: string, step: number): FencedBuffer {
    const directory = this.directory;
    if (directory === undefined)
      throw new IdMintError(
        'ISSUER_UNAVAILABLE',
        `tag "${tag}" is cluster-ordered but its store keeps no issuer leases`,
        { details: { tag } },
      );
    const holding = directory.holding(
      tag,
      () => {
        // A new holding: whatever this node buffered is below what a holder in between may have
        // issued. The buffer goes before the fence opens.
        if (this.#buffers.get(tag) !== undefined && !this.#buffers.closing())
          this.#replace(tag, holding);
      },
      // IDs issued here, which grow while the tag is in use (a new buffer starts again: a change).
      () => this.#buffers.get(tag)?.issued() ?? 0,
    );
    return new FencedBuffer(tag, step, this.#settings, holding);
  }

  /**
   * `buffer` ready to draw from: a plain tag's as it is; a cluster-ordered tag's only while this
   * node holds its issuer lease (claimed here if nobody holds it), ISSUER_UNAVAILABLE with the
   * holder's address in `details.issuer` when another node does (see {@link isIssuedElsewhere}).
   */
  served(tag: string, buffer: SegmentBuffer): SegmentBuffer | Promise<SegmentBuffer> {
    if (!(buffer instanceof FencedBuffer)) return buffer;
    return this.#servedHere(tag, buffer);
  }

  async #servedHere(tag: string, buffer: FencedBuffer): Promise<SegmentBuffer> {
    const where = await buffer.holding.locate();
    if (!where.local) throw issuedElsewhere(tag, where.address);
    return this.current(tag, buffer);
  }

  /**
   * The buffer to go on drawing from: a plain tag's is `buffer`; a cluster-ordered tag's is the
   * tag's buffer now (a new holding or an exact range may have replaced `buffer`), closedError
   * when it has none.
   */
  current(tag: string, buffer: SegmentBuffer): SegmentBuffer {
    if (!(buffer instanceof FencedBuffer)) return buffer;
    const current = this.#buffers.get(tag);
    if (current === undefined) throw closedError();
    return current === buffer ? buffer : current;
  }

  /**
   * A range of its own (SegmentService.exactRange) allocated for the tag of `buffer`, answered:
   * a plain tag's as it lands; a cluster-ordered tag's once its buffered ranges are dropped.
   */
  exactRunAllocated(
    tag: string,
    buffer: SegmentBuffer,
    run: Promise<SegmentRun>,
  ): Promise<SegmentRun> {
    if (!(buffer instanceof FencedBuffer)) return run;
    return this.#dropBelow(tag, buffer, run);
  }

  async #dropBelow(tag: string, buffer: FencedBuffer, run: Promise<SegmentRun>) {
    const exact = await run;
    // The run was allocated after the buffered ranges, so it is above them: a cluster-ordered tag
    // drops them before the run is answered, and its next IDs come from a range allocated after it.
    if (this.#buffers.get(tag) === buffer) this.#replace(tag, buffer.holding);
    return exact;
  }

  /**
   * Replaces a cluster-ordered tag's buffer with an empty one: its ranges are never issued (its
   * IDs are lost, not reissued), and the next draw allocates a fresh range after this point.
   */
  #replace(tag: string, holding: FencedBuffer['holding']): FencedBuffer {
    const old = this.#buffers.get(tag);
    const step = old?.stats().tagStep ?? 1;
    // close() stops the old buffer at once (synchronously); its leftovers are dropped.
    old?.close().catch(() => undefined);
    const buffer = new FencedBuffer(tag, step, this.#settings, holding);
    this.#buffers.install(tag, buffer);
    return buffer;
  }

  /**
   * The start of a graceful shutdown (SegmentService.handOverIssuers): stops issuing every
   * cluster-ordered tag among `buffers`, retires each (its buffered IDs go back to the store),
   * then releases the issuer leases. Never throws.
   */
  async handOver(
    buffers: Iterable<SegmentBuffer>,
    retire: (tag: string) => Promise<void>,
  ): Promise<void> {
    const directory = this.directory;
    if (directory === undefined) return;
    const ordered: FencedBuffer[] = [];
    for (const buffer of buffers) if (buffer instanceof FencedBuffer) ordered.push(buffer);
    // Fenced first, for good; the buffered tails go back to the store, then the leases.
    for (const buffer of ordered) buffer.holding.stop();
    await Promise.all(ordered.map((buffer) => retire(buffer.tag)));
    await directory.close();
  }

  /** Gives every issuer lease back; the caller has stopped issuing first. Never throws. */
  async close(): Promise<void> {
    await this.directory?.close();
  }
}

/**
 * ISSUER_UNAVAILABLE for a cluster-ordered tag another node issues: `details.issuer` is its
 * address, where the server forwards the request (a forwarded request is answered with it).
 */
export function issuedElsewhere(tag: string, address: string): IdMintError {
  return new IdMintError(
    'ISSUER_UNAVAILABLE',
    `tag "${tag}" is issued by another node${address === '' ? ' with no address' : ''}`,
    { details: { tag, issuer: address } },
  );
}

/** The holder's address when `error` says a cluster-ordered tag is issued by another node. */
export function isIssuedElsewhere(error: unknown): string | undefined {
  return isIdMintError(error, 'ISSUER_UNAVAILABLE') && typeof error.details?.issuer === 'string'
    ? error.details.issuer
    : undefined;
}
