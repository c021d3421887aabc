import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { isIdMintError, type ErrorCode } from '../../src/core/errors.ts';
import { MAX_SEGMENT_ID } from '../../src/core/segment-limits.ts';
import type {
  SegmentRange,
  SegmentStore,
  StoreHistoryEvent,
} from '../../src/ports/segment-store.ts';
import type { OpenSegmentStoreOptions } from '../../src/backends/open-segment-store.ts';

/** A store on a table (or key prefix) of its own, and how to remove that table afterwards. */
export interface SegmentStoreFixture {
  readonly store: SegmentStore;
  /** Closes the store and drops what the fixture created. */
  dispose(): Promise<void>;
  /**
   * Writes the table's recorded history by hand (undefined: deletes the record), as a failover
   * or a restore leaves it: the live history is then not the recorded one. Absent where the
   * database is private to the store (SQLite :memory:).
   */
  setRecordedHistory?(value: string | undefined): Promise<void>;
  /** Opens another store (another node) on the same table; closed by dispose. */
  openAnother?(options?: OpenSegmentStoreOptions): Promise<SegmentStore>;
  /**
   * True where several stores in one process must take turns (SQLite: a write lock on the file,
   * waited for inside one event loop, would wait for a transaction that loop cannot finish).
   */
  readonly sequentialNodes?: boolean;
}

/** The form of StoreHistory.live on each backend. */
const LIVE_HISTORY =
  /^(postgres system \d+ timeline \d+|mysql server_id \d+|redis replid [0-9a-f]{40}|sqlite)$/;

/** Resolves if `promise` rejects with an IdMintError of `code`. */
export async function rejectsWith(
  promise: Promise<unknown>,
  code: ErrorCode,
  pattern?: RegExp,
): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(
      isIdMintError(error, code),
      `expected ${code}, got ` +
        (error instanceof Error
          ? `${(error as { code?: string }).code ?? error.name}: ${error.message}`
          : String(error)),
    );
    if (pattern !== undefined) assert.match(error.message, pattern);
    return true;
  });
}

/**
 * The SegmentStore contract, written once and run against every adapter (call it inside a
 * describe). Each run works on a fresh table or key prefix from `create`.
 */
export function runSegmentStoreSuite(options: {
  create: () => Promise<SegmentStoreFixture>;
  /**
   * False where the database is private to the one store (SQLite :memory:): the tests that rewrite
   * the recorded history or open a second store are then not registered (the same code runs them
   * on a SQLite file). Default true, and then the fixture must provide both.
   */
  readonly shared?: boolean;
}): void {
  let fixture: SegmentStoreFixture;
  let store: SegmentStore;

  before(async () => {
    fixture = await options.create();
    store = fixture.store;
    await store.init();
    await store.init(); // idempotent
  });
  after(() => fixture.dispose());

  it('creates a tag with Leaf defaults and reads it back', async () => {
    const created = await store.createTag({
      tag: 'create-1',
      step: 2000,
      description: 'first tag',
    });
    assert.equal(created.tag, 'create-1');
    assert.equal(created.maxId, 1n);
    assert.equal(created.step, 2000);
    assert.equal(created.description, 'first tag');
    assert.ok(created.updatedAt === null || !Number.isNaN(created.updatedAt.getTime()));
    assert.deepEqual(await store.getTag('create-1'), created);

    const bare = await store.createTag({ tag: 'create.2:x_Y', step: 1, startId: 0n });
    assert.equal(bare.maxId, 0n);
    assert.equal(bare.description, null);
    assert.equal(await store.getTag('no-such-tag'), undefined);
  });

  it("keeps a periodic tag's option with its row, whose own max_id issues nothing", async () => {
    const periodic = {
      period: 'day',
      timeZone: 'asia/shanghai',
      template: '{yyyyMMdd}{seq:6}',
    } as const;
    const created = await store.createTag({ tag: 'periodic-1', step: 100, periodic });
    const stored = {
      period: 'day',
      timeZone: 'Asia/Shanghai',
      template: '{yyyyMMdd}{seq:6}',
      start: 1,
    };
    assert.deepEqual(JSON.parse(created.periodic ?? 'null'), stored);
    assert.equal(created.maxId, MAX_SEGMENT_ID);
    assert.deepEqual(await store.getTag('periodic-1'), created);
    const listed = (await store.listTags()).find((record) => record.tag === 'periodic-1');
    assert.equal(listed?.periodic, created.periodic);
    // A node that draws from the tag as from a plain one gets no range, never bare IDs.
    await rejectsWith(store.allocate('periodic-1'), 'ID_SPACE_EXHAUSTED');
    assert.equal((await store.getTag('periodic-1'))?.maxId, MAX_SEGMENT_ID);
    // Plain rows carry no option; a period row is a plain row.
    const row = await store.createTag({ tag: 'periodic-1@20261127', step: 100 });
    assert.equal(row.periodic, undefined);
    await rejectsWith(
      store.createTag({ tag: 'periodic-2', step: 1_000_000, periodic }),
      'INVALID_ARGUMENT',
      /step 1000000 is larger than the 999999 sequence numbers/,
    );
    await rejectsWith(
      store.createTag({ tag: 'periodic-3', step: 1, periodic: { ...periodic, template: '{x}' } }),
      'INVALID_ARGUMENT',
      /unknown token \{x\}/,
    );
    assert.equal(await store.getTag('periodic-2'), undefined);
  });

  it('deletes a row: gone from reads and lists, false the second time, others kept', async () => {
    assert.ok(store.deleteTag !== undefined, 'every store deletes');
    await store.createTag({ tag: 'delete-1@20261125', step: 10 });
    await store.createTag({ tag: 'delete-1@20261126', step: 10 });
    await store.allocate('delete-1@20261125');
    assert.equal(await store.deleteTag('delete-1@20261125'), true);
    assert.equal(await store.getTag('delete-1@20261125'), undefined);
    const names = (await store.listTags()).map((record) => record.tag);
    assert.ok(!names.includes('delete-1@20261125') && names.includes('delete-1@20261126'));
    assert.equal(await store.deleteTag('delete-1@20261125'), false);
    await rejectsWith(store.allocate('delete-1@20261125'), 'TAG_NOT_FOUND');
    // Created again, a row starts over: why only rows nothing draws from are deleted.
    assert.equal((await store.createTag({ tag: 'delete-1@20261125', step: 10 })).maxId >= 1n, true);
  });

  it('reads the tag list a page at a time, pages no larger than asked', async () => {
    for (let i = 0; i < 12; i++) await store.createTag({ tag: `page-${i}`, step: 10 });
    const paged: string[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const page = await store.listTagPage(after, 5);
      paged.push(...page.records.map((record) => record.tag));
      after = page.next;
      assert.ok(++pages < 1000, 'the pages end');
    } while (after !== undefined);
    const all = (await store.listTags()).map((record) => record.tag);
    assert.deepEqual([...new Set(paged)].sort(), [...all].sort());
    assert.ok(
      pages >= 2 || store.backend === 'redis',
      `${all.length} tags in pages of 5 took ${pages} page(s)`,
    );
    await rejectsWith(
      store.listTagPage(undefined, 0),
      'INVALID_ARGUMENT',
      /limit must be an integer from 1 to 100000/,
    );
    await rejectsWith(store.listTagPage(undefined, 100_001), 'INVALID_ARGUMENT', /limit must be/);
  });

  it('reports the tags written since a change cursor, refuses a foreign one', async () => {
    await store.createTag({ tag: 'change-old', step: 10 });
    const first = await store.listTagChanges(undefined);
    assert.deepEqual(first.records, [], 'no cursor: the store time only');
    assert.equal(typeof first.cursor, 'string');
    await store.createTag({ tag: 'change-new', step: 10 });
    await store.allocate('change-old');
    const changes = await store.listTagChanges(first.cursor);
    const tags = changes.records.map((record) => record.tag);
    assert.ok(
      tags.includes('change-new') && tags.includes('change-old'),
      `written since the cursor: ${tags.join(', ')}`,
    );
    assert.equal(
      changes.records.find((record) => record.tag === 'change-old')?.maxId,
      11n,
      'the row as it is now',
    );
    await rejectsWith(store.listTagChanges('not a cursor'), 'INVALID_ARGUMENT', /cursor/);
  });

  it('refuses a duplicate tag with TAG_EXISTS and changes nothing', async () => {
    await store.createTag({ tag: 'dup', step: 10, startId: 500n });
    await rejectsWith(
      store.createTag({ tag: 'dup', step: 99 }),
      'TAG_EXISTS',
      /"dup" already exists/,
    );
    const row = await store.getTag('dup');
    assert.equal(row?.maxId, 500n);
    assert.equal(row?.step, 10);
  });

  it('refuses bad tags, steps, start IDs and descriptions with INVALID_ARGUMENT', async () => {
    const bad: [() => Promise<unknown>, RegExp][] = [
      [() => store.createTag({ tag: '', step: 10 }), /tag must be 1 to 128 characters/],
      [() => store.createTag({ tag: 'x'.repeat(129), step: 10 }), /tag must be/],
      // 129 code points (258 UTF-16 units): longer than varchar(128) holds.
      [() => store.createTag({ tag: '\u{1F600}'.repeat(129), step: 10 }), /tag must be/],
      [
        () => store.createTag({ tag: 'nul\u0000tag', step: 10 }),
        /none of them U\+0000 or an unpaired surrogate/,
      ],
      [() => store.createTag({ tag: 'lone\uD800', step: 10 }), /tag must be/],
      [
        () => store.createTag({ tag: 'ok-tag', step: 0 }),
        /step must be an integer from 1 to 2147483647/,
      ],
      [() => store.createTag({ tag: 'ok-tag', step: 1.5 }), /step must be/],
      [() => store.createTag({ tag: 'ok-tag', step: 2 ** 31 }), /step must be/],
      [
        () => store.createTag({ tag: 'ok-tag', step: 10, startId: -1n }),
        /startId must be a bigint from 0/,
      ],
      [
        () => store.createTag({ tag: 'ok-tag', step: 10, startId: MAX_SEGMENT_ID + 1n }),
        /startId must be/,
      ],
      [
        () => store.createTag({ tag: 'ok-tag', step: 10, description: 'd'.repeat(257) }),
        /description must be null or a string of at most 256 characters/,
      ],
      [
        () => store.createTag({ tag: 'ok-tag', step: 10, description: 'a\u0000b' }),
        /description must be .*none of them U\+0000/,
      ],
      [
        () => store.createTag({ tag: 'ok-tag', step: 10, description: 'x\uDC00' }),
        /description must be/,
      ],
      [() => store.allocate('nul\u0000tag'), /tag must be/],
      [() => store.allocate('ok-tag', 0), /step must be/],
      [() => store.release('ok-tag', 10n, 10n), /from < to/],
      [() => store.updateTag('ok-tag', { step: -5 }), /step must be/],
      [() => store.getTag('x'.repeat(129)), /tag must be/],
    ];
    for (const [call, message] of bad) await rejectsWith(call(), 'INVALID_ARGUMENT', message);
    assert.equal(await store.getTag('ok-tag'), undefined);
  });

  it('descriptions: U+0000 refused on create and update; the rest kept', async () => {
    await store.createTag({ tag: 'described', step: 10, description: 'before' });
    await rejectsWith(
      store.updateTag('described', { description: 'a\u0000b' }),
      'INVALID_ARGUMENT',
      /U\+0000/,
    );
    assert.equal((await store.getTag('described'))?.description, 'before', 'nothing changed');
    for (const description of [
      'tab\tnew\nline "quoted" \\ back',
      '\u{1F600}'.repeat(256),
      '\u00e4'.repeat(256),
      '',
    ]) {
      assert.equal((await store.updateTag('described', { description })).description, description);
      assert.equal((await store.getTag('described'))?.description, description);
    }
  });

  it('stores any tag a Leaf varchar(128) holds, Unicode and symbols too', async () => {
    const tags = [
      'has space',
      ' lead and trail',
      '\u8ba2\u5355/\u652f\u4ed8',
      'x:tag:y',
      'tags',
      '{slot}',
      'a{b}c:d',
      'tab\there "quote" back\\slash %20',
      '\u{1F600}'.repeat(128),
      '\u4e2d'.repeat(128),
      // Distinct on every store: the table idmint creates on MySQL compares exactly (utf8mb4_bin).
      'Case-A',
      'case-a',
      '\u00e4-tag',
      'a-tag',
    ];
    for (const [i, tag] of tags.entries()) {
      const created = await store.createTag({ tag, step: 10, startId: BigInt(i * 100) });
      assert.equal(created.tag, tag);
      assert.deepEqual(await store.getTag(tag), created);
    }
    for (const [i, tag] of tags.entries()) {
      assert.deepEqual(
        await store.allocate(tag),
        { tag, start: BigInt(i * 100), end: BigInt(i * 100 + 10), step: 10, tagStep: 10 },
        tag,
      );
      assert.equal(await store.release(tag, BigInt(i * 100 + 3), BigInt(i * 100 + 10)), true);
      assert.equal((await store.updateTag(tag, { step: 20 })).maxId, BigInt(i * 100 + 3));
    }
    const listed = new Map((await store.listTags()).map((record) => [record.tag, record]));
    for (const [i, tag] of tags.entries())
      assert.equal(listed.get(tag)?.maxId, BigInt(i * 100 + 3), `listed ${JSON.stringify(tag)}`);
    // The Redis key of tag 'tags' is not the tag set, and a tag with ':' is not another namespace.
    assert.equal(await store.getTag('x'), undefined);
    assert.equal(await store.getTag('tag:x'), undefined);
  });

  it('refuses at creation a start with no room for one range below 2^63-1', async () => {
    await rejectsWith(
      store.createTag({ tag: 'at-top', step: 10, startId: MAX_SEGMENT_ID - 9n }),
      'INVALID_ARGUMENT',
      new RegExp(
        'startId must leave room for one range of step 10 below 9223372036854775807: at most ' +
          '9223372036854775797, got 9223372036854775798n',
      ),
    );
    await rejectsWith(
      store.createTag({ tag: 'at-top', step: 1, startId: MAX_SEGMENT_ID }),
      'INVALID_ARGUMENT',
      /startId must leave room/,
    );
    assert.equal(await store.getTag('at-top'), undefined);
    await store.createTag({ tag: 'at-top', step: 10, startId: MAX_SEGMENT_ID - 10n });
    assert.deepEqual(await store.allocate('at-top'), {
      tag: 'at-top',
      start: MAX_SEGMENT_ID - 10n,
      end: MAX_SEGMENT_ID,
      step: 10,
      tagStep: 10,
    });
    await rejectsWith(store.allocate('at-top'), 'ID_SPACE_EXHAUSTED');
  });

  it('lists every tag, sorted by name', async () => {
    for (const tag of ['list-b', 'LIST-C', 'list-a']) await store.createTag({ tag, step: 5 });
    const tags = (await store.listTags()).map((record) => record.tag);
    assert.deepEqual(tags, [...tags].sort());
    assert.deepEqual(
      tags.filter((tag) => tag.toLowerCase().startsWith('list-')),
      ['LIST-C', 'list-a', 'list-b'],
    );
    const listed = (await store.listTags()).find((record) => record.tag === 'list-a');
    assert.deepEqual(listed, await store.getTag('list-a'));
  });

  it('updates step and description; an unknown tag is TAG_NOT_FOUND', async () => {
    await store.createTag({ tag: 'upd', step: 100, description: 'before' });
    let row = await store.updateTag('upd', { step: 500 });
    assert.equal(row.step, 500);
    assert.equal(row.description, 'before');
    row = await store.updateTag('upd', { description: null });
    assert.equal(row.description, null);
    row = await store.updateTag('upd', { description: 'after', step: 7 });
    assert.deepEqual([row.step, row.description, row.maxId], [7, 'after', 1n]);
    assert.deepEqual(await store.updateTag('upd', {}), await store.getTag('upd'));
    assert.equal((await store.allocate('upd')).step, 7);
    await rejectsWith(store.updateTag('no-such-tag', { step: 5 }), 'TAG_NOT_FOUND');
  });

  it('allocates exactly as Leaf: [max_id - step, max_id) after the update', async () => {
    await store.createTag({ tag: 'leaf-segment-test', step: 2000, startId: 1n });
    assert.deepEqual(await store.allocate('leaf-segment-test'), {
      tag: 'leaf-segment-test',
      start: 1n,
      end: 2001n,
      step: 2000,
      tagStep: 2000,
    });
    assert.equal((await store.getTag('leaf-segment-test'))?.maxId, 2001n);
    assert.deepEqual(await store.allocate('leaf-segment-test', 500), {
      tag: 'leaf-segment-test',
      start: 2001n,
      end: 2501n,
      step: 500,
      tagStep: 2000,
    });
    assert.deepEqual(await store.allocate('leaf-segment-test'), {
      tag: 'leaf-segment-test',
      start: 2501n,
      end: 4501n,
      step: 2000,
      tagStep: 2000,
    });
    await rejectsWith(
      store.allocate('no-such-tag'),
      'TAG_NOT_FOUND',
      /"no-such-tag" does not exist/,
    );
  });

  it('parallel allocations of one tag are disjoint and contiguous', async () => {
    await store.createTag({ tag: 'parallel', step: 10 });
    const ranges = await Promise.all(
      Array.from({ length: 64 }, (_, i) => store.allocate('parallel', i % 3 === 0 ? 7 : undefined)),
    );
    assertContiguous(ranges, 1n);
    assert.equal(
      (await store.getTag('parallel'))?.maxId,
      ranges.reduce((end, range) => (range.end > end ? range.end : end), 0n),
    );
  });

  it('keeps values near 2^62 exact', async () => {
    const start = 2n ** 62n - 3n;
    await store.createTag({ tag: 'big', step: 1000, startId: start });
    assert.deepEqual(await store.allocate('big'), {
      tag: 'big',
      start,
      end: start + 1000n,
      step: 1000,
      tagStep: 1000,
    });
    assert.equal((await store.getTag('big'))?.maxId, start + 1000n);
    assert.equal(
      (await store.listTags()).find((record) => record.tag === 'big')?.maxId,
      start + 1000n,
    );
    assert.equal(await store.release('big', start + 1n, start + 1000n), true);
    assert.equal((await store.allocate('big', 2)).start, start + 1n);
  });

  it('refuses a range past 2^63-1 with ID_SPACE_EXHAUSTED and changes nothing', async () => {
    await store.createTag({ tag: 'top', step: 100, startId: MAX_SEGMENT_ID - 100n });
    assert.deepEqual(await store.allocate('top'), {
      tag: 'top',
      start: MAX_SEGMENT_ID - 100n,
      end: MAX_SEGMENT_ID,
      step: 100,
      tagStep: 100,
    });
    await rejectsWith(
      store.allocate('top'),
      'ID_SPACE_EXHAUSTED',
      /would pass 9223372036854775807/,
    );
    await rejectsWith(store.allocate('top', 1), 'ID_SPACE_EXHAUSTED');
    assert.equal((await store.getTag('top'))?.maxId, MAX_SEGMENT_ID);

    // A step raised after creation may no longer fit: refused, nothing changed.
    await store.createTag({ tag: 'near-top', step: 50, startId: MAX_SEGMENT_ID - 50n });
    await store.updateTag('near-top', { step: 2 ** 31 - 1 });
    await rejectsWith(store.allocate('near-top'), 'ID_SPACE_EXHAUSTED');
    await rejectsWith(store.allocate('near-top', 51), 'ID_SPACE_EXHAUSTED');
    assert.equal((await store.getTag('near-top'))?.maxId, MAX_SEGMENT_ID - 50n);
    assert.equal((await store.allocate('near-top', 50)).end, MAX_SEGMENT_ID);
  });

  // The history (docs/segments.md, Failover and restore). The tests that rewrite the record come
  // last: a fence raises every tag of the table.
  it("records its database's history at init, and allocates only on it", async () => {
    const [history] = await store.history();
    assert.match(history?.live ?? '', LIVE_HISTORY);
    assert.equal(history?.recorded, history?.live);
    // Created empty by init: its history recorded, no fence counted (nothing had been issued).
    assert.equal(history?.fences, 0, 'init counted a fence of an empty table');
    await store.init();
    assert.deepEqual(
      await store.history(),
      [history],
      'init again: the same history, no new fence',
    );
  });

  it('raise moves max_id up to a target, never down', async () => {
    await store.createTag({ tag: 'raise', step: 10, startId: 100n });
    assert.equal(await store.raise('raise', 500n), true);
    assert.equal((await store.getTag('raise'))?.maxId, 500n);
    assert.equal(await store.raise('raise', 300n), false);
    assert.equal(await store.raise('raise', 500n), false);
    assert.equal((await store.getTag('raise'))?.maxId, 500n);
    assert.equal(
      await store.raise('raise', 1000n),
      true,
      'a longer number is larger (Redis compares decimal strings)',
    );
    assert.equal((await store.allocate('raise')).start, 1000n);
    assert.equal(await store.raise('no-such-tag', 5n), false);
    await rejectsWith(
      store.raise('raise', -1n),
      'INVALID_ARGUMENT',
      /atLeast must be a bigint from 0/,
    );
  });

  it("an operator's fence raises every tag or one, capped; ifFences once", async () => {
    await store.createTag({ tag: 'op-a', step: 10, startId: 100n });
    await store.createTag({ tag: 'op-b', step: 70, startId: 200n });
    await store.createTag({ tag: 'op-top', step: 10, startId: MAX_SEGMENT_ID - 20n });
    const maxId = async (tag: string) => (await store.getTag(tag))?.maxId;
    const [start] = await store.history();
    const fences = start?.fences ?? 0;
    const [all] = await store.fence({ margin: { ids: 1000n } });
    assert.equal(all?.fenced, true);
    assert.ok((all?.tags ?? 0) >= 3, `${all?.tags} tags raised`);
    assert.deepEqual([all?.fences, all?.history], [fences + 1, start?.live]);
    assert.deepEqual(
      [await maxId('op-a'), await maxId('op-b'), await maxId('op-top')],
      [1100n, 1200n, MAX_SEGMENT_ID],
    );
    await rejectsWith(store.allocate('op-top'), 'ID_SPACE_EXHAUSTED');
    // In ranges: 2 of max(maxStep 50, the tag's step 70).
    const [one] = await store.fence({ margin: { ranges: 2, maxStep: 50 }, tag: 'op-b' });
    assert.deepEqual([one?.fenced, one?.tags, one?.fences], [true, 1, fences + 2]);
    assert.deepEqual([await maxId('op-a'), await maxId('op-b')], [1100n, 1340n]);
    // A script that read the count fences once, however often it is run again.
    for (let run = 0; run < 3; run++) {
      const [report] = await store.fence({
        margin: { ids: 5n },
        tag: 'op-a',
        ifFences: fences + 2,
      });
      assert.deepEqual([report?.fenced, report?.fences], [run === 0, fences + 3], `run ${run}`);
    }
    assert.equal(await maxId('op-a'), 1105n);
    await rejectsWith(store.fence({ tag: 'no-such-tag' }), 'TAG_NOT_FOUND');
    await rejectsWith(
      store.fence({ margin: { ids: 0n } }),
      'INVALID_ARGUMENT',
      /margin in IDs must be a bigint/,
    );
    await rejectsWith(
      store.fence({ margin: { ranges: 0, maxStep: 10 } }),
      'INVALID_ARGUMENT',
      /fence ranges must be/,
    );
    assert.equal((await store.history())[0]?.fences, fences + 3, 'refused fences changed nothing');
    assert.equal((await store.allocate('op-a')).start, 1105n);
  });

  /**
   * The fixture's hooks to reach the database from outside the store; a shared fixture must have
   * them.
   */
  const hooks = () => {
    const { setRecordedHistory, openAnother } = fixture;
    const provided = setRecordedHistory !== undefined && openAnother !== undefined;
    assert.ok(
      provided,
      'a fixture on a shared database provides setRecordedHistory and openAnother',
    );
    return { setRecordedHistory, openAnother };
  };
  // Registered only on a shared database: never reported as skipped where they cannot apply.
  const sharedIt = (name: string, run: () => Promise<void>) => {
    if (options.shared ?? true) it(name, run);
  };

  sharedIt(
    'fences a new history once, before any range comes from it, however many nodes find it',
    async () => {
      const { setRecordedHistory, openAnother } = hooks();
      await store.createTag({ tag: 'new-history', step: 10, startId: 1000n });
      await store.createTag({ tag: 'new-history-wide', step: 500, startId: 5000n });
      assert.equal((await store.allocate('new-history')).end, 1010n);
      const [before] = await store.history();
      await setRecordedHistory('a history the database no longer has');
      const events: StoreHistoryEvent[] = [];
      const margin = { ranges: 3, maxStep: 100 };
      const onHistory = (event: StoreHistoryEvent) => events.push(event);
      const nodes = await Promise.all(
        Array.from({ length: 8 }, () => openAnother({ fence: margin, onHistory })),
      );
      // At once, except on SQLite: its stores in one process would wait for each other's write lock
      // inside one event loop (SQLite nodes are separate processes, which the file lock
      // serialises). The nodes still run one after another, each finding the history fenced or
      // fencing it.
      const twice = (node: SegmentStore) =>
        Promise.all([node.allocate('new-history'), node.allocate('new-history')]);
      const ranges: SegmentRange[] = [];
      if (fixture.sequentialNodes === true)
        for (const node of nodes) ranges.push(...(await twice(node)));
      else ranges.push(...(await Promise.all(nodes.map(twice))).flat());
      // One fence of 3 ranges of max(100, 10): the ranges tile from 1010 + 300, no second gap.
      assertContiguous(ranges, 1310n);
      const wide = (await store.getTag('new-history-wide'))?.maxId;
      assert.equal(wide, 5000n + 3n * 500n, 'every tag fenced, by its largest range');
      const [after] = await store.history();
      assert.deepEqual([after?.recorded, after?.fences], [before?.live, (before?.fences ?? 0) + 1]);
      const fenced = events.filter((event) => event.action === 'fenced');
      assert.equal(fenced.length, 1, `fence events: ${JSON.stringify(events)}`);
      const database = fenced[0]?.database === undefined ? {} : { database: fenced[0].database };
      assert.deepEqual(
        { ...fenced[0], tags: undefined },
        {
          type: 'history',
          action: 'fenced',
          table: fenced[0]?.table,
          ...database,
          from: 'a history the database no longer has',
          to: before?.live,
          tags: undefined,
          margin: "3 ranges of max(100, the tag's step)",
        },
      );
      assert.ok((fenced[0]?.tags ?? 0) >= 2);
    },
  );

  sharedIt('a table with no history recorded is fenced by its first allocation', async () => {
    const { setRecordedHistory, openAnother } = hooks();
    await store.createTag({ tag: 'unrecorded', step: 10, startId: 50n });
    await setRecordedHistory(undefined);
    assert.equal((await store.history())[0]?.recorded, undefined);
    const node = await openAnother({ fence: { ids: 777n } });
    assert.equal((await node.allocate('unrecorded')).start, 50n + 777n);
    const [history] = await store.history();
    assert.deepEqual([history?.recorded, history?.fences], [history?.live, 1]);
  });

  sharedIt('gives nothing back to a history it has not verified', async () => {
    const { setRecordedHistory } = hooks();
    await store.createTag({ tag: 'give-back-unverified', step: 10 });
    const range = await store.allocate('give-back-unverified');
    await setRecordedHistory('another history');
    assert.equal(await store.release('give-back-unverified', range.start + 1n, range.end), false);
    assert.equal((await store.getTag('give-back-unverified'))?.maxId, range.end);
    await store.init(); // fences the "new" history: the table is verified again
    assert.equal((await store.history())[0]?.recorded, (await store.history())[0]?.live);
  });

  it('release gives a tail back only if nobody allocated after it', async () => {
    await store.createTag({ tag: 'give-back', step: 10 });
    const first = await store.allocate('give-back');
    assert.equal(await store.release('give-back', 5n, first.end), true);
    assert.equal((await store.getTag('give-back'))?.maxId, 5n);
    const second = await store.allocate('give-back');
    assert.deepEqual([second.start, second.end], [5n, 15n]);
    assert.equal(
      await store.release('give-back', 7n, first.end),
      false,
      'a stale `to` must not move max_id',
    );
    assert.equal((await store.getTag('give-back'))?.maxId, 15n);
    assert.equal(await store.release('no-such-tag', 1n, 2n), false);
  });
}

/** Asserts the ranges, sorted, tile `[first, ...)` with no gap and no overlap. */
export function assertContiguous(ranges: readonly SegmentRange[], first: bigint): void {
  const sorted = [...ranges].sort((a, b) => (a.start < b.start ? -1 : 1));
  let expected = first;
  for (const range of sorted) {
    assert.equal(
      range.start,
      expected,
      `range [${range.start}, ${range.end}) should start at ${expected}`,
    );
    assert.equal(range.end - range.start, BigInt(range.step));
    expected = range.end;
  }
}
