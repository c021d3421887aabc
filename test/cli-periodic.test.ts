import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { PeriodicSequence } from '../src/core/periodic.ts';
import { openSegmentStore } from '../src/backends/open-segment-store.ts';
import { runIdmint } from './support/cli.ts';

// `idmint tags` for periodic tags: create one, list its periods' rows, clean the old ones while
// the current and the previous period always stay.

describe('idmint tags for periodic tags', () => {
  const dir = mkdtempSync(join(tmpdir(), 'idmint-periodic-cli-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const url = `sqlite:${join(dir, 'ids.db')}`;
  const idmint = async (...args: string[]) => {
    const run = await runIdmint(['tags', ...args, '--store', url]);
    return { ...run, lines: run.stdout.trimEnd().split('\n') };
  };
  const tagsOf = (lines: string[]) =>
    lines.map((line) => (JSON.parse(line) as { tag: string }).tag);

  it('creates a periodic tag with its option, and refuses a bad one naming it', async () => {
    const created = await idmint(
      'create',
      'orders',
      '--step',
      '50',
      '--periodic',
      'day',
      '--template',
      '{yyyyMMdd}{seq:6}',
      '--json',
    );
    assert.equal(created.code, 0, created.stderr);
    assert.deepEqual(JSON.parse(created.stdout).periodic, {
      period: 'day',
      timeZone: 'UTC',
      template: '{yyyyMMdd}{seq:6}',
      start: 1,
    });
    const bad = await idmint(
      'create',
      'x',
      '--step',
      '5',
      '--periodic',
      'day',
      '--template',
      '{q}',
    );
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown token \{q\}/);
    const noTemplate = await idmint('create', 'y', '--step', '5', '--periodic', 'month');
    assert.match(noTemplate.stderr, /missing --template/);
  });

  it("shows a periodic tag's option in the table, as JSON shows it", async () => {
    // The tag's own row holds max_id 2^63-1 (it issues nothing itself): without the option beside
    // it, the table gave no sign that the tag is periodic, or of its period, zone and template.
    const created = await idmint(
      'create',
      'invoices',
      '--step',
      '50',
      '--periodic',
      'month',
      '--time-zone',
      'Asia/Shanghai',
      '--template',
      'INV-{yyyyMM}-{seq:5}',
      '--seq-start',
      '100',
    );
    assert.equal(created.code, 0, created.stderr);
    assert.match(
      created.lines[0] ?? '',
      /^TAG\s+MAX_ID\s+STEP\s+OPAQUE\s+ORDERING\s+PERIODIC\s+DESC/,
    );
    const option = 'month Asia/Shanghai INV-{yyyyMM}-{seq:5} from 100';
    assert.match(created.lines[1] ?? '', /^invoices\s+9223372036854775807\s+50\s+no\s+-\s+(.*)$/);
    assert.equal(/\s+-\s+(month.*)$/.exec(created.lines[1] ?? '')?.[1], option);
    const plain = await idmint('create', 'plain', '--step', '5', '--description', 'Plain');
    assert.match(plain.lines[1] ?? '', /^plain\s+1\s+5\s+no\s+-\s+-\s+Plain$/);
  });

  it('lists periods oldest first, cleans those older than N, never the last two', async () => {
    const sequence = PeriodicSequence.from({
      period: 'day',
      timeZone: 'UTC',
      template: '{yyyyMMdd}{seq:6}',
    });
    const current = sequence.windowAt(Date.now());
    const previous = sequence.windowAt(current.start - 1);
    const rows = ['orders@20200101', 'orders@20200102', `orders@${previous.key}`];
    rows.push(`orders@${current.key}`);
    const store = await openSegmentStore(url);
    try {
      for (const tag of rows) await store.createTag({ tag, step: 50 });
      await store.createTag({ tag: 'ordersx@20200101', step: 5 });
    } finally {
      await store.close();
    }
    const periods = await idmint('periods', 'orders', '--json');
    assert.equal(periods.code, 0, periods.stderr);
    assert.deepEqual(tagsOf(periods.lines), rows);

    const refused = await idmint('clean', 'orders', '--older-than', '0');
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /--older-than must be an integer from 1/);
    const cleaned = await idmint('clean', 'orders', '--older-than', '1', '--json');
    assert.equal(cleaned.code, 0, cleaned.stderr);
    assert.deepEqual(tagsOf(cleaned.lines), ['orders@20200101', 'orders@20200102']);
    assert.deepEqual(tagsOf((await idmint('periods', 'orders', '--json')).lines), rows.slice(2));
    // Nothing left to clean, or no rows yet: a sentence, not a bare table header.
    const again = await idmint('clean', 'orders', '--older-than', '1');
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(again.lines, [
      'nothing to clean: no period of tag "orders" is more than 1 periods old',
    ]);
    const fresh = ['--step', '5', '--periodic', 'day', '--template', '{yyyyMMdd}{seq:4}'];
    assert.equal((await idmint('create', 'fresh', ...fresh)).code, 0);
    assert.deepEqual((await idmint('periods', 'fresh')).lines, [
      'tag "fresh" has no period rows yet: the first ID of a period creates its row',
    ]);
    // Another tag's rows and the tag's own row are left alone.
    const all = tagsOf((await idmint('list', '--json')).lines);
    assert.ok(all.includes('ordersx@20200101') && all.includes('orders'));
    const plain = await idmint('periods', 'ordersx@20200101');
    assert.match(plain.stderr, /is not periodic/);
  });
});
