import { SnowflakeGenerator } from '../../../src/core/snowflake.ts';
import type { GeneratorFactory } from './sim-node.ts';

// Deliberately broken lease holders, for the test that shows the simulation catches them. The
// holder itself stays the production code: only the fence it sets on its generator is bent, as
// a holder with the bug would set it. Nothing in src/ knows about them.

/**
 * A renewal's reply trusted as if it had just been granted: the fence counted from when the
 * reply arrived, not from when the renewal was sent, so a late reply lifts the fence past the
 * lease's end.
 */
export function trustLateReply(ttlMs: number): GeneratorFactory {
  return ({ workerId, lastTimestamp }, node) => {
    const clock = node.clock.clock;
    return new (class extends SnowflakeGenerator {
      override setValidUntil(ms: number): void {
        super.setValidUntil(Number.isFinite(ms) ? clock.now() + ttlMs - node.marginMs : ms);
      }
    })({ clock, layout: node.layout, workerId, lastTimestamp, rollback: node.rollback });
  };
}

/**
 * A holder that does not stop issuing when it retires a lease (close(), a loss, a switch): the
 * fence stays where the last renewal put it, so IDs keep coming after the release recorded the
 * exact last timestamp and freed the worker ID.
 */
export const noRetire: GeneratorFactory = ({ workerId, lastTimestamp }, node) =>
  new (class extends SnowflakeGenerator {
    override setValidUntil(ms: number): void {
      if (ms === Number.NEGATIVE_INFINITY && Number.isFinite(this.validUntil())) return;
      super.setValidUntil(ms);
    }
  })({
    clock: node.clock.clock,
    layout: node.layout,
    workerId,
    lastTimestamp,
    rollback: node.rollback,
  });
