// Where a tag's ordering lives (issue 24: cluster-ordered tags), on every SQL store: idmint's
// `ordering` column in the segment table, added by `idmint db init` (store.init()) as the opaque
// and periodic columns are. A Leaf table without it keeps serving plain tags and refuses an
// ordered one, naming the fix; init adds the column and the issuer lease table, idempotently.
import assert from 'node:assert/strict';
import { it, type TestContext } from 'node:test';
import { openSegmentStore, openSegmentStores } from '../src/backends/open-segment-store.ts';
import { ISSUER_TABLE } from '../src/stores/issuer-support.ts';
import { SEGMENT_BACKENDS, type SegmentBackend } from './support/segment-backends.ts';
import { rejectsWith } from './support/segment-store-suite.ts';
import { SET_URLS, dropSet } from './support/segment-sets.ts';
import { describeWithServices, uniqueName } from './support/services.ts';

type Fixture = Awaited<ReturnType<SegmentBackend['open']>>;

// Leaf's own DDL (MySQL, as scripts/leaf_alloc.sql has it) and the portable one elsewhere.
const LEAF_MYSQL_DDL = (table: string) => `CREATE TABLE \`${table}\` (
  \`biz_tag\` varchar(128)  NOT NULL DEFAULT '',
  \`max_id\` bigint(20) NOT NULL DEFAULT '1',
  \`step\` int(11) NOT NULL,
  \`description\` varchar(256)  DEFAULT NULL,
  \`update_time\` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (\`biz_tag\`)
) ENGINE=InnoDB`;
const PORTABLE_DDL = (table: string) =>
  `create table ${table} (biz_tag varchar(128) primary key, max_id bigint not null default ` +
  `1, step int not null, description varchar(256), update_time timestamp)`;

async function open(t: TestContext, backend: SegmentBackend): Promise<Fixture> {
  const fixture = await backend.open({ init: false });
  t.after(async () => {
    await fixture.dispose();
    if (backend.name !== 'sqlite')
      await backend.sql?.(
        fixture.url,
        `DELETE FROM ${ISSUER_TABLE} WHERE segment_table = '${fixture.table}'`,
      );
  });
  return fixture;
}

for (const backend of Object.values(SEGMENT_BACKENDS)) {
  if (backend.sql === undefined) continue;
  const ddl = backend.name === 'mariadb' ? LEAF_MYSQL_DDL : PORTABLE_DDL;
  await describeWithServices(`the ordering column (${backend.name})`, backend.services, () => {
    it('a Leaf table refuses an ordered tag until db init adds the column', async (t) => {
      const fixture = await open(t, backend);
      const sql = (statement: string) =>
        backend.sql?.(fixture.url, statement) ?? Promise.resolve([]);
      await sql(ddl(fixture.table));
      const { store } = fixture;
      assert.equal((await store.createTag({ tag: 'plain', step: 10 })).ordering, undefined);
      assert.deepEqual(
        (await store.listTagPage(undefined, 100)).records.map((r) => [r.tag, r.ordering]),
        [['plain', undefined]],
      );
      await rejectsWith(
        store.createTag({ tag: 'ordered', step: 10, ordering: 'cluster' }),
        'INVALID_ARGUMENT',
        new RegExp(
          `tag "ordered" cannot be cluster-ordered: table ${fixture.table} has no ordering ` +
            'column \\(a Leaf table\\); run "idmint db init" on it to add the column',
        ),
      );
      assert.equal(await store.getTag('ordered'), undefined, 'nothing was created');
      // A lease before db init (a new SQLite file has no lease table yet): made where missing.
      assert.equal(await store.issuers?.currentIssuer('plain'), undefined);
      const early = await store.issuers?.claimIssuer('plain', 'node-a', '', 1000);
      assert.equal(early?.held, true);

      // idmint db init: adds the column once, however many run at the same time.
      await Promise.all([store.init(), store.init(), store.init()]);
      const columns = (await sql(`select * from ${fixture.table} where biz_tag = 'plain'`))[0];
      assert.ok(columns !== undefined && 'ordering' in columns, 'no ordering column');
      assert.equal(columns['ordering'], null, 'existing rows are not ordered');
      const created = await store.createTag({ tag: 'ordered', step: 10, ordering: 'cluster' });
      assert.equal(created.ordering, 'cluster');
      const stored = await sql(`select ordering from ${fixture.table} where biz_tag = 'ordered'`);
      assert.equal(stored[0]?.['ordering'], 'cluster');
      // The next full read looks for the column again at its first page.
      assert.deepEqual(
        (await store.listTagPage(undefined, 100)).records
          .map((r) => [r.tag, r.ordering ?? null])
          .sort(),
        [
          ['ordered', 'cluster'],
          ['plain', null],
        ],
      );
      // init made the lease table too: the tag's lease can be claimed.
      const claimed = await store.issuers?.claimIssuer('ordered', 'node-a', '', 1000);
      assert.equal(claimed?.held, true);
      // Leaf's own INSERT, naming only Leaf's columns, still works: the column has a default.
      await sql(
        `insert into ${fixture.table}(biz_tag, max_id, step, description) ` +
          `values('leaf-again', 1, 10, 'x')`,
      );
      assert.equal((await store.getTag('leaf-again'))?.ordering, undefined);
    });

    it('an ordered tag keeps its sequence: delta and remainder with ordering', async (t) => {
      const fixture = await open(t, backend);
      await fixture.store.init();
      const tag = { tag: 'odd', step: 5, delta: 2, remainder: 1, ordering: 'cluster' } as const;
      const created = await fixture.store.createTag(tag);
      assert.deepEqual([created.ordering, created.delta, created.remainder], ['cluster', 2, 1]);
      const range = await fixture.store.allocate('odd');
      assert.deepEqual([range.start, range.stride], [1n, 2]);
    });
  });
}

// In a set, a cluster-ordered tag is allocated by database 0 alone (the database that also keeps
// its lease): its ranges then come from one max_id, increasing as a single store's do, with no
// floor to find after a takeover and nothing trimmed. The other databases refuse it, each in its
// own way: Redis's script before any write, MariaDB's transaction rolled back, PostgreSQL's
// guarded UPDATE matching nothing.
for (const names of [
  ['postgresA', 'redis'],
  ['redis', 'mariadb', 'postgresB'],
] as const) {
  const urls = names.map((name) => SET_URLS[name]);
  const services = [
    ...new Set(names.map((name) => (name.startsWith('postgres') ? 'postgres' : name))),
  ].map((name) => (name === 'mariadb' ? 'mysql' : name)) as ('postgres' | 'mysql' | 'redis')[];
  await describeWithServices(
    `cluster-ordered tags in a set (${names.join(', ')})`,
    services,
    () => {
      it('only database 0 allocates an ordered tag; every range above the last', async (t) => {
        const table = uniqueName('ord_set');
        const first = await openSegmentStores(urls, { table, init: true, verify: false });
        await first.join();
        const opened: { close(): Promise<void> }[] = [first];
        t.after(async () => {
          for (const store of opened) await store.close();
          await dropSet(urls, table);
        });
        await first.createTag({ tag: 'ordered', step: 5, ordering: 'cluster' });
        await first.createTag({ tag: 'plain', step: 5 });
        // A node that has not read the tag yet learns it from a refusal, once.
        const second = await openSegmentStores(urls, { table });
        opened.push(second);
        const n = BigInt(urls.length);
        const ranges = [];
        for (let i = 0; i < 12; i++)
          ranges.push(await (i % 2 === 0 ? second : first).allocate('ordered'));
        for (const [i, range] of ranges.entries()) {
          assert.equal(
            range.start % n,
            0n,
            `range ${i} [${range.start}, ${range.end}) not from db 0`,
          );
          if (i > 0)
            assert.ok(range.start > (ranges[i - 1]?.end ?? 0n) - 1n, `range ${i} went back`);
        }
        const plain = new Set<bigint>();
        for (let i = 0; i < 2 * urls.length; i++)
          plain.add((await first.allocate('plain')).start % n);
        assert.equal(plain.size, urls.length, 'a plain tag still comes from every database');

        // A database other than 0, used on its own, says why it will not.
        const member = await openSegmentStore(urls[1] as string, {
          table,
          residue: { offset: 1, increment: urls.length },
        });
        opened.push(member);
        await rejectsWith(
          member.allocate('ordered'),
          'TAG_MISCONFIGURED',
          /"ordered" is cluster-ordered: only database 0 of its set allocates it \(this is/,
        );
      });
    },
  );
}

// A set formed or grown by `idmint db init` (MultiSegmentStore.join) gives a cluster-ordered tag's
// new rows its mark: a database added at r > 0 then refuses it as the others do.
await describeWithServices(
  'a cluster-ordered tag across a set growing',
  ['postgres', 'redis'],
  () => {
    it('the new database gets the mark; ranges stay above the last, from database 0', async (t) => {
      const table = uniqueName('ord_grow');
      const one = [SET_URLS.postgresA];
      const two = [SET_URLS.postgresA, SET_URLS.redis];
      const opened: { close(): Promise<void> }[] = [];
      t.after(async () => {
        for (const store of opened) await store.close();
        await dropSet(two, table);
      });
      const small = await openSegmentStores(one, { table, init: true, verify: false });
      opened.push(small);
      await small.join();
      await small.createTag({ tag: 'ordered', step: 5, ordering: 'cluster' });
      let last = (await small.allocate('ordered')).end;
      const grown = await openSegmentStores(two, { table, init: true, verify: false });
      opened.push(grown);
      await grown.join();
      const added = await openSegmentStore(SET_URLS.redis, {
        table,
        residue: { offset: 1, increment: 2 },
      });
      opened.push(added);
      assert.equal((await added.getTag('ordered'))?.ordering, 'cluster');
      await rejectsWith(added.allocate('ordered'), 'TAG_MISCONFIGURED', /only database 0/);
      for (let i = 0; i < 6; i++) {
        const range = await grown.allocate('ordered');
        assert.equal(range.start % 2n, 0n, `[${range.start}, ${range.end}) not from database 0`);
        assert.ok(range.start >= last, `[${range.start}, ${range.end}) below ${last}`);
        last = range.end;
      }
    });
  },
);
