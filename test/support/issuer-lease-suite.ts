// The IssuerLeases contract (src/ports/issuer-lease.ts), written once and run against every store
// that keeps issuer leases: exclusivity among many claimers (connections and OS processes), expiry
// by the store's clock, epochs, and the interleavings between a store's steps.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, it } from 'node:test';
import type { IssuerBusy, IssuerLease, IssuerLeases } from '../../src/ports/issuer-lease.ts';
import type { SegmentStore } from '../../src/ports/segment-store.ts';
import type { OpenSegmentStoreOptions } from '../../src/backends/open-segment-store.ts';
import type { IssuerInterleaveStep } from '../../src/stores/issuer-support.ts';
import { drawProcess } from './draw-process.ts';
import { rejectsWith } from './segment-store-suite.ts';

/** A store on a table (or prefix) of its own that keeps issuer leases, and other nodes on it. */
export interface IssuerLeaseFixture {
  readonly store: SegmentStore;
  /** Opens another store (another node, its own connections) on the same table. */
  openAnother(options?: OpenSegmentStoreOptions): Promise<SegmentStore>;
  /**
   * What test/support/issuer-claim-process.ts needs to open the same table in another process:
   * `[table, url, ...more urls]` (several URLs: a set).
   */
  readonly processArgs: readonly string[];
  /**
   * Does to the database what a failover to a replica that lagged does: the tag's lease as the
   * last claim left it is gone (the row or hash deleted), and the database's history is another.
   */
  loseLease(tag: string): Promise<void>;
  /**
   * Does to the database what an operator's restore of the segment table into a database without
   * idmint's own tables does: no history record for the table and no lease of the tag (SQLite:
   * both tables dropped; a shared server: the table's rows of them deleted; Redis: the history
   * hash and the lease's hash deleted), and the tag's max_id set back to `maxId`, as an older
   * backup has it.
   */
  restoreWithoutRecords(tag: string, maxId: bigint): Promise<void>;
  dispose(): Promise<void>;
}

/** Claimers racing in one process (each its own store, so its own connections). */
const CLAIMERS = 6;
/** Rounds of each race. */
const ROUNDS = 5;
/** OS processes racing, and the rounds each claims in. */
const PROCESSES = 4;
const PROCESS_ROUNDS = 12;

function issuersOf(store: SegmentStore): IssuerLeases {
  assert.ok(store.issuers !== undefined, `${store.backend} store keeps no issuer leases`);
  return store.issuers;
}

function held(
  outcome: { held: true; lease: IssuerLease } | IssuerBusy,
): asserts outcome is { held: true; lease: IssuerLease } {
  assert.equal(outcome.held, true, `expected the claim to succeed, found ${describe(outcome)}`);
}

function busy(outcome: { held: true; lease: IssuerLease } | IssuerBusy): IssuerBusy {
  assert.equal(
    outcome.held,
    false,
    `expected the claim to find a holder, got ${describe(outcome)}`,
  );
  return outcome as IssuerBusy;
}

function describe(outcome: { held: boolean }): string {
  return JSON.stringify(outcome, (_, value) =>
    typeof value === 'bigint' ? value.toString() : value,
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A promise and its resolve, for a hook that holds a store until the test lets it go. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/**
 * Runs the IssuerLeases contract against the store `create` makes (call it inside a describe).
 * Every test works on tags of its own.
 */
export function runIssuerLeaseSuite(options: { create: () => Promise<IssuerLeaseFixture> }): void {
  let fixture: IssuerLeaseFixture;
  let store: SegmentStore;
  let leases: IssuerLeases;
  let counter = 0;
  /** A new cluster-ordered tag of this run. */
  const newTag = async (): Promise<string> => {
    counter += 1;
    const tag = `issuer-${counter}`;
    await store.createTag({ tag, step: 10, ordering: 'cluster' });
    return tag;
  };
  /**
   * Another node whose first step at `point` for `tag` (by `node`, when given) waits until
   * `resume()`: `paused` resolves once it waits there. Later steps run through.
   */
  const pausedNode = async (
    point: IssuerInterleaveStep['point'],
    tag: string,
    node?: string,
  ): Promise<{ leases: IssuerLeases; paused: Promise<void>; resume: () => void }> => {
    const waiting = gate();
    const paused = gate();
    let held = false;
    const other = await fixture.openAnother({
      issuerInterleave: async (step: IssuerInterleaveStep) => {
        if (step.point !== point || step.tag !== tag || held) return;
        if (node !== undefined && step.node !== node) return;
        held = true;
        paused.open();
        await waiting.promise;
      },
    });
    return { leases: issuersOf(other), paused: paused.promise, resume: waiting.open };
  };

  before(async () => {
    fixture = await options.create();
    store = fixture.store;
    await store.init();
    leases = issuersOf(store);
  });
  after(() => fixture.dispose());

  it('a cluster-ordered tag keeps its ordering through every read', async () => {
    const tag = await newTag();
    assert.equal((await store.getTag(tag))?.ordering, 'cluster');
    const plain = `plain-${tag}`;
    await store.createTag({ tag: plain, step: 10 });
    assert.equal((await store.getTag(plain))?.ordering, undefined);
    const listed = await store.listTags();
    assert.equal(listed.find((record) => record.tag === tag)?.ordering, 'cluster');
    assert.equal(listed.find((record) => record.tag === plain)?.ordering, undefined);
    const page = await store.listTagPage(undefined, 100_000);
    assert.equal(page.records.find((record) => record.tag === tag)?.ordering, 'cluster');
    assert.equal(page.records.find((record) => record.tag === plain)?.ordering, undefined);
    if (store.listTagChanges !== undefined) {
      const { cursor } = await store.listTagChanges(undefined);
      const changed = `changed-${tag}`;
      await store.createTag({ tag: changed, step: 10, ordering: 'cluster' });
      const { records } = await store.listTagChanges(cursor);
      assert.equal(records.find((record) => record.tag === changed)?.ordering, 'cluster');
    }
    // Never changed afterwards: an update of other fields keeps it, and it cannot turn opaque.
    await store.updateTag(tag, { step: 20, description: 'ordered' });
    assert.equal((await store.getTag(tag))?.ordering, 'cluster');
    await rejectsWith(store.updateTag(tag, { opaque: true }), 'INVALID_ARGUMENT', /opaque/);
    assert.equal((await store.getTag(tag))?.opaque, false);
  });

  it('refuses a periodic or opaque cluster-ordered tag, naming why', async () => {
    await rejectsWith(
      store.createTag({ tag: 'ordered-opaque', step: 10, ordering: 'cluster', opaque: true }),
      'INVALID_ARGUMENT',
      /opaque.*no order/,
    );
    await rejectsWith(
      store.createTag({
        tag: 'ordered-periodic',
        step: 10,
        ordering: 'cluster',
        periodic: { period: 'day', timeZone: 'UTC', template: '{yyyy}{MM}{dd}{seq:6}' },
      }),
      'INVALID_ARGUMENT',
      /periodic/,
    );
    await rejectsWith(
      store.createTag({ tag: 'ordered-odd', step: 10, ordering: 'global' as 'cluster' }),
      'INVALID_ARGUMENT',
      /ordering/,
    );
    assert.equal(await store.getTag('ordered-opaque'), undefined);
  });

  it('a claim of an unknown tag fails TAG_NOT_FOUND', async () => {
    await rejectsWith(leases.claimIssuer('no-such-tag', 'node-a', '', 1000), 'TAG_NOT_FOUND');
    assert.equal(await leases.currentIssuer('no-such-tag'), undefined);
  });

  it('one holder at a time; the others are told who holds it and for how long', async () => {
    const tag = await newTag();
    assert.equal(await leases.currentIssuer(tag), undefined);
    const first = await leases.claimIssuer(tag, 'node-a', 'http://a:1', 5000);
    held(first);
    assert.equal(first.lease.node, 'node-a');
    assert.equal(first.lease.address, 'http://a:1');
    assert.equal(first.lease.ttlMs, 5000);
    assert.ok(first.lease.epoch >= 1n);
    const other = issuersOf(await fixture.openAnother());
    const found = busy(await other.claimIssuer(tag, 'node-b', 'http://b:2', 5000));
    assert.equal(found.node, 'node-a');
    assert.equal(found.address, 'http://a:1');
    assert.equal(found.epoch, first.lease.epoch);
    assert.ok(found.remainingMs > 3000 && found.remainingMs <= 5000, `${found.remainingMs}`);
    const current = await other.currentIssuer(tag);
    assert.equal(current?.node, 'node-a');
    assert.equal(current?.epoch, first.lease.epoch);
    // The holder's own claim while it is live: a new holding, a new epoch.
    const again = await leases.claimIssuer(tag, 'node-a', 'http://a:1', 5000);
    held(again);
    assert.equal(again.lease.epoch, first.lease.epoch + 1n);
  });

  it('expires by the store clock, and each claim raises the epoch', async () => {
    const tag = await newTag();
    const other = issuersOf(await fixture.openAnother());
    const epochs: bigint[] = [];
    const first = await leases.claimIssuer(tag, 'node-a', '', 300);
    held(first);
    epochs.push(first.lease.epoch);
    busy(await other.claimIssuer(tag, 'node-b', '', 300));
    await sleep(450);
    assert.equal(await other.currentIssuer(tag), undefined, 'the lease outlived its TTL');
    // Expired, not yet claimed: its holder cannot renew it either.
    await rejectsWith(leases.renewIssuer(tag, 'node-a', first.lease.epoch, 300), 'LEASE_LOST');
    const second = await other.claimIssuer(tag, 'node-b', '', 300);
    held(second);
    epochs.push(second.lease.epoch);
    // A release ends it at once; the next claim still raises the epoch.
    await other.releaseIssuer(tag, 'node-b', second.lease.epoch);
    assert.equal(await leases.currentIssuer(tag), undefined);
    const third = await leases.claimIssuer(tag, 'node-a', '', 300);
    held(third);
    epochs.push(third.lease.epoch);
    for (let i = 1; i < epochs.length; i++)
      assert.ok((epochs[i] as bigint) > (epochs[i - 1] as bigint), `epochs ${epochs.join(', ')}`);
  });

  it("times leases by the store's clock, whatever the node's clock says", async () => {
    const tag = await newTag();
    const other = issuersOf(await fixture.openAnother());
    const realNow = Date.now;
    const realPerformance = performance.now.bind(performance);
    // This node's clocks an hour ahead while it claims: a lease timed by them would run an hour.
    const skew = (ms: number) => {
      Date.now = () => realNow() + ms;
      performance.now = () => realPerformance() + ms;
    };
    try {
      skew(3_600_000);
      held(await leases.claimIssuer(tag, 'node-a', '', 300));
      // An hour behind while another node looks: a lease timed by it would look long over.
      skew(-3_600_000);
      const found = busy(await other.claimIssuer(tag, 'node-b', '', 300));
      assert.ok(found.remainingMs <= 300, `${found.remainingMs} ms left of a 300 ms lease`);
    } finally {
      Date.now = realNow;
      performance.now = realPerformance;
    }
    await sleep(450);
    held(await other.claimIssuer(tag, 'node-b', '', 300));
  });

  it('a renewal extends the lease from when the store handles it', async () => {
    const tag = await newTag();
    const claimed = await leases.claimIssuer(tag, 'node-a', '', 400);
    held(claimed);
    await sleep(250);
    await leases.renewIssuer(tag, 'node-a', claimed.lease.epoch, 400);
    await sleep(250);
    // 500 ms after the claim, 250 after the renewal: still live.
    const current = await leases.currentIssuer(tag);
    assert.equal(current?.epoch, claimed.lease.epoch);
    assert.ok((current?.remainingMs ?? 0) <= 400);
  });

  it('a renewal never ends the lease earlier than it did', async () => {
    const tag = await newTag();
    const claimed = await leases.claimIssuer(tag, 'node-a', '', 5000);
    held(claimed);
    // A renewal granting less lands last (a retry the holder gave up on): the lease keeps 5 s.
    await leases.renewIssuer(tag, 'node-a', claimed.lease.epoch, 300);
    await sleep(500);
    const current = await leases.currentIssuer(tag);
    assert.equal(current?.epoch, claimed.lease.epoch, 'the lease ended at the shorter grant');
    assert.ok((current?.remainingMs ?? 0) > 3000, `${current?.remainingMs} ms left`);
  });

  it('a renewal that lands after a later one never ends the lease earlier', async () => {
    const tag = await newTag();
    const { leases: slow, paused, resume } = await pausedNode('before-renew-write', tag);
    const claimed = await leases.claimIssuer(tag, 'node-a', '', 2000);
    held(claimed);
    const { epoch } = claimed.lease;
    // A renewal the holder gave up on, still on its way, lands after the one that followed it.
    const stale = slow.renewIssuer(tag, 'node-a', epoch, 1000);
    await paused;
    await leases.renewIssuer(tag, 'node-a', epoch, 5000);
    resume();
    await stale;
    await sleep(1500);
    const current = await leases.currentIssuer(tag);
    assert.equal(current?.epoch, epoch, "the lease ended at the stale renewal's grant");
    assert.ok((current?.remainingMs ?? 0) > 2000, `${current?.remainingMs} ms left`);
  });

  it('renew and release refuse a stale epoch or another node', async () => {
    const tag = await newTag();
    const first = await leases.claimIssuer(tag, 'node-a', '', 5000);
    held(first);
    const { epoch } = first.lease;
    await rejectsWith(leases.renewIssuer(tag, 'node-b', epoch, 5000), 'LEASE_LOST');
    await rejectsWith(leases.renewIssuer(tag, 'node-a', epoch + 1n, 5000), 'LEASE_LOST');
    // Releases that do not match are no-ops: the lease stays.
    await leases.releaseIssuer(tag, 'node-b', epoch);
    await leases.releaseIssuer(tag, 'node-a', epoch + 1n);
    assert.equal((await leases.currentIssuer(tag))?.epoch, epoch);
    await leases.renewIssuer(tag, 'node-a', epoch, 5000);
    // A newer holding by the same node: the old epoch is stale for renew and release.
    const again = await leases.claimIssuer(tag, 'node-a', '', 5000);
    held(again);
    await rejectsWith(leases.renewIssuer(tag, 'node-a', epoch, 5000), 'LEASE_LOST');
    await leases.releaseIssuer(tag, 'node-a', epoch);
    assert.equal((await leases.currentIssuer(tag))?.epoch, again.lease.epoch);
    // Released, a renewal of it is refused too.
    await leases.releaseIssuer(tag, 'node-a', again.lease.epoch);
    await rejectsWith(leases.renewIssuer(tag, 'node-a', again.lease.epoch, 5000), 'LEASE_LOST');
    await rejectsWith(leases.renewIssuer('no-such-tag', 'node-a', 1n, 5000), 'LEASE_LOST');
  });

  for (const newNode of ['node-b', 'node-a']) {
    it(`a late renewal of an old epoch never extends a newer holding (by ${newNode})`, async () => {
      const tag = await newTag();
      const { leases: slow, paused, resume } = await pausedNode('before-renew-write', tag);
      const old = await slow.claimIssuer(tag, 'node-a', '', 300);
      held(old);
      // node-a sends a renewal that is slow to land; meanwhile its lease expires and a new holding
      // starts (another node's, or node-a's own re-claim after the loss).
      const renewal = slow.renewIssuer(tag, 'node-a', old.lease.epoch, 5000);
      await paused;
      await sleep(450);
      const newer = await leases.claimIssuer(tag, newNode, '', 400);
      held(newer);
      assert.ok(newer.lease.epoch > old.lease.epoch);
      resume();
      await rejectsWith(renewal, 'LEASE_LOST');
      // The new lease ends at its own TTL, not the late renewal's 5 s.
      const current = await leases.currentIssuer(tag);
      assert.equal(current?.node, newNode);
      assert.equal(current?.epoch, newer.lease.epoch);
      assert.ok((current?.remainingMs ?? 0) <= 400, `${current?.remainingMs}`);
      await sleep(550);
      held(await slow.claimIssuer(tag, 'node-c', '', 300));
    });
  }

  it('a claim paused between its steps while another node claims finds the holder', async () => {
    const tag = await newTag();
    const { leases: slow, paused, resume } = await pausedNode('before-claim', tag, 'node-a');
    const claim = slow.claimIssuer(tag, 'node-a', '', 5000);
    await paused;
    const winner = await leases.claimIssuer(tag, 'node-b', 'http://b:2', 5000);
    held(winner);
    resume();
    const found = busy(await claim);
    assert.equal(found.node, 'node-b');
    assert.equal(found.epoch, winner.lease.epoch);
  });

  it('a claim paused while another node claims and releases takes the next epoch', async () => {
    const tag = await newTag();
    const { leases: slow, paused, resume } = await pausedNode('before-claim', tag, 'node-a');
    const claim = slow.claimIssuer(tag, 'node-a', '', 5000);
    await paused;
    const between = await leases.claimIssuer(tag, 'node-b', '', 5000);
    held(between);
    await leases.releaseIssuer(tag, 'node-b', between.lease.epoch);
    resume();
    const late = await claim;
    held(late);
    assert.equal(late.lease.epoch, between.lease.epoch + 1n);
  });

  it(`exactly one of ${CLAIMERS} concurrent claimers wins, round after round`, async () => {
    const tag = await newTag();
    const claimers = [leases];
    for (let i = 1; i < CLAIMERS; i++) claimers.push(issuersOf(await fixture.openAnother()));
    let lastEpoch = 0n;
    for (let round = 0; round < ROUNDS; round++) {
      const outcomes = await Promise.all(
        claimers.map((claimer, i) => claimer.claimIssuer(tag, `node-${i}`, `http://n${i}`, 5000)),
      );
      const winners = outcomes.flatMap((outcome, i) => (outcome.held ? [{ outcome, i }] : []));
      assert.equal(winners.length, 1, `round ${round}: ${outcomes.map(describe).join(' ')}`);
      const winner = winners[0] as { outcome: { held: true; lease: IssuerLease }; i: number };
      assert.ok(winner.outcome.lease.epoch > lastEpoch);
      lastEpoch = winner.outcome.lease.epoch;
      for (const outcome of outcomes) {
        if (outcome.held) continue;
        assert.equal(outcome.node, `node-${winner.i}`);
        assert.equal(outcome.epoch, lastEpoch);
      }
      await claimers[winner.i]?.releaseIssuer(tag, `node-${winner.i}`, lastEpoch);
    }
  });

  it(`${PROCESSES} OS processes racing: one holder at a time by the store clock`, async () => {
    const tag = await newTag();
    const ttlMs = 150;
    const script = fileURLToPath(new URL('./issuer-claim-process.ts', import.meta.url));
    const processes = Array.from({ length: PROCESSES }, (_, i) =>
      drawProcess(script, [
        ...fixture.processArgs.slice(0, 1),
        tag,
        `proc-${i}`,
        String(PROCESS_ROUNDS),
        String(ttlMs),
        ...fixture.processArgs.slice(1),
      ]),
    );
    await Promise.all(processes.map((child) => child.ready));
    for (const child of processes) child.go();
    const holdings = (await Promise.all(processes.map((child) => child.lines)))
      .flat()
      .filter((line) => line.length > 0)
      .map((line) => {
        const [node = '', epoch = '', sentAt = '', gotAt = '', releasedAt = '', renewedAt = ''] =
          line.split(' ');
        return {
          node,
          epoch: BigInt(epoch),
          sentAt: Number(sentAt),
          gotAt: Number(gotAt),
          releasedAt: releasedAt === '-' ? undefined : Number(releasedAt),
          renewedAt: renewedAt === '-' ? undefined : Number(renewedAt),
        };
      });
    // Enough handovers to mean something: every process claims in turn, most rounds find a holder.
    assert.ok(holdings.length >= PROCESSES, `only ${holdings.length} holdings`);
    assert.ok(new Set(holdings.map((holding) => holding.node)).size >= 2, 'one process held all');
    assert.ok(
      holdings.some((holding) => holding.renewedAt !== undefined),
      'no renewal landed',
    );
    const epochs = new Set(holdings.map((holding) => holding.epoch));
    assert.equal(epochs.size, holdings.length, 'two claims were given the same epoch');
    holdings.sort((a, b) => (a.epoch < b.epoch ? -1 : 1));
    // Every process's clock is this host's, as is the databases' (all on loopback): a holding
    // ends at its release (sent before) or no earlier than its last confirmed claim or renewal's
    // send time + TTL, and the next holder's claim was answered only after that. 1 ms for the
    // rounding of the stores' clocks.
    for (let i = 1; i < holdings.length; i++) {
      const before = holdings[i - 1] as (typeof holdings)[number];
      const next = holdings[i] as (typeof holdings)[number];
      if (before.node === next.node) continue;
      const lastGrant = Math.max(before.sentAt, before.renewedAt ?? before.sentAt);
      const end = Math.min(before.releasedAt ?? Infinity, lastGrant + ttlMs);
      assert.ok(
        next.gotAt + 1 >= end,
        `${next.node} got epoch ${next.epoch} at ${next.gotAt}, before ${before.node}'s ` +
          `epoch ${before.epoch} ended at ${end}`,
      );
    }
  });

  // Last: the new history each makes holds every claim of the table back for a TTL.
  const losses = [
    ['a failover to a replica that lagged', (tag: string) => fixture.loseLease(tag)],
    [
      "a restore without idmint's own tables",
      async (tag: string) => {
        // The backup is older than the ranges allocated since.
        const backup = (await store.getTag(tag))?.maxId ?? 0n;
        await store.allocate(tag);
        await fixture.restoreWithoutRecords(tag, backup);
      },
    ],
  ] as const;
  for (const [loss, lose] of losses)
    it(`after ${loss} no claim lands for a TTL: a lost lease gives no two holders`, async () => {
      const tag = await newTag();
      const ttlMs = 400;
      const first = await leases.claimIssuer(tag, 'node-a', '', ttlMs);
      held(first);
      // The database loses node-a's claim: it has no lease, while node-a still issues.
      await lose(tag);
      const other = issuersOf(await fixture.openAnother());
      // The first claim on the new history fences it, and lands nothing.
      const fencedBy = Date.now();
      await rejectsWith(
        other.claimIssuer(tag, 'node-b', '', ttlMs),
        'STORE_UNAVAILABLE',
        /history/,
      );
      // node-a learns of the loss at its next renewal, and stops by its deadline either way.
      await rejectsWith(leases.renewIssuer(tag, 'node-a', first.lease.epoch, ttlMs), 'LEASE_LOST');
      // Claims land again a TTL after the fence (2 s more at most: whole-second timestamps).
      for (;;) {
        const outcome = await other
          .claimIssuer(tag, 'node-b', '', ttlMs)
          .catch((error: unknown) => {
            if (!/new history/.test(String(error))) throw error;
            return undefined;
          });
        const waited = Date.now() - fencedBy;
        if (outcome !== undefined) {
          held(outcome);
          assert.ok(waited >= ttlMs, `a claim landed ${waited} ms after the fence`);
          break;
        }
        assert.ok(waited < ttlMs + 3000, `no claim landed within ${waited} ms of the fence`);
        await sleep(100);
      }
    });
}
