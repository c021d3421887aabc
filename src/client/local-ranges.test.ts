// TagRanges' own rules, driven by a scripted range source and a manual clock: ordering (trim and
// drop), malformed answers, sizing that follows the rate, and failing fast while backing off. The
// HTTP side and real servers are in test/client-local*.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IdMintError, isIdMintError } from '../core/errors.ts';
import { TagRanges, localSettings, type LocalModeOptions } from './local-ranges.ts';

/** A tag's ranges over a queue of answers (or errors), with a clock the test moves. */
function scripted(answers: unknown[], options: LocalModeOptions = {}) {
  const clock = { now: 0 };
  const asked: number[] = [];
  const ranges = new TagRanges('t', localSettings({ minSize: 1, initialSize: 10, maxSize: 1000, ...options }), async (_tag, size) => {
    asked.push(size);
    const next = answers.shift();
    if (next instanceof Error) throw next;
    if (next === undefined) throw new IdMintError('SERVER_UNAVAILABLE', 'no more answers', { details: { retryAt: clock.now + 100 } });
    return next;
  }, () => clock.now);
  return { ranges, clock, asked };
}

const range = (start: number, size: number, stride = 1) => ({ tag: 't', start: String(start), end: String(start + size * stride), last: String(start + (size - 1) * stride), stride, size });

async function drain(ranges: TagRanges, n: number): Promise<bigint[]> {
  const ids: bigint[] = [];
  for (let i = 0; i < n; i++) ids.push(ranges.nextSync() ?? (await ranges.next()));
  return ids;
}

describe('TagRanges', () => {
  it('trims a range that starts below IDs already held, and drops one wholly below', async () => {
    const { ranges } = scripted([range(100, 5), range(50, 10), range(102, 6), range(200, 3)], { prefetchThreshold: 1 });
    const ids = await drain(ranges, 10);
    // [100,105); [50,60) dropped; [102,108) trimmed to [105,108); then [200,203).
    assert.deepEqual(ids, [100n, 101n, 102n, 103n, 104n, 105n, 106n, 107n, 200n, 201n]);
    assert.equal(ranges.stats().droppedIds, 13);
  });

  it("uses ranges whole in any order with ordering 'any', stepping by their stride", async () => {
    const { ranges } = scripted([range(100, 3, 2), range(51, 2, 2)], { prefetchThreshold: 1, ordering: 'any' });
    assert.deepEqual(await drain(ranges, 5), [100n, 102n, 104n, 51n, 53n]);
  });

  it('never issues from a malformed answer', async () => {
    const bad = { ...range(100, 5), size: 6 };
    const { ranges } = scripted([bad, { ...range(100, 5), tag: 'other' }, range(300, 2)], { prefetchThreshold: 1, backoffMs: 1 });
    await assert.rejects(ranges.next(), (error) => isIdMintError(error, 'RANGES_EXHAUSTED') && /malformed/.test(error.message));
  });

  it('grows the size when ranges go fast and shrinks it when they last', async () => {
    const { ranges, clock, asked } = scripted(Array.from({ length: 10 }, (_, i) => range(1000 * (i + 1), 10)), { prefetchThreshold: 1, rangeDurationMs: 1000 });
    await drain(ranges, 10);
    clock.now += 10; // used up at once
    await drain(ranges, 10);
    clock.now += 10;
    await drain(ranges, 10);
    clock.now += 5000; // lasted over twice the target
    await drain(ranges, 10);
    assert.deepEqual(asked, [10, 20, 40, 20]);
  });

  it('serves what it holds, then RANGES_EXHAUSTED at once while backing off, then tries again', async () => {
    const { ranges, clock } = scripted([range(1, 4), new IdMintError('SERVER_UNAVAILABLE', 'down', { details: { retryAt: 100 } })], { prefetchThreshold: 0.5 });
    assert.deepEqual(await drain(ranges, 2), [1n, 2n]); // the prefetch fails in the background
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.deepEqual(await drain(ranges, 2), [3n, 4n], 'held IDs still come');
    await assert.rejects(ranges.next(), (error) => isIdMintError(error, 'RANGES_EXHAUSTED') && error.retryable);
    assert.equal(ranges.stats().lastErrorCode, 'RANGES_EXHAUSTED');
    clock.now = 100; // the backoff is over: the next call asks again (and gets no answer here)
    await assert.rejects(ranges.next(), (error) => isIdMintError(error, 'RANGES_EXHAUSTED') && /no more answers/.test(error.message));
  });

  it('passes on a non-retryable server error as it is', async () => {
    const { ranges } = scripted([new IdMintError('TAG_NOT_FOUND', 'tag "t" does not exist')]);
    await assert.rejects(ranges.next(), (error) => isIdMintError(error, 'TAG_NOT_FOUND'));
  });
});
