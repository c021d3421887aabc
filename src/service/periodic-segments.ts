import { setTimeout as sleep } from 'node:timers/promises';
import { IdMintError, isIdMintError } from '../core/errors.ts';
import { type PeriodicSequence, parsePeriodic, type PeriodWindow } from '../core/periodic.ts';
import type { Clock } from '../ports/clock.ts';
import type { SegmentStore, TagRecord } from '../ports/segment-store.ts';
import { withTimeout } from '../shared/timeout.ts';
import type { SegmentService } from './segment-service.ts';

/** Options for {@link PeriodicSegments}; durations in ms. */
export interface PeriodicSegmentsOptions {
  /** Draws each period's IDs from its row, as for any tag. */
  readonly service: SegmentService;
  /** Reads periodic tags' options and creates period rows on demand. */
  readonly store: SegmentStore;
  readonly clock: Clock;
  /**
   * The most two nodes' clocks may differ (`segment.periodSkewMs`): after its clock passes a
   * boundary, a node issues nothing of the tag for this long, so that no node issues an ID of the
   * new period while any node's clock is still before the boundary.
   */
  readonly skewMs: number;
  /** How long a request may wait out that pause before PERIOD_SWITCHING. */
  readonly waitTimeoutMs: number;
  /** How long a store call (a look-up, a period row's creation) may take. */
  readonly loadTimeoutMs: number;
}

/** A batch of formatted IDs, all of one period. */
export interface PeriodicBatch {
  /** The period key: `20261127`, `202611`. */
  readonly period: string;
  readonly ids: string[];
}

/** What this node knows of a periodic tag: its option, its step, the period it serves. */
interface PeriodicTag {
  readonly sequence: PeriodicSequence;
  /** The period served (or last served): never goes back, even when the clock does. */
  window: PeriodWindow | undefined;
  /** The period row known to exist (created or found), by key. */
  ready: string | undefined;
  /** A period row being looked up or created, shared by the requests that need it. */
  creating: Promise<void> | undefined;
}

/** How long a plain tag is remembered as plain before the store is asked again. */
const PLAIN_MEMORY_MS = 60_000;
/**
 * How long a tag the store does not have is remembered as such (SegmentService's negative cache).
 */
const MISSING_MEMORY_MS = 2000;

/**
 * Periodic sequences (docs/segments.md, Periodic sequences): formatted IDs such as
 * `20261127000042` whose sequence restarts each day or month. Each period draws from its own row,
 * `<tag>@<period key>`, created on demand with the tag's step, through the SegmentService like any
 * tag (ranges, prefetch, give-back). This class decides which period a node may serve when:
 *
 * - it serves period P only while its clock is inside P, and never a period before one it served;
 * - after its clock passes the start B of a period, it issues nothing of the tag until B + skewMs:
 *   every node's clock is then past B (they differ by at most skewMs), so no ID of the new period
 *   is issued before the boundary by any node's clock, and the old period's last IDs were issued
 *   while this node's clock was before B, so before B + skewMs by any node's clock.
 */
export class PeriodicSegments {
  readonly #service: SegmentService;
  readonly #store: SegmentStore;
  readonly #clock: Clock;
  readonly #skewMs: number;
  readonly #waitTimeoutMs: number;
  readonly #loadTimeoutMs: number;
  readonly #tags = new Map<string, PeriodicTag>();
  /** Plain tags -> clock time until which they are known as plain. */
  readonly #plain = new Map<string, number>();
  readonly #lookups = new Map<string, Promise<PeriodicTag | undefined>>();
  /** Old periods' rows being given back (see {@link settled}). */
  readonly #retiring = new Set<Promise<void>>();

  constructor(options: PeriodicSegmentsOptions) {
    this.#service = options.service;
    this.#store = options.store;
    this.#clock = options.clock;
    this.#skewMs = options.skewMs;
    this.#waitTimeoutMs = options.waitTimeoutMs;
    this.#loadTimeoutMs = options.loadTimeoutMs;
  }

  /**
   * The tag's option when it is known here as periodic; undefined otherwise (ask {@link lookup}).
   */
  known(tag: string): PeriodicSequence | undefined {
    return this.#tags.get(tag)?.sequence;
  }

  /** Resolves once the old periods' rows retired so far have been given back (or failed to be). */
  async settled(): Promise<void> {
    await Promise.all(this.#retiring);
  }

  /** Takes a tag record just written on this node: a periodic tag is known at once. */
  tagChanged(record: TagRecord): void {
    if (record.periodic !== undefined) this.#adopt(record);
  }

  /**
   * The tag's option if the tag is periodic, from the store on first sight (plain tags are
   * remembered for a minute). Throws STORE_UNAVAILABLE, TAG_MISCONFIGURED (an option this
   * version cannot read).
   */
  async lookup(tag: string): Promise<PeriodicSequence | undefined> {
    const known = this.#tags.get(tag);
    if (known !== undefined) return known.sequence;
    const until = this.#plain.get(tag);
    if (until !== undefined && this.#clock.now() < until) return undefined;
    let pending = this.#lookups.get(tag);
    if (pending === undefined) {
      pending = this.#bounded(this.#store.getTag(tag), `looking up tag "${tag}"`)
        .then((record) => {
          if (record?.periodic !== undefined && record.tag === tag) return this.#adopt(record);
          if (this.#plain.size >= 10_000) this.#plain.clear();
          // A plain tag stays plain (the option is set only at creation); a missing one may be
          // created periodic any moment, so it is asked for again soon.
          const memory = record === undefined ? MISSING_MEMORY_MS : PLAIN_MEMORY_MS;
          this.#plain.set(tag, this.#clock.now() + memory);
          return undefined;
        })
        .finally(() => this.#lookups.delete(tag));
      this.#lookups.set(tag, pending);
    }
    return (await pending)?.sequence;
  }

  /**
   * The next formatted ID if the tag is known as periodic and an ID of the period it serves is
   * buffered; else undefined (call {@link next}). Never waits, never throws.
   */
  nextSync(tag: string): string | undefined {
    const entry = this.#tags.get(tag);
    if (entry === undefined) return undefined;
    const now = this.#clock.now();
    const window = entry.window;
    if (window === undefined || entry.ready !== window.key) return undefined;
    if (now < window.start + this.#skewMs || now >= window.end) return undefined;
    const seq = this.#service.nextSync(entry.sequence.rowTag(tag, window));
    if (seq === undefined || seq > entry.sequence.maxSeq) return undefined;
    return entry.sequence.format(tag, window, seq);
  }

  /** The next formatted ID of a periodic tag. Throws as {@link nextBatch}. */
  async next(tag: string): Promise<string> {
    return (await this.nextBatch(tag, 1)).ids[0] as string;
  }

  /**
   * `count` formatted IDs of a periodic tag, all of the period this node's clock is in, in order.
   * Throws IdMintError: TAG_NOT_FOUND (not a periodic tag), PERIOD_SWITCHING (at a boundary, for
   * longer than a request waits; retryable), PERIOD_SEQUENCE_EXHAUSTED (the period's `{seq:N}` is
   * used up: nothing is issued), CLOCK_MOVED_BACKWARDS (the clock is back in a period before one
   * served), and what SegmentService.nextBatch throws.
   */
  async nextBatch(tag: string, count: number): Promise<PeriodicBatch> {
    const entry = this.#tags.get(tag) ?? (await this.#lookupEntry(tag));
    // Two rounds at most: one draw that outlives its period is discarded, the next is in the new.
    for (let round = 0; ; round++) {
      const window = await this.#servable(tag, entry);
      const row = entry.sequence.rowTag(tag, window);
      await this.#ensureRow(tag, entry, window);
      const seqs =
        this.#service.nextBatchSync(row, count) ?? (await this.#service.nextBatch(row, count));
      // Issued only while this node's clock is still in the period: a draw that waited for a
      // range past the boundary is discarded (its numbers are skipped, never issued later).
      if (this.#clock.now() < window.end) {
        const last = seqs[seqs.length - 1] as bigint;
        // All or nothing: the last is the largest, so if it fits, every one does.
        entry.sequence.format(tag, window, last);
        return { period: window.key, ids: seqs.map((s) => entry.sequence.format(tag, window, s)) };
      }
      if (round >= 1) throw switching(tag, window.end + this.#skewMs - this.#clock.now());
    }
  }

  async #lookupEntry(tag: string): Promise<PeriodicTag> {
    await this.lookup(tag);
    const entry = this.#tags.get(tag);
    if (entry === undefined)
      throw new IdMintError('TAG_NOT_FOUND', `tag "${tag}" is not a periodic tag`, {
        details: { tag },
      });
    return entry;
  }

  /**
   * The period this node may serve now, waiting out the pause after a boundary when it is short
   * enough. Moves to a new period (retiring the old one's row here) when the clock passes it.
   */
  async #servable(tag: string, entry: PeriodicTag): Promise<PeriodWindow> {
    for (let waited = false; ; waited = true) {
      const now = this.#clock.now();
      let window = entry.window;
      if (window === undefined || now >= window.end || now < window.start) {
        const next = entry.sequence.windowAt(now);
        if (window !== undefined && next.key < window.key)
          throw new IdMintError(
            'CLOCK_MOVED_BACKWARDS',
            `tag "${tag}": the clock reads period ${next.key}, before period ${window.key} ` +
              `already served; no ID of an earlier period is issued again`,
            { details: { tag, offsetMs: window.start - now } },
          );
        if (window !== undefined && next.key !== window.key) {
          // Off the request path: the give-back is a store call, and never throws.
          const retiring = this.#service.retire(entry.sequence.rowTag(tag, window));
          this.#retiring.add(retiring);
          void retiring.finally(() => this.#retiring.delete(retiring));
        }
        entry.window = window = next;
      }
      const pause = window.start + this.#skewMs - now;
      if (pause <= 0) return window;
      if (waited || pause > this.#waitTimeoutMs) throw switching(tag, pause);
      await sleep(pause);
    }
  }

  /** Makes sure the period's row exists (created with the tag's step and start) and is served. */
  async #ensureRow(tag: string, entry: PeriodicTag, window: PeriodWindow): Promise<void> {
    while (entry.ready !== window.key) {
      entry.creating ??= this.#createRow(tag, entry, window).finally(() => {
        entry.creating = undefined;
      });
      await entry.creating;
    }
  }

  async #createRow(tag: string, entry: PeriodicTag, window: PeriodWindow): Promise<void> {
    const row = entry.sequence.rowTag(tag, window);
    const found = await this.#bounded(this.#store.getTag(row), `looking up "${row}"`);
    let step = 0;
    if (found === undefined) {
      // The tag's step as it is now: a new step applies from the next period's row on.
      const base = await this.#bounded(this.#store.getTag(tag), `looking up "${tag}"`);
      if (base?.periodic === undefined)
        throw new IdMintError('TAG_NOT_FOUND', `tag "${tag}" is no longer a periodic tag`, {
          details: { tag },
        });
      step = base.step;
      // The next period's row exists: another node served it, so its clock passed this period's
      // end (plus the pause) while ours is still inside it, farther apart than the skew allowed.
      // Creating this row now could re-create one already cleaned, and issue its numbers again.
      const next = entry.sequence.windowAt(window.end);
      const later = entry.sequence.rowTag(tag, next);
      if ((await this.#bounded(this.#store.getTag(later), `looking up "${later}"`)) !== undefined)
        throw new IdMintError(
          'CLOCK_SKEW',
          `tag "${tag}": period ${next.key} has begun on another node while this node's clock ` +
            `reads period ${window.key}; this clock is behind the others by more than ` +
            `segment.periodSkewMs`,
          { details: { tag, period: window.key, later: next.key } },
        );
    }
    const record =
      found ??
      (await this.#bounded(
        this.#store
          .createTag({ tag: row, step, startId: BigInt(entry.sequence.start) })
          .catch(async (error: unknown) => {
            // Another node created it first: that row is the period's, whatever its start.
            if (isIdMintError(error, 'TAG_EXISTS')) {
              const again = await this.#store.getTag(row);
              if (again !== undefined) return again;
            }
            throw error;
          }),
        `creating "${row}"`,
      ));
    this.#service.tagChanged(record);
    entry.ready = window.key;
  }

  #adopt(record: TagRecord): PeriodicTag {
    const existing = this.#tags.get(record.tag);
    if (existing !== undefined) return existing;
    let sequence: PeriodicSequence;
    try {
      sequence = parsePeriodic(record.periodic as string);
    } catch (error) {
      throw new IdMintError(
        'TAG_MISCONFIGURED',
        `tag "${record.tag}" has a periodic option this server cannot read: ` +
          `${(error as Error).message}`,
        { cause: error, details: { tag: record.tag } },
      );
    }
    const entry: PeriodicTag = {
      sequence,
      window: undefined,
      ready: undefined,
      creating: undefined,
    };
    this.#tags.set(record.tag, entry);
    this.#plain.delete(record.tag);
    return entry;
  }

  #bounded<T>(call: Promise<T>, what: string): Promise<T> {
    return withTimeout(
      call,
      this.#loadTimeoutMs,
      () =>
        new IdMintError('STORE_UNAVAILABLE', `${what} took longer than ${this.#loadTimeoutMs} ms`, {
          details: { timeoutMs: this.#loadTimeoutMs },
        }),
    );
  }
}

function switching(tag: string, pauseMs: number): IdMintError {
  const ms = Math.max(1, Math.ceil(pauseMs));
  return new IdMintError(
    'PERIOD_SWITCHING',
    `tag "${tag}" is at a period boundary: IDs of the new period are issued in ${ms} ms, once ` +
      `every node's clock is past it`,
    { details: { tag, retryAfterMs: ms } },
  );
}
