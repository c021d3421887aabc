import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isIdMintError } from '../core/errors.ts';
import { candidateWorkerIds, planAcquire, type KnownWorker } from './common.ts';

const identity = { host: '10.0.0.1', port: 8080 };
const known = (workerId: number, live: boolean, lastTimestamp = 100, host = 'other'): KnownWorker => ({ workerId, host, port: 8080, lastTimestamp, live });

describe('candidateWorkerIds', () => {
  it("tries this identity's old ID first, then IDs whose holder is gone, then IDs never used, lowest first", () => {
    const plan = planAcquire({ identity, maxWorkers: 8 });
    const ids = [...candidateWorkerIds(plan, [known(0, true), known(5, false), known(3, false), known(6, false, 100, identity.host), known(1, true)])];
    assert.deepEqual(ids, [6, 3, 5, 2, 4, 7]);
  });

  it('applies workerId, exclude and lastTimestampBelow', () => {
    const all = [known(0, false, 50), known(1, false, 500), known(2, true, 10)];
    assert.deepEqual([...candidateWorkerIds(planAcquire({ identity, maxWorkers: 4, workerId: 1 }), all)], [1]);
    assert.deepEqual([...candidateWorkerIds(planAcquire({ identity, maxWorkers: 4, workerId: 2 }), all)], []);
    assert.deepEqual([...candidateWorkerIds(planAcquire({ identity, maxWorkers: 4, workerId: 3 }), all)], [3]);
    assert.deepEqual([...candidateWorkerIds(planAcquire({ identity, maxWorkers: 4, exclude: [0, 3] }), all)], [1]);
    assert.deepEqual([...candidateWorkerIds(planAcquire({ identity, maxWorkers: 4, lastTimestampBelow: 100 }), all)], [0, 3]);
  });

  it('is lazy: a huge worker-ID space costs only the IDs tried', () => {
    const ids = candidateWorkerIds(planAcquire({ identity, maxWorkers: 2 ** 31 }), []);
    assert.deepEqual([ids.next().value, ids.next().value], [0, 1]);
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
      assert.throws(() => planAcquire(request), (error) => isIdMintError(error, 'INVALID_ARGUMENT'));
    });
  }
});
