// Cluster-ordered tags in SegmentService: the issuer lease's fence, a fresh range on every new
// holding, exact ranges and batches in order. Two services on one real SQLite file stand for two
// nodes; the lease is the in-memory test double, timed by the same manual clock.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { MemoryIssuerLeases } from '../../test/support/memory-issuer-leases.ts';
import { orderedStore } from '../../test/support/ordered-store.ts';
import { ManualClock } from '../clocks/manual-clock.ts';
import { isIdMintError } from '../core/errors.ts';
import { SqliteSegmentStore } from '../stores/sqlite/sqlite-segment-store.ts';
import { isIssuedElsewhere, SegmentService } from './segment-service.ts';

const directory = mkdtempSync(join(tmpdir(), 'idmint-ordered-'));
let files = 0;
after(() => rmSync(directory, { recursive: true, force: true }));

const TTL = 10_000;
const MARGIN = 1000;

async function cluster(nodes: number) {
  const clock = new ManualClock(Date.UTC(2026, 5, 1));
  const leases = new MemoryIssuerLeases(() => clock.now());
  const path = join(directory, `${++files}.db`);
  const setup = new SqliteSegmentStore({ path });
  await setup.init();
  await setup.createTag({ tag: 'orders', step: 100, startId: 1n });
  await setup.createTag({ tag: 'plain', step: 100, startId: 1n });
  await setup.close();
  const services: SegmentService[] = [];
  const stores: SqliteSegmentStore[] = [];
  for (let i = 0; i < nodes; i++) {
    const store = new SqliteSegmentStore({ path });
    stores.push(store);
    const service = new SegmentService({
      store: orderedStore(store, ['orders'], leases),
      clock,
      tagRefreshMs: 0,
      issuers: { ttlMs: TTL, marginMs: MARGIN, retryMs: 10, node: `node${i}` },
    });
    service.issuers?.setAddress(`http://node${i}`);
    await service.start();
    services.push(service);
  }
  return {
    clock,
    leases,
    services,
    async close() {
      for (const service of services) await service.close();
      for (const store of stores) await store.close();
    },
  };
}

/** The draw's error, which must be ISSUER_UNAVAILABLE naming the holder. */
async function holderOf(draw: Promise<unknown>): Promise<string | undefined> {
  try {
    await draw;
  } catch (error) {
    assert.ok(isIdMintError(error, 'ISSUER_UNAVAILABLE'), String(error));
    return isIssuedElsewhere(error);
  }
  assert.fail('the draw must be refused');
}

describe('SegmentService, cluster-ordered tags', () => {
  it('issues only under the lease; another node is told where the issuer is', async () => {
    const c = await cluster(2);
    const [a, b] = c.services as [SegmentService, SegmentService];
    try {
      // Listed at start-up: known as ordered before any draw, and not served without the lease.
      assert.equal(a.isOrdered('orders'), true);
      assert.equal(a.isOrdered('plain'), false);
      assert.equal(a.nextSync('orders'), undefined);
      assert.equal(await a.next('orders'), 1n);
      assert.equal(a.nextSync('orders'), 2n);
      assert.equal(await holderOf(b.next('orders')), 'http://node0');
      assert.equal(b.issuerOf('orders'), 'http://node0');
      assert.equal(await holderOf(b.nextBatch('orders', 5)), 'http://node0');
      assert.equal(await holderOf(b.nextRange('orders', 5)), 'http://node0');
      assert.equal(await holderOf(b.exactRange('orders', 5)), 'http://node0');
      // A plain tag is served by every node, lease or none.
      assert.equal(await b.next('plain'), 1n);
      assert.deepEqual(
        a.issuers?.stats().map((s) => [s.tag, s.issuer, s.epoch]),
        [['orders', 'self', '1']],
      );
    } finally {
      await c.close();
    }
  });

  it('stops at the deadline; the next holder starts above all the old one had', async () => {
    const c = await cluster(2);
    const [a, b] = c.services as [SegmentService, SegmentService];
    try {
      const first = await a.nextBatch('orders', 30);
      assert.equal(first.at(-1), 30n);
      // 1 ms before the deadline it still issues; at the deadline it stops, lease or not.
      c.clock.advance(TTL - MARGIN - 1);
      assert.equal(a.nextSync('orders'), 31n);
      c.clock.advance(1);
      assert.equal(a.nextSync('orders'), undefined);
      assert.deepEqual(a.nextBatchSync('orders', 1), undefined);
      // The store's lease runs a margin longer: nobody else may claim yet.
      assert.equal(await holderOf(b.next('orders')), 'http://node0');
      c.clock.advance(MARGIN);
      // b claims and allocates a fresh range, above a's buffered ones (1-100 and 101-200).
      const taken = await b.next('orders');
      assert.equal(taken, 201n);
      assert.equal(await holderOf(a.next('orders')), 'http://node1');
      assert.deepEqual(
        b.issuers?.stats().map((s) => [s.issuer, s.epoch, s.claims]),
        [['self', '2', 1]],
      );
      assert.equal(a.issuers?.stats()[0]?.handovers, 1);
    } finally {
      await c.close();
    }
  });

  it('drops its own buffered ranges when it claims the lease again', async () => {
    const c = await cluster(1);
    const [a] = c.services as [SegmentService];
    try {
      assert.equal(await a.next('orders'), 1n);
      c.clock.advance(TTL + 1);
      assert.equal(a.nextSync('orders'), undefined);
      // A new epoch: another node may have held it in between, so 2-100 are dropped.
      assert.equal(await a.next('orders'), 101n);
      assert.equal(c.leases.calls.filter((call) => call.startsWith('claim')).length, 2);
    } finally {
      await c.close();
    }
  });

  it('answers nothing below an exact range it answered', async () => {
    const c = await cluster(1);
    const [a] = c.services as [SegmentService];
    try {
      assert.equal(await a.next('orders'), 1n);
      // More than the buffer holds: a range of its own, allocated after the buffered ones.
      const run = await a.exactRange('orders', 150);
      assert.ok(run.start >= 101n, `run starts at ${run.start}`);
      const next = await a.next('orders');
      assert.ok(next >= run.end, `${next} after the run ending at ${run.end}`);
      const batch = await a.nextBatch('orders', 250);
      assert.ok((batch[0] as bigint) > next);
      for (let i = 1; i < batch.length; i++)
        assert.ok((batch[i] as bigint) > (batch[i - 1] as bigint));
    } finally {
      await c.close();
    }
  });

  it('renews while in use, and gives the lease back at close', async () => {
    const c = await cluster(2);
    const [a, b] = c.services as [SegmentService, SegmentService];
    try {
      assert.equal(await a.next('orders'), 1n);
      // Renewed every (TTL - margin) / 3 = 3000 ms of real time: wait for one renewal.
      c.clock.advance(5000);
      await new Promise((resolve) => setTimeout(resolve, 3100));
      assert.ok(c.leases.calls.some((call) => call.startsWith('renew orders node0 1')));
      c.clock.advance(5000);
      assert.equal(a.nextSync('orders'), 2n, 'serving past the first deadline after a renewal');
      await a.close();
      assert.ok(c.leases.calls.includes('release orders node0 1'));
      // Released, so b claims at once, above what a gave back.
      const id = await b.next('orders');
      assert.ok(id >= 3n, `b's first ID ${id}`);
    } finally {
      await c.close();
    }
  });

  it('gives the lease back once nothing is issued under it, and claims it again', async () => {
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const leases = new MemoryIssuerLeases(() => clock.now());
    const store = new SqliteSegmentStore({ path: join(directory, `${++files}.db`) });
    await store.init();
    await store.createTag({ tag: 'orders', step: 100, startId: 1n });
    // TTL 1500 and margin 100: renewed every 466 ms of real time; idle after 1000 ms.
    const service = new SegmentService({
      store: orderedStore(store, ['orders'], leases),
      clock,
      tagRefreshMs: 0,
      issuers: { ttlMs: 1500, marginMs: 100, retryMs: 10, node: 'a', idleReleaseMs: 1000 },
    });
    service.issuers?.setAddress('http://a');
    await service.start();
    try {
      assert.equal(await service.next('orders'), 1n);
      // In use: renewed, not released.
      for (let i = 0; i < 3; i++) {
        clock.advance(400);
        assert.notEqual(service.nextSync('orders'), undefined);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      assert.ok(!leases.calls.some((call) => call.startsWith('release')), String(leases.calls));
      // Idle: released at a renewal once 1000 ms pass with nothing issued.
      for (let i = 0; i < 4 && !leases.calls.includes('release orders a 1'); i++) {
        clock.advance(400);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      assert.ok(leases.calls.includes('release orders a 1'), String(leases.calls));
      assert.equal(service.nextSync('orders'), undefined, 'not issued after giving it back');
      // The next request claims again (epoch 2), from a fresh range.
      assert.equal(await service.next('orders'), 101n);
      assert.equal(service.issuers?.stats()[0]?.epoch, '2');
    } finally {
      await service.close();
      await store.close();
    }
  });

  it('refuses while the store cannot be asked, then serves', async () => {
    const c = await cluster(1);
    const [a] = c.services as [SegmentService];
    try {
      c.leases.down = true;
      await assert.rejects(a.next('orders'), (error) => {
        assert.ok(isIdMintError(error, 'ISSUER_UNAVAILABLE'));
        assert.equal(isIssuedElsewhere(error), undefined);
        return true;
      });
      c.leases.down = false;
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(await a.next('orders'), 1n);
    } finally {
      await c.close();
    }
  });
});
