import { IdMintError } from './errors.ts';
import { MAX_TAG_STEP } from './segment-limits.ts';

/**
 * Leaf's dynamic step: a tag that burns through its ranges quickly gets larger ranges (fewer
 * database round trips), a quiet tag gets smaller ones (fewer IDs wasted on restart). Every
 * constant is configurable; the defaults are Leaf's.
 */

/** Options for the dynamic step; absent fields take Leaf's values. */
export interface StepPolicyOptions {
  /**
   * A range that lasted less than this (ms) grows the step. Default 15 min: Leaf's SEGMENT_DURATION
   * (SegmentIDGenImpl.java).
   */
  readonly growBelowMs?: number;
  /**
   * A range that lasted at least growBelowMs but less than this (ms) keeps the step; longer shrinks
   * it. Default 30 min: twice SEGMENT_DURATION.
   */
  readonly keepBelowMs?: number;
  /**
   * A step grows only while the result stays at or below this. Default 1,000,000: Leaf's MAX_STEP
   * (SegmentIDGenImpl.java).
   */
  readonly maxStep?: number;
  /** Growth and shrink factor, an integer >= 2. Default 2: Leaf doubles and halves. */
  readonly factor?: number;
}

/** A validated, complete step policy. */
export interface StepPolicy {
  readonly growBelowMs: number;
  readonly keepBelowMs: number;
  readonly maxStep: number;
  readonly factor: number;
}

export const DEFAULT_STEP_POLICY: StepPolicy = Object.freeze({
  growBelowMs: 15 * 60_000,
  keepBelowMs: 30 * 60_000,
  maxStep: 1_000_000,
  factor: 2,
});

/** Fills in defaults and validates; throws INVALID_ARGUMENT naming the bad option. */
export function resolveStepPolicy(options: StepPolicyOptions = {}): StepPolicy {
  const policy = { ...DEFAULT_STEP_POLICY, ...definedOnly(options) };
  checkInteger('step.growBelowMs', policy.growBelowMs, 0, Number.MAX_SAFE_INTEGER);
  checkInteger('step.keepBelowMs', policy.keepBelowMs, policy.growBelowMs, Number.MAX_SAFE_INTEGER);
  checkInteger('step.maxStep', policy.maxStep, 1, MAX_TAG_STEP);
  checkInteger('step.factor', policy.factor, 2, 1024);
  return Object.freeze(policy);
}

/** What the next step depends on. */
export interface StepInput {
  /** Step of the previous range. */
  readonly step: number;
  /**
   * The tag's step as stored when the previous range was allocated (Leaf's `minStep`, which
   * Leaf sets from the row read with each allocation): a shrink never goes below it.
   */
  readonly minStep: number;
  /** How long the previous range lasted: ms between the two previous loads. */
  readonly lastedMs: number;
}

/**
 * The step for the next range, exactly Leaf's rule (SegmentIDGenImpl.updateSegmentFromDb):
 * lasted < growBelowMs: multiply by `factor`, unless that would pass `maxStep` (then keep it:
 * Leaf does not clamp, so 600,000 stays 600,000 under a maxStep of 1,000,000); lasted <
 * keepBelowMs: keep; otherwise divide by `factor` (rounding down), unless that would go below
 * `minStep` (then keep it: Leaf does not clamp here either, so 1,500 stays 1,500 over a minStep
 * of 1,000). Only the third and later loads of a buffer use it: the first two take the stored step.
 *
 * The result stays within 1 to 2^31-1: growth needs `step * factor <= maxStep <= 2^31-1`, and a
 * shrink needs the result `>= minStep >= 1`. (Leaf's `nextStep * 2` overflows an int above 2^30;
 * here the product is a double, exact at these sizes, so a huge step simply stays.)
 */
export function nextStep(policy: StepPolicy, input: StepInput): number {
  const { step, minStep, lastedMs } = input;
  if (lastedMs < policy.growBelowMs) {
    const grown = step * policy.factor;
    return grown > policy.maxStep ? step : grown;
  }
  if (lastedMs < policy.keepBelowMs) return step;
  const shrunk = Math.floor(step / policy.factor);
  return shrunk >= minStep ? shrunk : step;
}

function checkInteger(name: string, value: unknown, min: number, max: number): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new IdMintError(
      'INVALID_ARGUMENT',
      `${name} must be an integer from ${min} to ${max}, got ${String(value)}`,
    );
  }
}

/** Drops keys whose value is undefined, so spreading options cannot erase a default. */
function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(
    Object.entries(options).filter(([, value]) => value !== undefined),
  ) as Partial<T>;
}
