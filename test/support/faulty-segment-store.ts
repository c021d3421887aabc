import { IdMintError } from '../../src/core/errors.ts';
import type { NewTag, SegmentRange, SegmentStore, TagRecord, TagUpdate } from '../../src/ports/segment-store.ts';

/** How the next store calls behave. */
export type FaultMode =
  /** Forward to the real store. */
  | 'pass'
  /** Fail at once with STORE_UNAVAILABLE, touching nothing (the database is down). */
  | 'fail'
  /** Never answer, touching nothing (a black hole: the request is lost on the way). */
  | 'hang'
  /** Forward (the store commits), then never answer: the caller cannot know the outcome. */
  | 'lose-reply';

type Operation = 'allocate' | 'release' | 'listTags' | 'getTag' | 'createTag' | 'updateTag';

/**
 * Wraps a real SegmentStore to inject faults: delays, failures, hangs, lost replies, and a gate
 * that holds calls until a test lets them through. Counts calls and records every range the real
 * store allocated, including those whose reply was lost, so tests can prove such a range is
 * never issued.
 */
export class FaultySegmentStore implements SegmentStore {
  readonly inner: SegmentStore;
  readonly backend: string;
  mode: FaultMode = 'pass';
  /** Every call waits this long first (real ms). */
  delayMs = 0;
  /** Calls per operation, counted when they start. */
  readonly calls: Record<Operation, number> = { allocate: 0, release: 0, listTags: 0, getTag: 0, createTag: 0, updateTag: 0 };
  /** The `step` argument of every allocate call, in order. */
  readonly requestedSteps: (number | undefined)[] = [];
  /** Every range the real store allocated, reply delivered or not. */
  readonly committed: SegmentRange[] = [];
  #gate: Promise<void> | undefined;

  constructor(inner: SegmentStore) {
    this.inner = inner;
    this.backend = inner.backend;
  }

  /** Holds every call that starts from now on until the returned function is called. */
  hold(): () => void {
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    this.#gate = gate;
    return () => {
      if (this.#gate === gate) this.#gate = undefined;
      open();
    };
  }

  init(): Promise<void> {
    return this.inner.init();
  }

  allocate(tag: string, step?: number): Promise<SegmentRange> {
    this.requestedSteps.push(step);
    return this.#through('allocate', async () => {
      const range = await this.inner.allocate(tag, step);
      this.committed.push(range);
      return range;
    });
  }

  release(tag: string, from: bigint, to: bigint): Promise<boolean> {
    return this.#through('release', () => this.inner.release(tag, from, to));
  }

  listTags(): Promise<TagRecord[]> {
    return this.#through('listTags', () => this.inner.listTags());
  }

  getTag(tag: string): Promise<TagRecord | undefined> {
    return this.#through('getTag', () => this.inner.getTag(tag));
  }

  createTag(tag: NewTag): Promise<TagRecord> {
    return this.#through('createTag', () => this.inner.createTag(tag));
  }

  updateTag(tag: string, update: TagUpdate): Promise<TagRecord> {
    return this.#through('updateTag', () => this.inner.updateTag(tag, update));
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  async #through<T>(operation: Operation, forward: () => Promise<T>): Promise<T> {
    this.calls[operation]++;
    const mode = this.mode;
    if (this.#gate !== undefined) await this.#gate;
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    if (mode === 'fail') throw new IdMintError('STORE_UNAVAILABLE', `injected failure: ${operation}`);
    if (mode === 'hang') return never();
    const result = await forward();
    if (mode === 'lose-reply') return never();
    return result;
  }
}

function never<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}
