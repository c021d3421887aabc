import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FAILURE_STANDS_MS, FirstAnswer } from './first-answer.ts';

const noAnswer = new Error('timed out after 2000 ms');
const refusal = new Error('permission denied');
const unanswered = (error: unknown) => error === noAnswer;

describe('FirstAnswer', () => {
  /** A gate on a clock the test moves, and a count of the calls that reached the backend. */
  const gate = () => {
    const clock = { now: 0 };
    return { clock, first: new FirstAnswer(() => clock.now), calls: { made: 0 } };
  };
  const failing = (calls: { made: number }, error: Error) => async () => {
    calls.made++;
    throw error;
  };

  it('a failure for want of an answer stands for the calls just after it', async () => {
    const { clock, first, calls } = gate();
    await assert.rejects(first.run(failing(calls, noAnswer), unanswered), noAnswer);
    clock.now += FAILURE_STANDS_MS - 1;
    await assert.rejects(first.run(failing(calls, new Error('other')), unanswered), noAnswer);
    assert.equal(calls.made, 1);
    clock.now += 1;
    await assert.rejects(first.run(failing(calls, noAnswer), unanswered), noAnswer);
    assert.equal(calls.made, 2, 'tried again once the failure has stood its time');
  });

  it('once the backend has answered, every call reaches it', async () => {
    const { first, calls } = gate();
    assert.equal(await first.run(async () => 'ok', unanswered), 'ok');
    assert.equal(first.answered, true);
    await assert.rejects(first.run(failing(calls, noAnswer), unanswered), noAnswer);
    await assert.rejects(first.run(failing(calls, noAnswer), unanswered), noAnswer);
    assert.equal(calls.made, 2);
  });

  it("a refusal is the backend's answer: the next call reaches it", async () => {
    const { first, calls } = gate();
    await assert.rejects(first.run(failing(calls, refusal), unanswered), refusal);
    assert.equal(first.answered, true);
    await assert.rejects(first.run(failing(calls, noAnswer), unanswered), noAnswer);
    assert.equal(calls.made, 2);
  });
});
