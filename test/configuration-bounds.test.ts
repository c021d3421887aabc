import assert from 'node:assert/strict';
import { it } from 'node:test';
import { configKeys } from '../src/config/schema.ts';
import { testServer } from './support/server.ts';

/** Sets `value` at a dotted `key` of a config-file-shaped object. */
function setAt(values: Record<string, unknown>, key: string, value: unknown): void {
  const parts = key.split('.');
  let node = values;
  for (const part of parts.slice(0, -1)) node = (node[part] ??= {}) as Record<string, unknown>;
  node[parts.at(-1) ?? key] = value;
}

// Every bound the configuration accepts must be one the components accept too: a value that
// passes `config check` and then fails at start-up (a lease TTL the registries refuse, a timer
// Node would clamp) is the bug class of issue 8. So a server is built, for real, with every
// numeric key at the largest value the configuration allows.
it('a server starts with every numeric key at its largest value', async () => {
  // Keys limited by other keys (the layout, the clock and policy) are set where those rules allow.
  const ruled: Record<string, unknown> = {
    port: 0,
    'snowflake.datacenterId': 0,
    'snowflake.sequenceSpread': 2048,
    'snowflake.clock': 'system',
    'snowflake.rollback.policy': 'wait',
  };
  const values: Record<string, unknown> = {};
  const atMaximum: string[] = [];
  for (const key of configKeys()) {
    const schema = key.schema as {
      type?: string;
      maximum?: number;
      anyOf?: { maximum?: number }[];
    };
    const maximum =
      schema.maximum ?? schema.anyOf?.map((s) => s.maximum ?? 0).reduce((a, b) => Math.max(a, b));
    if (maximum === undefined) continue;
    if (key.key in ruled) continue;
    // A bound of another policy would be refused as having no effect; they are tried below.
    if (['snowflake.rollback.maxLeadMs', 'snowflake.rollback.historyMs'].includes(key.key))
      continue;
    setAt(values, key.key, maximum);
    atMaximum.push(key.key);
  }
  for (const [key, value] of Object.entries(ruled)) setAt(values, key, value);
  assert.ok(atMaximum.length >= 18, `only ${atMaximum.length} keys at their maximum`);
  const server = await testServer(values);
  try {
    assert.equal(server.config.snowflake.leaseTtlMs, 600_000);
    assert.equal(server.config.segment.tagRefreshMs, 86_400_000);
    const answer = await server.app.inject('/v1/snowflake?count=3');
    assert.equal(answer.statusCode, 200, answer.body);
  } finally {
    await server.close();
  }

  // The other policies' bounds at their maxima, where the rules allow them.
  for (const rollback of [
    { policy: 'history', historyMs: 600_000 },
    { policy: 'borrow', maxLeadMs: 598_000 },
  ]) {
    const other = await testServer({ snowflake: { clock: 'system', rollback } });
    try {
      assert.equal((await other.app.inject('/v1/snowflake?count=3')).statusCode, 200);
    } finally {
      await other.close();
    }
  }
});
