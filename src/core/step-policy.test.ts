import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_STEP_POLICY, nextStep, resolveStepPolicy } from './step-policy.ts';

const MIN = 60_000;

describe('dynamic step (Leaf rule)', () => {
  const policy = resolveStepPolicy();
  const step = (current: number, lastedMs: number, tagStep = 1000) => nextStep(policy, { step: current, tagStep, lastedMs });

  it("defaults to Leaf's constants", () => {
    assert.deepEqual({ ...policy }, { growBelowMs: 15 * MIN, keepBelowMs: 30 * MIN, maxStep: 1_000_000, factor: 2 });
    assert.deepEqual(resolveStepPolicy({ maxStep: undefined }), DEFAULT_STEP_POLICY);
  });

  it('doubles when the range lasted under 15 minutes, up to 1,000,000', () => {
    assert.equal(step(1000, 0), 2000);
    assert.equal(step(1000, 15 * MIN - 1), 2000);
    assert.equal(step(600_000, MIN), 1_000_000);
    assert.equal(step(1_000_000, MIN), 1_000_000);
  });

  it('keeps it from 15 to 30 minutes', () => {
    assert.equal(step(4000, 15 * MIN), 4000);
    assert.equal(step(4000, 30 * MIN - 1), 4000);
  });

  it("halves it from 30 minutes on, never below the tag's own step", () => {
    assert.equal(step(4000, 30 * MIN), 2000);
    assert.equal(step(1500, 2 * 60 * MIN), 1000);
    assert.equal(step(1000, 2 * 60 * MIN), 1000);
  });

  it("follows a tag step raised above the dynamic one, and one larger than maxStep", () => {
    assert.equal(step(2000, 20 * MIN, 5000), 5000);
    assert.equal(step(2_000_000, MIN, 2_000_000), 2_000_000);
  });

  it('takes every constant as an option, and refuses bad ones naming them', () => {
    const custom = resolveStepPolicy({ growBelowMs: 1000, keepBelowMs: 5000, maxStep: 300, factor: 3 });
    assert.equal(nextStep(custom, { step: 50, tagStep: 10, lastedMs: 999 }), 150);
    assert.equal(nextStep(custom, { step: 150, tagStep: 10, lastedMs: 10 }), 300);
    assert.equal(nextStep(custom, { step: 150, tagStep: 10, lastedMs: 4999 }), 150);
    assert.equal(nextStep(custom, { step: 150, tagStep: 10, lastedMs: 5000 }), 50);
    assert.throws(() => resolveStepPolicy({ maxStep: 0 }), /step.maxStep must be an integer from 1 to 2147483647, got 0/);
    assert.throws(() => resolveStepPolicy({ factor: 1 }), /step.factor must be an integer from 2/);
    assert.throws(() => resolveStepPolicy({ growBelowMs: 10, keepBelowMs: 5 }), /step.keepBelowMs must be an integer from 10/);
  });
});
