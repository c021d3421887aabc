// The IssuerLeases conformance suite (test/support/issuer-lease-suite.ts) on every store that
// keeps issuer leases, each on a table (or key prefix) of its own, and on a set of databases,
// which keeps them in its first.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openSegmentStores } from '../src/backends/open-segment-store.ts';
import type { SegmentStore } from '../src/ports/segment-store.ts';
import { ISSUER_TABLE } from '../src/stores/issuer-support.ts';
import { HISTORY_TABLE } from '../src/stores/store-support.ts';
import { FaultySegmentStore } from './support/faulty-segment-store.ts';
import { runIssuerLeaseSuite } from './support/issuer-lease-suite.ts';
import {
  SEGMENT_BACKENDS,
  restoreWithoutIdmintTables,
  setRecordedHistory,
} from './support/segment-backends.ts';
import { rejectsWith } from './support/segment-store-suite.ts';
import { SET_URLS, dropSet, rawSql } from './support/segment-sets.ts';
import { describeWithServices, uniqueName } from './support/services.ts';

for (const backend of Object.values(SEGMENT_BACKENDS)) {
  await describeWithServices(`IssuerLeases conformance: ${backend.name}`, backend.services, () => {
    runIssuerLeaseSuite({
      create: async () => {
        const fixture = await backend.open();
        return {
          store: fixture.store,
          openAnother: (options) => fixture.openAnother(options),
          processArgs: [fixture.table, fixture.url],
          async loseLease(tag) {
            if (backend.sql === undefined)
              await deleteKey(fixture.url, `${fixture.table}:issuer:${tag}`);
            else
              await backend.sql(
                fixture.url,
                `DELETE FROM ${ISSUER_TABLE} WHERE segment_table = '${fixture.table}' AND ` +
                  `biz_tag = '${tag}'`,
              );
            await fixture.setRecordedHistory('a replica that lagged');
          },
          restoreWithoutRecords: (tag, maxId) =>
            restoreWithoutIdmintTables(backend, fixture.url, fixture.table, tag, maxId),
          async dispose() {
            await fixture.dispose();
            const where = `WHERE segment_table = '${fixture.table}'`;
            if (backend.sql !== undefined && backend.name !== 'sqlite')
              await backend.sql(fixture.url, `DELETE FROM ${ISSUER_TABLE} ${where}`);
          },
        };
      },
    });
  });
}

// A set whose first database is PostgreSQL and second Redis: the lease is in PostgreSQL's
// idmint_issuer, the tag in both.
await describeWithServices('IssuerLeases conformance: a set', ['postgres', 'redis'], () => {
  const urls = [SET_URLS.postgresA, SET_URLS.redis];
  runIssuerLeaseSuite({
    create: async () => {
      const table = uniqueName('iss_set');
      const store = await openSegmentStores(urls, { table, init: true, verify: false });
      await store.join();
      const others: SegmentStore[] = [];
      return {
        store,
        async openAnother(options = {}) {
          const other = await openSegmentStores(urls, { ...options, table, init: false });
          others.push(other);
          return other;
        },
        processArgs: [table, ...urls],
        async loseLease(tag) {
          await rawSql(
            urls[0] as string,
            `DELETE FROM ${ISSUER_TABLE} WHERE segment_table = '${table}' AND biz_tag = '${tag}'`,
          );
          await setRecordedHistory(urls[0] as string, table, 'a replica that lagged');
        },
        // The first database's records only: its max_id keeps the set's residue class, which
        // only a backup of every database (re-formed by db init) would move.
        async restoreWithoutRecords(tag) {
          const where = `WHERE segment_table = '${table}'`;
          await rawSql(urls[0] as string, `DELETE FROM ${HISTORY_TABLE} ${where}`);
          await rawSql(
            urls[0] as string,
            `DELETE FROM ${ISSUER_TABLE} ${where} AND biz_tag = '${tag}'`,
          );
        },
        async dispose() {
          for (const other of others) await other.close();
          await store.close();
          await dropSet(urls, table);
          await rawSql(
            urls[0] as string,
            `DELETE FROM ${ISSUER_TABLE} WHERE segment_table = '${table}'`,
          );
        },
      };
    },
  });
});

// The fault-injecting wrapper other suites cut a node off its lease store with.
describe('FaultySegmentStore: issuer leases through its faults', () => {
  it('forwards, counts, fails and holds lease calls as it does every call', async (t) => {
    const fixture = await SEGMENT_BACKENDS.sqlite.open();
    t.after(() => fixture.dispose());
    const faulty = new FaultySegmentStore(fixture.store);
    await faulty.createTag({ tag: 'ordered', step: 10, ordering: 'cluster' });
    const leases = faulty.issuers;
    assert.ok(leases !== undefined);
    const claimed = await leases.claimIssuer('ordered', 'node-a', '', 1000);
    assert.equal(claimed.held, true);
    faulty.mode = 'fail';
    await rejectsWith(leases.renewIssuer('ordered', 'node-a', 1n, 1000), 'STORE_UNAVAILABLE');
    await rejectsWith(leases.currentIssuer('ordered'), 'STORE_UNAVAILABLE');
    faulty.mode = 'pass';
    assert.equal((await leases.currentIssuer('ordered'))?.node, 'node-a');
    assert.deepEqual(
      [faulty.calls.claimIssuer, faulty.calls.renewIssuer, faulty.calls.currentIssuer],
      [1, 1, 2],
    );
  });
});

/** Deletes one Redis key. */
async function deleteKey(url: string, key: string): Promise<void> {
  const { Redis } = await import('ioredis');
  const client = new Redis(url);
  try {
    await client.del(key);
  } finally {
    await client.quit();
  }
}
