import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isIdMintError } from '../core/errors.ts';
import {
  candidateWorkerIds,
  floorAfterSettle,
  isSettling,
  judgeHistory,
  planAcquire,
  registrySettling,
  type KnownWorker,
} from './common.ts';

const identity = { host: '10.0.0.1', port: 8080 };
const known = (
  workerId: number,
  live: boolean,
  lastTimestamp = 100,
  host = 'other',
): KnownWorker => ({ workerId, host, port: 8080, lastTimestamp, live });

/** Always the first of the window: the order of preference alone. */
const first = () => 0;

describe('candidateWorkerIds', () => {
  it("tries the identity's old ID, then IDs of gone holders, then unused ones", () => {
    const plan = planAcquire({ identity, maxWorkers: 8 });
    const ids = [
      ...candidateWorkerIds(
        plan,
        [
          known(0, true),
          known(5, false),
          known(3, false),
          known(6, false, 100, identity.host),
          known(1, true),
        ],
        first,
      ),
    ];
    assert.deepEqual(ids, [6, 3, 5, 2, 4, 7]);
  });

  it('applies workerId, exclude and lastTimestampBelow', () => {
    const all = [known(0, false, 50), known(1, false, 500), known(2, true, 10)];
    assert.deepEqual(
      [...candidateWorkerIds(planAcquire({ identity, maxWorkers: 4, workerId: 1 }), all)],
      [1],
    );
    assert.deepEqual(
      [...candidateWorkerIds(planAcquire({ identity, maxWorkers: 4, workerId: 2 }), all)],
      [],
    );
    assert.deepEqual(
      [...candidateWorkerIds(planAcquire({ identity, maxWorkers: 4, workerId: 3 }), all)],
      [3],
    );
    assert.deepEqual(
      [...candidateWorkerIds(planAcquire({ identity, maxWorkers: 4, exclude: [0, 3] }), all)],
      [1],
    );
    assert.deepEqual(
      [
        ...candidateWorkerIds(
          planAcquire({ identity, maxWorkers: 4, lastTimestampBelow: 100 }),
          all,
        ),
      ],
      [0, 3],
    );
  });

  it('is lazy: a huge worker-ID space costs only the IDs tried', () => {
    // The pick after one loss is drawn from the next 32 untried IDs, 1 to 32: the highest draw
    // shows that nothing past them was generated (a random bound made this test fail 1 run in 32).
    const plan = planAcquire({ identity, maxWorkers: 2 ** 31 });
    const highest = candidateWorkerIds(plan, [], () => 0.999_999);
    assert.equal(highest.next().value, 0);
    assert.equal(highest.next().value, 32, 'the pick after one loss comes from the next 32');
    const lowest = candidateWorkerIds(plan, [], () => 0);
    lowest.next();
    assert.equal(lowest.next().value, 1);
  });

  it('after a loss draws at random, yet yields every candidate once, best first', () => {
    const plan = planAcquire({ identity, maxWorkers: 3000 });
    const all = [known(0, true), known(9, false), known(6, false, 100, identity.host)];
    const inOrder = [...candidateWorkerIds(plan, all, first)];
    for (let run = 0; run < 20; run++) {
      const drawn = [...candidateWorkerIds(plan, all)];
      assert.deepEqual(
        drawn.slice(0, 2),
        [6, 9],
        "this identity's own ID, then the best other, as they come",
      );
      assert.equal(drawn.length, inOrder.length);
      assert.deepEqual(
        [...drawn].sort((a, b) => a - b),
        [...inOrder].sort((a, b) => a - b),
        'no ID skipped, none twice',
      );
    }
  });

  it('nodes starting together spread out after a lost race', () => {
    // 20 nodes list the same free IDs and claim in rounds; of those claiming one free ID in a
    // round, one wins. Claiming in order, the losers meet again on the next ID: 210 claims.
    const race = (random?: () => number) => {
      const plan = planAcquire({ identity: { host: 'h', port: 1 }, maxWorkers: 1024 });
      const nodes = Array.from({ length: 20 }, () => candidateWorkerIds(plan, [], random));
      const taken = new Set<number>();
      let claims = 0;
      for (let waiting = nodes; waiting.length > 0; ) {
        const won = new Set<number>();
        waiting = waiting.filter((node) => {
          const id = node.next().value as number;
          claims++;
          if (taken.has(id) || won.has(id)) return true;
          won.add(id);
          return false;
        });
        for (const id of won) taken.add(id);
      }
      return { claims, ids: taken.size };
    };
    assert.deepEqual(race(first), { claims: 210, ids: 20 }, 'in order');
    for (let run = 0; run < 20; run++) {
      const { claims, ids } = race();
      assert.equal(ids, 20);
      assert.ok(claims < 100, `${claims} claims for 20 IDs (about 45 expected)`);
    }
  });
});

describe('planAcquire', () => {
  for (const [what, request] of [
    ['maxWorkers 0', { identity, maxWorkers: 0 }],
    ['a host with "/"', { identity: { host: 'a/b', port: 1 }, maxWorkers: 4 }],
    ['a port out of range', { identity: { host: 'a', port: 70000 }, maxWorkers: 4 }],
    ['a workerId beyond maxWorkers', { identity, maxWorkers: 4, workerId: 4 }],
    ['an excluded ID out of range', { identity, maxWorkers: 4, exclude: [-1] }],
  ] as const) {
    it(`rejects ${what} with INVALID_ARGUMENT`, () => {
      assert.throws(
        () => planAcquire(request),
        (error) => isIdMintError(error, 'INVALID_ARGUMENT'),
      );
    });
  }
});

describe('judgeHistory', () => {
  const at = { live: 'h2', used: true, settledAt: 0, nowMs: 1000 };
  it('grants at once on a fresh registry and on a settled record', () => {
    assert.equal(judgeHistory({ ...at, recorded: undefined, used: false }), 'record');
    assert.equal(judgeHistory({ ...at, recorded: 'h2' }), 'settled');
    assert.equal(judgeHistory({ ...at, recorded: 'h2', settledAt: 1000 }), 'settled');
  });
  it('fences a new history, or lease data without a record, and waits out the settle', () => {
    assert.equal(judgeHistory({ ...at, recorded: 'h1' }), 'fence');
    assert.equal(judgeHistory({ ...at, recorded: undefined }), 'fence');
    assert.equal(judgeHistory({ ...at, recorded: 'h2', settledAt: 1001 }), 'settling');
  });
  it('starts a lease after a fence from the settle end at least', () => {
    assert.equal(floorAfterSettle(-1, 0), -1);
    assert.equal(floorAfterSettle(-1, 5000), 5000);
    assert.equal(floorAfterSettle(7000, 5000), 7000);
  });
  it('says how long is left, retryably, and tells itself apart from an outage', () => {
    const error = registrySettling('postgres', 'db:5432', {
      ...at,
      recorded: 'h2',
      settledAt: 4000,
    });
    assert.ok(isIdMintError(error, 'REGISTRY_UNAVAILABLE') && error.retryable);
    assert.match(error.message, /at db:5432: .*new history \(h2\); .* another 3000 ms$/);
    assert.ok(isSettling(error));
    assert.ok(!isSettling(new Error('connection refused')));
  });
});
