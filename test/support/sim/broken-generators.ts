import { SnowflakeGenerator, type SnowflakeOptions } from '../../../src/core/snowflake.ts';
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
  return (make, node) => {
    const clock = node.clock.clock;
    return new (class extends SnowflakeGenerator {
      override setValidUntil(ms: number): void {
        super.setValidUntil(Number.isFinite(ms) ? clock.now() + ttlMs - node.marginMs : ms);
      }
    })(generatorOptions(make, node));
  };
}

/**
 * A generator that stays open when its holder retires it (sets its fence to -Infinity) while
 * `staysOpen` says so: a holder that forgets to fence on some path.
 */
function ignoringRetire(staysOpen: (generator: SnowflakeGenerator) => boolean): GeneratorFactory {
  return (make, node) =>
    new (class extends SnowflakeGenerator {
      override setValidUntil(ms: number): void {
        if (ms === Number.NEGATIVE_INFINITY && staysOpen(this)) return;
        super.setValidUntil(ms);
      }
    })(generatorOptions(make, node));
}

/** What every generator here is made with: the node's clock, layout and rollback policy. */
function generatorOptions(
  { workerId, lastTimestamp }: Parameters<GeneratorFactory>[0],
  node: Parameters<GeneratorFactory>[1],
): SnowflakeOptions {
  const { layout, rollback } = node;
  return { clock: node.clock.clock, layout, workerId, lastTimestamp, rollback };
}

/**
 * A holder that does not stop issuing when it retires a lease (close(), a loss, a switch): the
 * fence stays where the last renewal put it, so IDs keep coming after the release recorded the
 * exact last timestamp and freed the worker ID.
 */
export const noRetire = ignoringRetire((generator) => Number.isFinite(generator.validUntil()));

/**
 * A holder whose `switch` does not fence the generator it moves away from: a generator that saw
 * its clock go back (what makes a switch) ignores being retired, so once its clock is past its
 * last timestamp again it can issue beside the new worker ID, after its lease was released.
 */
export const noRetireOnSwitch = ignoringRetire((generator) => generator.rollbackCount() > 0);

/**
 * A `borrow` generator leading its clock five times further than the lead its holder reports
 * in its horizons (LeaseTerms.leadMs), as a holder that took the lead from another setting would.
 */
export const overBorrow: GeneratorFactory = (make, node) => {
  const { rollback } = node;
  const maxLeadMs = rollback.policy === 'borrow' ? 5 * (rollback.maxLeadMs ?? 1000) : undefined;
  const options = generatorOptions(make, node);
  return new SnowflakeGenerator(
    maxLeadMs === undefined ? options : { ...options, rollback: { ...rollback, maxLeadMs } },
  );
};
