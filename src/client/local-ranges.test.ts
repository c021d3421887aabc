// TagRanges' own rules, driven by a scripted range source and a manual clock: ordering (trim and
// drop), malformed answers, sizing that follows the rate, and failing fast while backing off. The
// HTTP side and real servers are in test/client-local*.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IdMintError, isIdMintError } from '../core/errors.ts';
import { seededRandom, testSeed } from '../../test/support/random.ts';
import { TagRanges, localSettings, type LocalModeOptions } from './local-ranges.ts';

/** A tag's ranges over a queue of answers (or errors), with a clock the test moves. */
function scripted(answers: unknown[], options: LocalModeOptions = {}) {
  const clock = { now: 0 };
  const asked: number[] = [];
  const ranges = new TagRanges(
    't',
    localSettings({ minSize: 1, initialSize: 10, maxSize: 1000, ...options }),
    async (_tag, size) => {
      asked.push(size);
      const next = answers.shift();
      if (next instanceof Error) throw next;
      if (next === undefined)
        throw new IdMintError('SERVER_UNAVAILABLE', 'no more answers', {
          details: { retryAt: clock.now + 100 },
        });
      return next;
    },
    () => clock.now,
  );
  return { ranges, clock, asked };
}

const range = (start: number, size: number, stride = 1) => ({
  tag: 't',
  start: String(start),
  end: String(start + size * stride),
  last: String(start + (size - 1) * stride),
  stride,
  size,
});

async function drain(ranges: TagRanges, n: number): Promise<bigint[]> {
  const ids: bigint[] = [];
  for (let i = 0; i < n; i++) ids.push(ranges.nextSync() ?? (await ranges.next()));
  return ids;
}

describe('TagRanges', () => {
  it('trims a range that starts below IDs already held, and drops one wholly below', async () => {
    const { ranges } = scripted([range(100, 5), range(50, 10), range(102, 6), range(200, 3)], {
      prefetchThreshold: 1,
    });
    const ids = await drain(ranges, 10);
    // [100,105); [50,60) dropped; [102,108) trimmed to [105,108); then [200,203).
    assert.deepEqual(ids, [100n, 101n, 102n, 103n, 104n, 105n, 106n, 107n, 200n, 201n]);
    assert.equal(ranges.stats().droppedIds, 13);
  });

  it('drops a range of another class whose trimmed part is empty', async () => {
    // Class 0 of 2 gave 0, 2, 4 (highest 6); class 1's [5, 7) holds only 5, below 6: nothing is
    // left above the floor, though its end (7) is above it. 7 was never received.
    const { ranges } = scripted([range(0, 3, 2), range(5, 1, 2), range(101, 2, 2)], {
      prefetchThreshold: 1,
    });
    assert.deepEqual(await drain(ranges, 5), [0n, 2n, 4n, 101n, 103n]);
    assert.equal(ranges.stats().droppedIds, 1);
  });

  it("uses ranges whole in any order with ordering 'any', stepping by their stride", async () => {
    const { ranges } = scripted([range(100, 3, 2), range(51, 2, 2)], {
      prefetchThreshold: 1,
      ordering: 'any',
    });
    assert.deepEqual(await drain(ranges, 5), [100n, 102n, 104n, 51n, 53n]);
  });

  it('never issues from a malformed answer', async () => {
    const bad = { ...range(100, 5), size: 6 };
    const { ranges } = scripted([bad, { ...range(100, 5), tag: 'other' }, range(300, 2)], {
      prefetchThreshold: 1,
      backoffMs: 1,
    });
    await assert.rejects(
      ranges.next(),
      (error) => isIdMintError(error, 'RANGES_EXHAUSTED') && /malformed/.test(error.message),
    );
  });

  it('grows the size when ranges go fast and shrinks it when they last', async () => {
    const { ranges, clock, asked } = scripted(
      Array.from({ length: 10 }, (_, i) => range(1000 * (i + 1), 10)),
      { prefetchThreshold: 1, rangeDurationMs: 1000 },
    );
    await drain(ranges, 10);
    clock.now += 10; // used up at once
    await drain(ranges, 10);
    clock.now += 10;
    await drain(ranges, 10);
    clock.now += 5000; // lasted over twice the target
    await drain(ranges, 10);
    assert.deepEqual(asked, [10, 20, 40, 20]);
  });

  it('serves what it holds, then RANGES_EXHAUSTED while backing off, then retries', async () => {
    const { ranges, clock } = scripted(
      [range(1, 4), new IdMintError('SERVER_UNAVAILABLE', 'down', { details: { retryAt: 100 } })],
      { prefetchThreshold: 0.5 },
    );
    assert.deepEqual(await drain(ranges, 2), [1n, 2n]); // the prefetch fails in the background
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.deepEqual(await drain(ranges, 2), [3n, 4n], 'held IDs still come');
    await assert.rejects(
      ranges.next(),
      (error) => isIdMintError(error, 'RANGES_EXHAUSTED') && error.retryable,
    );
    assert.equal(ranges.stats().lastErrorCode, 'RANGES_EXHAUSTED');
    clock.now = 100; // the backoff is over: the next call asks again (and gets no answer here)
    await assert.rejects(
      ranges.next(),
      (error) => isIdMintError(error, 'RANGES_EXHAUSTED') && /no more answers/.test(error.message),
    );
  });

  it('passes on a non-retryable server error as it is', async () => {
    const { ranges } = scripted([new IdMintError('TAG_NOT_FOUND', 'tag "t" does not exist')]);
    await assert.rejects(ranges.next(), (error) => isIdMintError(error, 'TAG_NOT_FOUND'));
  });
});

/**
 * One simulated round: `databases` databases (1 to 3) whose rows issue IDs ≡ r (mod N) in ranges
 * of `step`, two or three servers each buffering ranges of them (round-robin over the databases,
 * as a set does), other takers drawing runs from the same buffers at random moments, a client
 * whose range requests go to a random server, answered or failed at random moments. Returns a
 * description of the first ID the client returned outside every run it received, or twice, or out
 * of order under `increasing`; undefined when every ID was one it received, once.
 */
async function simulateRound(
  random: () => number,
  ordering: 'increasing' | 'any',
): Promise<string | undefined> {
  const pick = (n: number) => Math.floor(random() * n);
  const databases = 1 + pick(3);
  const step = 1 + pick(12);
  const maxIds = Array.from({ length: databases }, (_, r) => BigInt(r + pick(4) * databases));
  let turn = pick(databases);
  /** A database's next range: `step` IDs of its class, `databases` apart. */
  const allocate = () => {
    const r = turn;
    turn = (turn + 1) % databases;
    const start = maxIds[r] as bigint;
    maxIds[r] = start + BigInt(step * databases);
    return { cursor: start, end: maxIds[r] as bigint };
  };
  const servers = Array.from({ length: 2 + pick(2) }, () => allocate());
  /** Up to `size` IDs from a server's buffer (the rest of its range, if smaller), as a run. */
  const take = (server: number, size: number) => {
    let buffer = servers[server] as { cursor: bigint; end: bigint };
    if (buffer.cursor >= buffer.end) servers[server] = buffer = allocate();
    const stride = BigInt(databases);
    const count = Math.min(size, Number((buffer.end - buffer.cursor) / stride));
    const start = buffer.cursor;
    buffer.cursor = start + BigInt(count) * stride;
    return { start, end: buffer.cursor, stride, count };
  };
  const received = new Set<bigint>();
  const clock = { now: 0 };
  let pending:
    | { resolve: (value: unknown) => void; reject: (error: unknown) => void; size: number }
    | undefined;
  const sizes = { minSize: 1, initialSize: 1 + pick(8), maxSize: 16 };
  const settings = localSettings({
    ...sizes,
    prefetchThreshold: random(),
    backoffMs: 1,
    maxBackoffMs: 4,
    ordering,
  });
  const fetcher = (_tag: string, size: number) =>
    new Promise((resolve, reject) => {
      pending = { resolve, reject, size };
    });
  const ranges = new TagRanges('t', settings, fetcher, () => clock.now);
  const answer = () => {
    const request = pending;
    if (request === undefined) return;
    pending = undefined;
    if (random() < 0.15) {
      return request.reject(
        new IdMintError('SERVER_UNAVAILABLE', 'down', { details: { retryAt: clock.now + 1 } }),
      );
    }
    const run = take(pick(servers.length), request.size);
    for (let id = run.start; id < run.end; id += run.stride) received.add(id);
    request.resolve({
      tag: 't',
      start: String(run.start),
      end: String(run.end),
      stride: databases,
      size: run.count,
    });
  };
  const issued = new Set<bigint>();
  let last = -1n;
  const check = (id: bigint): string | undefined => {
    if (!received.has(id)) return `ID ${id} is in no run the client received`;
    if (issued.has(id)) return `ID ${id} returned twice`;
    if (ordering === 'increasing' && id <= last)
      return `ID ${id} after ${last} under ordering increasing`;
    issued.add(id);
    last = id;
    return undefined;
  };
  for (let action = 0; action < 120; action++) {
    const roll = random();
    if (roll < 0.45) {
      const id = ranges.nextSync();
      const wrong = id === undefined ? undefined : check(id);
      if (wrong !== undefined) return wrong;
    } else if (roll < 0.65) {
      answer();
    } else if (roll < 0.8) {
      take(pick(servers.length), 1 + pick(6)); // another client or server's caller
    } else if (roll < 0.9) {
      clock.now += pick(3);
    } else {
      // next(): waits for a range, the request answered (or failed) meanwhile.
      let settled = false;
      const waiting = ranges
        .next()
        .then(
          (id) => check(id),
          (error: unknown) =>
            isIdMintError(error, 'RANGES_EXHAUSTED') ? undefined : `unexpected ${String(error)}`,
        )
        .finally(() => (settled = true));
      // Requests answered at random moments until it settles (a dropped range asks again).
      for (let turns = 0; !settled; turns++) {
        if (turns > 10_000) return 'next() never settled';
        if (random() < 0.2) answer();
        await Promise.resolve();
      }
      const wrong = await waiting;
      if (wrong !== undefined) return wrong;
    }
    await Promise.resolve();
  }
  return undefined;
}

describe('TagRanges never returns an ID outside a range it received (seeded property)', () => {
  const seed = testSeed();
  for (const ordering of ['increasing', 'any'] as const) {
    const name =
      `ordering ${ordering}: 1 to 3 databases, other takers and failures interleaved, 600 ` +
      `rounds`;
    it(`${name} (seed ${seed}; IDMINT_TEST_SEED replays)`, async () => {
      for (let round = 0; round < 600; round++) {
        const roundSeed = (seed + round * 0x9e3779b9) >>> 0;
        const wrong = await simulateRound(seededRandom(roundSeed), ordering);
        assert.equal(wrong, undefined, `round ${round} (IDMINT_TEST_SEED=${seed}): ${wrong}`);
      }
    });
  }
});
