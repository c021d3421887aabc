import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_STEP_POLICY, nextStep, resolveStepPolicy } from './step-policy.ts';

const MIN = 60_000;

// Leaf's rule as SegmentIDGenImpl.updateSegmentFromDb writes it: under SEGMENT_DURATION (15 min)
// double unless the double passes MAX_STEP; under twice that keep; else halve unless the half
// is below minStep (the step stored in the table). Neither bound clamps: the step stays.
describe('dynamic step (Leaf rule, exactly)', () => {
  const policy = resolveStepPolicy();
  const step = (current: number, lastedMs: number, minStep = 1000) =>
    nextStep(policy, { step: current, minStep, lastedMs });

  it("defaults to Leaf's constants", () => {
    assert.deepEqual(
      { ...policy },
      { growBelowMs: 15 * MIN, keepBelowMs: 30 * MIN, maxStep: 1_000_000, factor: 2 },
    );
    assert.deepEqual(resolveStepPolicy({ maxStep: undefined }), DEFAULT_STEP_POLICY);
  });

  it('doubles under 15 minutes, unless the double passes 1,000,000', () => {
    assert.equal(step(1000, 0), 2000);
    assert.equal(step(1000, 15 * MIN - 1), 2000);
    assert.equal(step(500_000, MIN), 1_000_000);
    // Leaf: `if (nextStep * 2 > MAX_STEP) { do nothing }`: 600,000 stays 600,000, not 1,000,000.
    assert.equal(step(600_000, MIN), 600_000);
    assert.equal(step(1_000_000, MIN), 1_000_000);
    // A stored step above MAX_STEP never grows, and is not cut down either.
    assert.equal(step(2_000_000, MIN, 2_000_000), 2_000_000);
  });

  it('keeps it from 15 to 30 minutes', () => {
    assert.equal(step(4000, 15 * MIN), 4000);
    assert.equal(step(4000, 30 * MIN - 1), 4000);
  });

  it('halves from 30 minutes on, unless the half is below the stored step', () => {
    assert.equal(step(4000, 30 * MIN), 2000);
    assert.equal(step(2000, 2 * 60 * MIN), 1000);
    assert.equal(step(1000, 2 * 60 * MIN), 1000);
    // Leaf: `nextStep / 2 >= minStep ? nextStep / 2 : nextStep`: 1,500 over 1,000 stays 1,500.
    assert.equal(step(1500, 2 * 60 * MIN), 1500);
    // Integer division, as Java's: 4,001 halves to 2,000.
    assert.equal(step(4001, 30 * MIN, 1), 2000);
  });

  it('grows to a stored step raised above the dynamic one, as in Leaf', () => {
    assert.equal(step(2000, 20 * MIN, 5000), 2000);
    assert.equal(step(2000, 40 * MIN, 5000), 2000);
    assert.equal(step(2000, MIN, 5000), 4000);
  });

  it('takes every constant as an option, and refuses bad ones naming them', () => {
    const custom = resolveStepPolicy({
      growBelowMs: 1000,
      keepBelowMs: 5000,
      maxStep: 300,
      factor: 3,
    });
    assert.equal(nextStep(custom, { step: 50, minStep: 10, lastedMs: 999 }), 150);
    assert.equal(
      nextStep(custom, { step: 150, minStep: 10, lastedMs: 10 }),
      150,
      '450 would pass maxStep 300: it stays',
    );
    assert.equal(nextStep(custom, { step: 100, minStep: 10, lastedMs: 10 }), 300);
    assert.equal(nextStep(custom, { step: 150, minStep: 10, lastedMs: 4999 }), 150);
    assert.equal(nextStep(custom, { step: 150, minStep: 10, lastedMs: 5000 }), 50);
    assert.equal(
      nextStep(custom, { step: 20, minStep: 10, lastedMs: 5000 }),
      20,
      '6 would be below minStep 10: it stays',
    );
    assert.throws(
      () => resolveStepPolicy({ maxStep: 0 }),
      /step.maxStep must be an integer from 1 to 2147483647, got 0/,
    );
    assert.throws(() => resolveStepPolicy({ factor: 1 }), /step.factor must be an integer from 2/);
    assert.throws(
      () => resolveStepPolicy({ growBelowMs: 10, keepBelowMs: 5 }),
      /step.keepBelowMs must be an integer from 10/,
    );
  });
});
