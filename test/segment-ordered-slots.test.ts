// A cluster-ordered tag under `idmint serve --processes 2`: the two processes share one port and
// either may take a connection, so each forwards to the other over a port of its own (a request
// forwarded to the shared port could land on the very process that forwarded it, which then
// answers ISSUER_UNAVAILABLE). Every request must be answered, in order, its IDs unique.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { SqliteSegmentStore } from '../src/stores/sqlite/sqlite-segment-store.ts';
import { startLoad } from './support/ordered-load.ts';
import { describeViolations, orderViolations, repeatedIds } from './support/ordering-check.ts';
import { startServe } from './support/serve-process.ts';

it('serve --processes 2 answers a cluster-ordered tag from either process, in order', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-ordered-slots-'));
  const file = join(dir, 'tags.db');
  const setup = new SqliteSegmentStore({ path: file });
  await setup.init();
  await setup.createTag({ tag: 'orders', step: 1000, ordering: 'cluster' });
  await setup.close();
  const serve = await startServe(['--processes', '2'], {
    env: {
      IDMINT_SEGMENT_STORE: `sqlite:${file}`,
      IDMINT_SNOWFLAKE_ENABLED: 'false',
      IDMINT_LOG_LEVEL: 'info',
    },
  });
  try {
    // Both processes listen before the load starts: each says so.
    await serve.logLine((line) => line.msg === 'idmint processes listening');
    const load = startLoad(() => [serve.url], 'orders', 8);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const { answers, ids, failures } = await load.stop();
    assert.ok(answers.length > 100, `${answers.length} answers`);
    assert.deepEqual([...failures], [], 'every request answered');
    const violations = orderViolations(answers);
    assert.equal(violations.length, 0, describeViolations(violations));
    assert.deepEqual(repeatedIds(ids), []);
  } finally {
    await serve.stop('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
});
