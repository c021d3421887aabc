import { SegmentBuffer, type SegmentBufferSettings } from '../core/segment-buffer.ts';
import type { SegmentRun } from '../core/segment-buffer.ts';
import { unavailable, type IssuerHolding } from './issuer-holding.ts';

/**
 * A cluster-ordered tag's double buffer: the segment buffer behind its issuer lease's fence. It
 * hands out nothing unless the clock reads below the holding's deadline, checked at every take
 * (one comparison on the hot path), so no ID leaves after the node stopped holding the lease.
 * A new holding replaces the buffer (OrderedTags): its ranges are never issued again.
 */
export class FencedBuffer extends SegmentBuffer {
  readonly holding: IssuerHolding;
  readonly #settings: SegmentBufferSettings;

  constructor(
    tag: string,
    tagStep: number,
    settings: SegmentBufferSettings,
    holding: IssuerHolding,
  ) {
    super(tag, tagStep, settings);
    this.#settings = settings;
    this.holding = holding;
  }

  /** True while the lease's fence is open. */
  open(): boolean {
    return this.#settings.clock.now() < this.holding.deadline;
  }

  // Every take (take, takeRun, takeExactRun) starts with nextSync: one check fences them all.
  override nextSync(): bigint | undefined {
    return this.#settings.clock.now() < this.holding.deadline ? super.nextSync() : undefined;
  }

  override available(): number {
    return this.open() ? super.available() : 0;
  }

  /** Rejects ISSUER_UNAVAILABLE once the fence is closed, so a waiting draw stops at once. */
  override async whenReady(): Promise<void> {
    if (!this.open()) throw fenced(this.tag);
    await super.whenReady();
    if (!this.open()) throw fenced(this.tag);
  }

  /** A dedicated run is answered only if the fence is still open when it lands. */
  override async allocateRun(size: number): Promise<SegmentRun> {
    if (!this.open()) throw fenced(this.tag);
    const run = await super.allocateRun(size);
    if (!this.open()) throw fenced(this.tag);
    return run;
  }
}

function fenced(tag: string) {
  return unavailable(
    tag,
    'this node stopped issuing it: its issuer lease was not confirmed in time',
  );
}
