// The checker the cluster-order tests rely on must itself find what it is there to find.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { orderViolations, repeatedIds, type TimedAnswer } from './ordering-check.ts';

const answer = (sent: number, received: number, min: bigint, max = min): TimedAnswer => ({
  sent,
  received,
  min,
  max,
  node: 'n',
});

it('finds a later answer not above one that arrived before it was sent', () => {
  const ok = [answer(0, 10, 1n, 5n), answer(11, 20, 6n), answer(12, 30, 7n, 9n)];
  assert.deepEqual(orderViolations(ok), []);
  // Overlapping in time: either order is allowed.
  assert.deepEqual(orderViolations([answer(0, 10, 5n), answer(5, 15, 1n)]), []);
  const bad = [answer(0, 10, 1n, 5n), answer(11, 12, 8n), answer(13, 20, 6n)];
  const found = orderViolations(bad);
  assert.equal(found.length, 1);
  assert.equal(found[0]?.later.min, 6n);
  assert.equal(found[0]?.earlier.max, 8n);
  // Equal IDs are a violation too.
  assert.equal(orderViolations([answer(0, 1, 3n), answer(2, 3, 3n)]).length, 1);
});

it('finds repeated IDs', () => {
  assert.deepEqual(repeatedIds([1n, 2n, 3n]), []);
  assert.deepEqual(repeatedIds([1n, 2n, 1n, 3n, 2n]), [1n, 2n]);
});
