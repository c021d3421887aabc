// The cluster-order promise across an operator's restore (docs/segments.md, Cluster order): the
// segment table is restored from an older backup into a database without idmint's own tables
// (no history record, no issuer lease) while node A, cut off from the store, still holds the
// tag's issuer lease and issues from its buffered range until its deadline. Node B's claim finds
// no lease; if it landed at once, B would answer from the fenced (higher) range and A, asked
// next, from its lower one. Claims wait one TTL after the fence instead. Two servers in this
// process on each real store; every request is sent after the previous answer arrived.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { SegmentBackend, BackendFixture } from './support/segment-backends.ts';
import { SEGMENT_BACKENDS, restoreWithoutIdmintTables } from './support/segment-backends.ts';
import { FaultySegmentStore } from './support/faulty-segment-store.ts';
import { testServer, type TestServer } from './support/server.ts';
import { describeWithServices } from './support/services.ts';
import { waitFor } from './support/workers.ts';

const TAG = 'orders';
/** The issuer lease: its holder stops issuing 1 s (the margin) before it could run out. */
const TTL_MS = 6000;

interface Answer {
  readonly node: 'A' | 'B';
  readonly sentAt: number;
  readonly answeredAt: number;
  /** The IDs, or none when the node answered an error (no issuer yet). */
  readonly ids: readonly bigint[];
}

async function node(fixture: BackendFixture, wrap?: (store: FaultySegmentStore) => void) {
  const server = await testServer(
    {
      host: '127.0.0.1',
      port: 0,
      segment: {
        store: fixture.url,
        table: fixture.table,
        issuerTtlMs: TTL_MS,
        issuerRetryMs: 50,
        waitTimeoutMs: 1000,
        timeoutMs: 1000,
      },
      snowflake: { enabled: false },
    },
    wrap === undefined
      ? {}
      : {
          wrapSegmentStore: (store) => {
            const faulty = new FaultySegmentStore(store);
            wrap(faulty);
            return faulty;
          },
        },
  );
  return { server, url: await server.listen() };
}

async function ask(name: 'A' | 'B', url: string): Promise<Answer> {
  const sentAt = Date.now();
  const response = await fetch(new URL(`/v1/segment/${TAG}?count=2`, url));
  const text = await response.text();
  const ids =
    response.status === 200 ? (JSON.parse(text) as { ids: string[] }).ids.map(BigInt) : [];
  return { node: name, sentAt, answeredAt: Date.now(), ids };
}

for (const backend of Object.values(SEGMENT_BACKENDS) as SegmentBackend[]) {
  await describeWithServices(
    `cluster order across a restore: ${backend.name}`,
    backend.services,
    () => {
      let fixture: BackendFixture;
      let a: { server: TestServer; url: string };
      let b: { server: TestServer; url: string };
      let storeOfA: FaultySegmentStore | undefined;
      let reconnectA: (() => void) | undefined;

      before(async () => {
        fixture = await backend.open();
        await fixture.store.createTag({ tag: TAG, step: 1000, ordering: 'cluster' });
        a = await node(fixture, (store) => {
          storeOfA = store;
        });
        b = await node(fixture);
      });
      after(async () => {
        reconnectA?.();
        await b?.server.close();
        await a?.server.close();
        await fixture?.dispose();
      });

      it('B claims no sooner than a TTL after the fence, and no answer goes back', {
        timeout: 120_000,
      }, async (t) => {
        const backup = (await fixture.store.getTag(TAG))?.maxId ?? 0n;
        // A claims and issues; B has asked nobody yet, so it knows of no issuer.
        const answers: Answer[] = [await ask('A', a.url)];
        assert.equal(answers[0]?.ids.length, 2, 'A issues the tag');
        // Right after A sent a renewal (so it issues for most of a TTL yet), A is cut off from
        // the store (the calls it starts from now on hang) and the table is restored from before
        // A's range, without idmint's tables.
        const cutOff = storeOfA as FaultySegmentStore;
        const renewals = cutOff.calls.renewIssuer;
        await waitFor('a renewal of A', () => cutOff.calls.renewIssuer > renewals);
        reconnectA = cutOff.hold();
        const restoredAt = Date.now();
        await restoreWithoutIdmintTables(backend, fixture.url, fixture.table, TAG, backup);
        // B first, then A, each sent after the last answer: for two TTLs, and until B issued.
        const bIssued = () => answers.some((answer) => answer.node === 'B' && answer.ids.length);
        const elapsed = () => Date.now() - restoredAt;
        while ((elapsed() < 2 * TTL_MS || !bIssued()) && elapsed() < 5 * TTL_MS)
          for (const [name, url] of [
            ['B', b.url],
            ['A', a.url],
          ] as const)
            answers.push(await ask(name, url));
        const issued = answers.filter((answer) => answer.ids.length > 0);
        for (let i = 1; i < issued.length; i++) {
          const earlier = issued.slice(0, i).flatMap((answer) => answer.ids);
          const highest = earlier.reduce((x, y) => (x > y ? x : y));
          const answer = issued[i] as Answer;
          assert.ok(
            answer.ids.every((id) => id > highest),
            `${answer.node} answered ${answer.ids.join(', ')} sent at ` +
              `+${answer.sentAt - restoredAt} ms, after ${highest} was answered`,
          );
        }
        // The test saw what it is about: A issuing after the restore, B taking over later.
        const afterRestore = answers.slice(1);
        assert.ok(
          afterRestore.some((answer) => answer.node === 'A' && answer.ids.length > 0),
          'A issued nothing after the restore',
        );
        const firstAskOfB = afterRestore.find((answer) => answer.node === 'B') as Answer;
        const firstOfB = afterRestore.find((answer) => answer.node === 'B' && answer.ids.length);
        assert.ok(firstOfB !== undefined, 'B never issued');
        // B's first request fenced the new history; its claim landed a TTL after that at least.
        assert.ok(
          firstOfB.answeredAt - firstAskOfB.sentAt >= TTL_MS,
          `B issued ${firstOfB.answeredAt - firstAskOfB.sentAt} ms after the fence`,
        );
        const ofA = afterRestore.filter((answer) => answer.node === 'A' && answer.ids.length);
        t.diagnostic(
          `A issued until +${(ofA.at(-1) as Answer).answeredAt - restoredAt} ms after the ` +
            `restore; B from +${firstOfB.answeredAt - restoredAt} ms, ` +
            `${firstOfB.answeredAt - firstAskOfB.sentAt} ms after its first request`,
        );
      });
    },
  );
}
