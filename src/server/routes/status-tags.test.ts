import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SegmentTagStats } from '../../core/segment-buffer.ts';
import { idleStats } from '../../service/segment-service.ts';
import { SortedTagNames } from '../../service/sorted-tag-names.ts';
import { SELECTIONS, SORTS } from '../../contract/status.ts';
import {
  fill,
  tagPage,
  type TagPageContext,
  type TagPageQuery,
  type TagSource,
} from './status-tags.ts';

/** A deterministic pseudo-random sequence (the test must not depend on luck). */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/**
 * A tag in use with figures drawn from small ranges, so many tie with each other and with the idle
 * tags.
 */
function inUseStats(tag: string, next: () => number): SegmentTagStats {
  const step = [0, 10, 20][Math.floor(next() * 3)] as number;
  const remaining = step === 0 ? 0 : Math.floor(next() * 3) * 5;
  return {
    ...idleStats(tag, 10),
    step,
    remaining,
    loads: step === 0 ? 0 : 1,
    loadFailures: Math.floor(next() * 2),
    range: step === 0 ? null : { start: 1n, end: 1n + BigInt(step), position: 1n },
  };
}

/** A segment service's view over a fixed set of tags, counting the per-tag objects it builds. */
class FakeSource implements TagSource {
  readonly index = new SortedTagNames();
  readonly active = new Map<string, SegmentTagStats>();
  readonly idle = new Set<string>();
  built = 0;

  constructor(tags: number, inUse: number, seed: number) {
    const next = random(seed);
    for (let i = 0; i < tags; i++) {
      // Names out of order, of varying length and case, so the sort does real work.
      const stem = ['Pay', 'order', 'user', 'x'][i % 4];
      const tag = `${stem}-${Math.floor(next() * 1e9).toString(36)}-${i}`;
      this.index.add(tag);
      if (i < inUse) this.active.set(tag, inUseStats(tag, next));
      else this.idle.add(tag);
    }
    // Names a case-insensitive search must find in any case, in and out of ASCII, and with
    // characters a regular expression would take as syntax.
    for (const tag of ['Zäh-ÄH', 'zÄh', 'ORDER-Big', 'a.b*c(d)[e]\\f']) {
      this.index.add(tag);
      this.idle.add(tag);
    }
  }

  tagNames(): readonly string[] {
    return this.index.names();
  }

  tagStats(tag: string): SegmentTagStats | undefined {
    this.built++;
    return this.active.get(tag) ?? (this.idle.has(tag) ? idleStats(tag, 10) : undefined);
  }

  activeStats(): { tags: SegmentTagStats[] } {
    return { tags: [...this.active.values()] };
  }

  inUse(tag: string): boolean {
    return this.active.has(tag);
  }

  tagCounts(): { known: number; inUse: number } {
    return { known: this.active.size + this.idle.size, inUse: this.active.size };
  }
}

/** The list as the route built it before: an object per tag, every tag, filtered, then sorted. */
function reference(
  source: FakeSource,
  query: TagPageQuery,
  context: TagPageContext,
): { total: number; matched: number; tags: string[] } {
  const every = [
    ...source.active.values(),
    ...[...source.idle].map((tag) => idleStats(tag, 10)),
  ].sort((a, b) => (a.tag < b.tag ? -1 : 1));
  const visible = every.filter((tag) => context.allows === undefined || context.allows(tag.tag));
  const selected =
    query.tags === 'in-use' ? visible.filter((tag) => source.active.has(tag.tag)) : visible;
  const matched = selected.filter((tag) => tag.tag.toLowerCase().includes(query.q));
  const key = (tag: SegmentTagStats): number => {
    switch (query.sort) {
      case 'fill':
        return fill(tag);
      case 'remaining':
        return tag.remaining;
      case 'rate':
        return context.rate(tag.tag) ?? -1;
      case 'step':
        return tag.step;
      case 'latency':
        return context.latency(tag.tag) ?? -1;
      case 'failures':
        return tag.loadFailures;
      case 'tag':
        return 0;
    }
  };
  const sign = query.desc ? -1 : 1;
  const sorted =
    query.sort === 'tag'
      ? query.desc
        ? [...matched].reverse()
        : matched
      : [...matched].sort((a, b) => sign * (key(a) - key(b)) || (a.tag < b.tag ? -1 : 1));
  return {
    total: visible.length,
    matched: matched.length,
    tags: sorted.slice(query.offset, query.offset + query.limit).map((tag) => tag.tag),
  };
}

const QUERY: TagPageQuery = {
  q: '',
  sort: 'tag',
  desc: false,
  offset: 0,
  after: undefined,
  limit: 50,
  tags: 'all',
};

/** Rates and latencies for some tags in use (a tag with none sorts as -1, like an idle tag). */
function figures(source: FakeSource): Pick<TagPageContext, 'rate' | 'latency'> {
  const rates = new Map<string, number>();
  const latencies = new Map<string, number>();
  let i = 0;
  for (const tag of source.active.keys()) {
    if (i % 3 !== 0) rates.set(tag, i % 4);
    if (i % 2 === 0) latencies.set(tag, (i % 5) / 2);
    i++;
  }
  return { rate: (tag) => rates.get(tag), latency: (tag) => latencies.get(tag) };
}

describe('tagPage', () => {
  it('lists what sorting every tag did, for every sort, search and page', () => {
    const source = new FakeSource(700, 90, 1);
    const limited = (tag: string) => tag.startsWith('order') || tag.endsWith('7');
    for (const allows of [undefined, limited]) {
      const context: TagPageContext = { allows, ...figures(source) };
      for (const tags of SELECTIONS) {
        for (const sort of SORTS) {
          for (const desc of [false, true]) {
            for (const q of ['', 'pay', '-1', 'äh', 'big', '.b*c(d)[e]\\', 'b.c']) {
              for (const [offset, limit] of [
                [0, 50],
                [40, 30],
                [120, 500],
                [690, 50],
                [5000, 10],
              ] as const) {
                const query = { ...QUERY, q, sort, desc, offset, limit, tags };
                const page = tagPage(source, query, context);
                const expected = reference(source, query, context);
                const what = JSON.stringify({ ...query, allows: allows !== undefined });
                assert.deepEqual(
                  page.tags.map((tag) => tag.tag),
                  expected.tags,
                  what,
                );
                assert.equal(page.matched, expected.matched, what);
                assert.equal(page.total, expected.total, what);
              }
            }
          }
        }
      }
    }
  });

  it('builds objects only for the page: 50 of 100,000 tags cost 50', () => {
    const source = new FakeSource(100_000, 100, 2);
    const context: TagPageContext = { allows: undefined, ...figures(source) };
    for (const sort of SORTS) {
      for (const query of [
        { ...QUERY, sort },
        { ...QUERY, sort, desc: true, offset: 50_000 },
      ]) {
        source.built = 0;
        const page = tagPage(source, query, context);
        assert.equal(page.tags.length, 50);
        assert.equal(page.matched, source.tagCounts().known);
        assert.ok(
          source.built <= 50,
          `${sort}: built ${source.built} tag objects for a page of 50`,
        );
      }
    }
    const inUse = tagPage(source, { ...QUERY, tags: 'in-use', limit: 500 }, context);
    assert.equal(inUse.tags.length, 100);
    assert.equal(inUse.inUse, 100);
    assert.equal(inUse.total, source.tagCounts().known);
  });

  it('pages by nextAfter through every tag exactly once, both orders', () => {
    const source = new FakeSource(2_345, 200, 3);
    const context: TagPageContext = { allows: (tag) => !tag.startsWith('x'), ...figures(source) };
    for (const tags of SELECTIONS) {
      for (const desc of [false, true]) {
        for (const q of ['', 'pay']) {
          const expected = reference(source, { ...QUERY, q, desc, tags, limit: 1e9 }, context).tags;
          const seen: string[] = [];
          let after: string | undefined;
          for (let pages = 0; ; pages++) {
            assert.ok(pages <= expected.length / 97 + 1, 'the cursor moves forward');
            const page = tagPage(source, { ...QUERY, q, desc, tags, after, limit: 97 }, context);
            assert.ok(page.tags.length <= 97);
            seen.push(...page.tags.map((tag) => tag.tag));
            if (page.nextAfter === null) break;
            assert.equal(page.nextAfter, page.tags.at(-1)?.tag);
            after = page.nextAfter;
          }
          assert.equal(seen.length, expected.length, `${tags} ${desc ? 'desc' : 'asc'} q=${q}`);
          assert.deepEqual(seen, expected);
        }
      }
    }
    // A cursor that names no tag starts where the name would be.
    const names = source.tagNames();
    const page = tagPage(
      source,
      { ...QUERY, after: `${names[10]}\u0000`, limit: 2 },
      { ...context, allows: undefined },
    );
    assert.deepEqual(
      page.tags.map((tag) => tag.tag),
      names.slice(11, 13),
    );
  });
});

describe('SortedTagNames', () => {
  it('stays sorted through single (spliced) and bulk (merged) changes', () => {
    const names = new SortedTagNames();
    const expected = new Set<string>();
    const next = random(4);
    for (const batch of [5000, 1, 3, 64, 65, 200, 2]) {
      for (let i = 0; i < batch; i++) {
        const tag = `t${Math.floor(next() * 3000)}`;
        // The owner reports a name once as it appears and once as it goes.
        if (expected.has(tag)) {
          expected.delete(tag);
          names.remove(tag);
        } else {
          expected.add(tag);
          names.add(tag);
        }
      }
      assert.deepEqual(names.names(), [...expected].sort());
    }
  });
});
