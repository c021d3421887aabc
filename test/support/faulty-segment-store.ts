import { IdMintError } from '../../src/core/errors.ts';
import type { IssuerLeases } from '../../src/ports/issuer-lease.ts';
import type {
  FenceReport,
  FenceRequest,
  NewTag,
  SegmentRange,
  SegmentResidue,
  SegmentStore,
  StoreHistory,
  TagChanges,
  TagListing,
  TagPage,
  TagRecord,
  TagUpdate,
} from '../../src/ports/segment-store.ts';

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

export type Operation =
  | 'allocate'
  | 'release'
  | 'listTags'
  | 'listTagChanges'
  | 'listTagPage'
  | 'getTag'
  | 'createTag'
  | 'updateTag'
  | 'reassign'
  | 'readSetEntries'
  | 'writeSetEntry'
  | 'history'
  | 'fence'
  | 'raise'
  | 'claimIssuer'
  | 'renewIssuer'
  | 'releaseIssuer'
  | 'currentIssuer';

const OPERATIONS: readonly Operation[] = [
  'allocate',
  'release',
  'listTags',
  'listTagChanges',
  'listTagPage',
  'getTag',
  'createTag',
  'updateTag',
  'reassign',
  'readSetEntries',
  'writeSetEntry',
  'history',
  'fence',
  'raise',
  'claimIssuer',
  'renewIssuer',
  'releaseIssuer',
  'currentIssuer',
];

/** A gate calls wait at, for the operations it applies to (all when undefined). */
interface Gate {
  readonly opened: Promise<void>;
  readonly operations: readonly Operation[] | undefined;
}

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
  readonly calls = Object.fromEntries(OPERATIONS.map((operation) => [operation, 0])) as Record<
    Operation,
    number
  >;
  /** The `atLeast` of every raise call, in order. */
  readonly raises: bigint[] = [];
  /**
   * Tag records the reads of the tag list returned (listTags, listTagChanges, listTagPage): the
   * rows a refresh read.
   */
  tagRowsRead = 0;
  /** The `step` argument of every allocate call, in order. */
  readonly requestedSteps: (number | undefined)[] = [];
  /** Every range the real store allocated, reply delivered or not. */
  readonly committed: SegmentRange[] = [];
  #gate: Gate | undefined;
  #replyGate: (Gate & { readonly answered: () => void }) | undefined;

  constructor(inner: SegmentStore) {
    this.inner = inner;
    this.backend = inner.backend;
  }

  /**
   * The real store's issuer leases, through the same faults, gates and counts as every other call
   * (`mode = 'fail'`: the store is cut off from the issuer and every node); absent where the real
   * store keeps none.
   */
  get issuers(): IssuerLeases | undefined {
    const inner = this.inner.issuers;
    if (inner === undefined) return undefined;
    return {
      claimIssuer: (tag, node, address, ttlMs) =>
        this.#through('claimIssuer', () => inner.claimIssuer(tag, node, address, ttlMs)),
      renewIssuer: (tag, node, epoch, ttlMs) =>
        this.#through('renewIssuer', () => inner.renewIssuer(tag, node, epoch, ttlMs)),
      releaseIssuer: (tag, node, epoch) =>
        this.#through('releaseIssuer', () => inner.releaseIssuer(tag, node, epoch)),
      currentIssuer: (tag) => this.#through('currentIssuer', () => inner.currentIssuer(tag)),
    };
  }

  /** The real store's residue class: a faulty database of a set is still that database. */
  get residue(): SegmentResidue | undefined {
    return this.inner.residue;
  }

  /** Forwards a set's compare-and-set (MultiSegmentStore.join) to a real store that has it. */
  reassign(
    tag: string,
    from: { maxId: bigint; residue: SegmentResidue },
    to: { maxId: bigint; residue: SegmentResidue },
  ): Promise<boolean> {
    const inner = this.inner as SegmentStore & { reassign?: FaultySegmentStore['reassign'] };
    return this.#through('reassign', () =>
      inner.reassign === undefined
        ? Promise.reject(new Error('the real store has no reassign'))
        : inner.reassign(tag, from, to),
    );
  }

  /** Forwards a set's own records (MultiSegmentStore) to a real store that has them. */
  readSetEntries(
    keys: readonly string[],
  ): Promise<({ version: number; value: string } | undefined)[]> {
    return this.#through('readSetEntries', () => this.#setRecords().readSetEntries(keys));
  }

  writeSetEntry(key: string, version: number | undefined, value: string): Promise<boolean> {
    return this.#through('writeSetEntry', () =>
      this.#setRecords().writeSetEntry(key, version, value),
    );
  }

  #setRecords(): Pick<FaultySegmentStore, 'readSetEntries' | 'writeSetEntry'> {
    const inner = this.inner as Partial<
      Pick<FaultySegmentStore, 'readSetEntries' | 'writeSetEntry'>
    >;
    if (inner.readSetEntries === undefined || inner.writeSetEntry === undefined)
      throw new Error('no set records');
    return inner as Pick<FaultySegmentStore, 'readSetEntries' | 'writeSetEntry'>;
  }

  /**
   * Holds every call that starts from now on (only calls of `operations`, when given) before it
   * reaches the real store, until the returned function is called. A later hold replaces this
   * one for calls that start after it, so two holds release two groups of calls separately.
   */
  hold(operations?: readonly Operation[]): () => void {
    let open: () => void = () => undefined;
    const gate: Gate = { opened: new Promise<void>((resolve) => (open = resolve)), operations };
    this.#gate = gate;
    return () => {
      if (this.#gate === gate) this.#gate = undefined;
      open();
    };
  }

  /**
   * Lets the next calls of `operation` run on the real store, then holds their answers until
   * `release()`: the interleaving of a call that has read and not yet landed. `answered`
   * resolves when the first of them has its answer from the real store.
   */
  holdReplies(operation: Operation): {
    readonly answered: Promise<void>;
    readonly release: () => void;
  } {
    let open: () => void = () => undefined;
    let answered: () => void = () => undefined;
    const reached = new Promise<void>((resolve) => (answered = resolve));
    const gate = {
      opened: new Promise<void>((resolve) => (open = resolve)),
      operations: [operation],
      answered,
    };
    this.#replyGate = gate;
    return {
      answered: reached,
      release: () => {
        if (this.#replyGate === gate) this.#replyGate = undefined;
        open();
      },
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

  history(): Promise<StoreHistory[]> {
    return this.#through('history', () => this.inner.history());
  }

  fence(request?: FenceRequest): Promise<FenceReport[]> {
    return this.#through('fence', () => this.inner.fence(request));
  }

  raise(tag: string, atLeast: bigint): Promise<boolean> {
    this.raises.push(atLeast);
    return this.#through('raise', () => this.inner.raise(tag, atLeast));
  }

  listTags(): Promise<TagRecord[]> {
    return this.#through('listTags', async () => this.#counted(await this.inner.listTags()));
  }

  listTagChanges(since: string | undefined): Promise<TagChanges> {
    return this.#through('listTagChanges', async () => {
      const changes = await this.inner.listTagChanges(since);
      this.#counted(changes.records);
      return changes;
    });
  }

  listTagPage(after: string | undefined, limit: number): Promise<TagPage> {
    return this.#through('listTagPage', async () => {
      const page = await this.inner.listTagPage(after, limit);
      this.#counted(page.records);
      return page;
    });
  }

  #counted<R extends TagListing>(records: R[]): R[] {
    this.tagRowsRead += records.length;
    return records;
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
    const gate = this.#gate;
    if (
      gate !== undefined &&
      (gate.operations === undefined || gate.operations.includes(operation))
    )
      await gate.opened;
    const replyGate =
      this.#replyGate?.operations?.includes(operation) === true ? this.#replyGate : undefined;
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    if (mode === 'fail')
      throw new IdMintError('STORE_UNAVAILABLE', `injected failure: ${operation}`);
    if (mode === 'hang') return never();
    const result = await forward();
    if (replyGate !== undefined) {
      replyGate.answered();
      await replyGate.opened;
    }
    if (mode === 'lose-reply') return never();
    return result;
  }
}

function never<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}
