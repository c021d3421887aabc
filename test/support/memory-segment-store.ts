import { IdMintError } from '../../src/core/errors.ts';
import { MAX_SEGMENT_ID, checkDescription, checkStep, checkTag, idSpaceExhausted, tagNotFound } from '../../src/core/segment-limits.ts';
import type { NewTag, SegmentRange, SegmentStore, TagRecord, TagUpdate } from '../../src/ports/segment-store.ts';
import { byTag, checkNewTag, checkRelease } from '../../src/stores/store-support.ts';

/**
 * A SegmentStore in a Map, for unit tests of the double buffer: instant and deterministic. It
 * passes the same conformance suite as the real adapters (test/segment-stores.test.ts), so tests
 * built on it exercise the port's real contract. `deleteTag` stands in for an operator's DELETE.
 */
export class MemorySegmentStore implements SegmentStore {
  readonly backend = 'memory';
  readonly #tags = new Map<string, { maxId: bigint; step: number; description: string | null; updatedAt: Date }>();

  async init(): Promise<void> {}

  async allocate(tag: string, step?: number): Promise<SegmentRange> {
    const requested = step === undefined ? undefined : checkStep(step);
    const row = this.#row(checkTag(tag));
    const used = requested ?? row.step;
    if (row.maxId > MAX_SEGMENT_ID - BigInt(used)) throw idSpaceExhausted(tag, row.maxId, used);
    row.maxId += BigInt(used);
    row.updatedAt = new Date();
    return { tag, start: row.maxId - BigInt(used), end: row.maxId, step: used, tagStep: row.step };
  }

  async release(tag: string, from: bigint, to: bigint): Promise<boolean> {
    checkRelease(from, to);
    const row = this.#tags.get(checkTag(tag));
    if (row === undefined || row.maxId !== to) return false;
    row.maxId = from;
    return true;
  }

  async listTags(): Promise<TagRecord[]> {
    return [...this.#tags.keys()].map((tag) => this.#record(tag)).sort(byTag);
  }

  async getTag(tag: string): Promise<TagRecord | undefined> {
    return this.#tags.has(checkTag(tag)) ? this.#record(tag) : undefined;
  }

  async createTag(tag: NewTag): Promise<TagRecord> {
    const v = checkNewTag(tag);
    if (this.#tags.has(v.tag)) throw new IdMintError('TAG_EXISTS', `tag "${v.tag}" already exists`);
    this.#tags.set(v.tag, { maxId: v.startId, step: v.step, description: v.description, updatedAt: new Date() });
    return this.#record(v.tag);
  }

  async updateTag(tag: string, update: TagUpdate): Promise<TagRecord> {
    const step = update.step === undefined ? undefined : checkStep(update.step);
    const description = update.description === undefined ? undefined : checkDescription(update.description);
    const row = this.#row(checkTag(tag));
    if (step !== undefined) row.step = step;
    if (description !== undefined) row.description = description;
    return this.#record(tag);
  }

  async close(): Promise<void> {}

  /** Removes a tag, as an operator's DELETE would. */
  deleteTag(tag: string): void {
    this.#tags.delete(tag);
  }

  #row(tag: string) {
    const row = this.#tags.get(tag);
    if (row === undefined) throw tagNotFound(tag);
    return row;
  }

  #record(tag: string): TagRecord {
    const row = this.#row(tag);
    return { tag, maxId: row.maxId, step: row.step, description: row.description, updatedAt: row.updatedAt };
  }
}
