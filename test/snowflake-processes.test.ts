import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decomposeId, getLayout } from '../src/core/layout.ts';
import { runIdmint } from './support/cli.ts';

const layout = getLayout('idmint');

describe('snowflake IDs from several OS processes', () => {
  for (const policy of ['wait', 'borrow']) {
    it(`4 processes (${policy} policy), 200,000 IDs each at once: no collisions`, async () => {
      const workers = [0, 1, 512, 1023];
      const results = await Promise.all(
        workers.map((w) =>
          runIdmint(['next', '--count', '200000', '--worker', String(w), '--rollback', policy]),
        ),
      );
      const all = new Set<string>();
      results.forEach((result, index) => {
        assert.equal(result.code, 0, result.stderr);
        const lines = result.stdout.trimEnd().split('\n');
        assert.equal(lines.length, 200_000);
        let last = -1n;
        for (const line of lines) {
          const id = BigInt(line);
          assert.ok(id > last, `worker ${workers[index]}: ${id} after ${last}`);
          last = id;
          all.add(line);
        }
        assert.equal(decomposeId(last, layout).workerId, workers[index]);
      });
      assert.equal(all.size, workers.length * 200_000, 'IDs from different processes collided');
    });
  }
});
