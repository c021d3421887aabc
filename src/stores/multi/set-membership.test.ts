// The membership rules on their own: which lists `idmint db init` accepts against the sets their
// databases record, and what start-up finds wrong. The real databases are in
// test/segment-set-members.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isIdMintError } from '../../core/errors.ts';
import {
  checkJoin,
  membershipProblems,
  type ListedMember,
  type MemberRecords,
} from './set-membership.ts';

const set = (...ids: string[]) => ids.map((id) => ({ id, name: `db-${id}` }));
const abc = set('a', 'b', 'c');
const abcd = set('a', 'b', 'c', 'd');

/**
 * Database `id` of the list, recording `recorded` (and holding tag rows when it does, unless told).
 */
function listed(
  id: string,
  recorded?: ReturnType<typeof set>,
  hasRows = recorded !== undefined,
): ListedMember {
  return { id, name: `db-${id}`, set: recorded, hasRows };
}

function refuses(list: ListedMember[], replace: number | undefined, pattern: RegExp): void {
  assert.throws(
    () => checkJoin(list, replace),
    (error) => isIdMintError(error, 'INVALID_ARGUMENT') && pattern.test(error.message),
  );
}

describe('checkJoin', () => {
  it('accepts a new set, the same set, and a set that grows at its end', () => {
    checkJoin([listed('a'), listed('b')], undefined);
    checkJoin([listed('a', abc), listed('b', abc), listed('c', abc)], undefined);
    checkJoin([listed('a', abc), listed('b', abc), listed('c', abc), listed('d')], undefined);
    // A run cut short: some record the new set already, some the old one.
    checkJoin(
      [listed('a', abcd), listed('b', abc), listed('c', abc), listed('d', abcd, false)],
      undefined,
    );
  });

  it('refuses a list that leaves out a recorded member, naming it', () => {
    const leftOut =
      /database 2 of the set recorded in database 0 \(db-a\), db-c, is not in the list/;
    refuses([listed('a', abc), listed('b', abc)], undefined, leftOut);
    // Only the new record lists d (a run adding d cut short after writing it to a).
    refuses(
      [listed('a', abcd), listed('b', abc), listed('c', abc)],
      undefined,
      /db-d, is not in the list/,
    );
  });

  it('names the replacing command only for an empty database at the index', () => {
    const command = /run "idmint db init --stores db-a,db-b,db-x --replace 2"/;
    refuses([listed('a', abc), listed('b', abc), listed('x')], undefined, command);
    refuses(
      [listed('a', abc), listed('b', abc), listed('x', undefined, true)],
      undefined,
      /\(new ones after\) \(docs/,
    );
  });

  it('replaces exactly one lost member, by an empty database at its index; again once done', () => {
    checkJoin([listed('a', abc), listed('b', abc), listed('x')], 2);
    const swapOnly = /--replace 1: the list must be the recorded set/;
    refuses([listed('a', abc), listed('b', abc), listed('x')], 1, swapOnly);
    refuses([listed('a', abc), listed('x'), listed('b', abc)], 1, swapOnly);
    const used = listed('x', undefined, true);
    refuses(
      [listed('a', abc), listed('b', abc), used],
      2,
      /must be an empty database .* it holds tag rows/,
    );
    refuses(
      [listed('a', abc), listed('y'), listed('x')],
      2,
      /2 recorded .* one is replaced at a time/,
    );
    refuses([listed('a', abc), listed('b', abc), listed('x')], 5, /there is no database 5/);
    // Recorded already: running the same command again is a plain join.
    const abx = set('a', 'b', 'x');
    checkJoin([listed('a', abx), listed('b', abx), listed('x', abx)], 2);
  });

  it('refuses one database listed twice (one identity under two URLs)', () => {
    refuses(
      [listed('a'), listed('a')],
      undefined,
      /database 0 \(db-a\) and database 1 \(db-a\) are one database/,
    );
  });
});

describe('membershipProblems', () => {
  const names = ['db-a', 'db-b', 'db-c'];
  const none: MemberRecords = { id: null, set: undefined };
  const records = (...ids: string[]): MemberRecords[] => ids.map((id) => ({ id, set: abc }));
  const first = (found: readonly (MemberRecords | undefined)[], list = names) =>
    membershipProblems(list, found, true)[0] ?? '';

  it('finds nothing wrong with the recorded set, or with databases that do not answer', () => {
    assert.deepEqual(membershipProblems(names, records('a', 'b', 'c'), true), []);
    assert.deepEqual(membershipProblems(names, [undefined, ...records('b', 'c')], true), []);
  });

  it('accepts an unrecorded set only while it holds no tags (or has one database)', () => {
    assert.deepEqual(membershipProblems(names, [none, none, undefined], false), []);
    assert.deepEqual(membershipProblems(['db-a'], [none], true), []);
    const unrecorded =
      /no database records the set's members .*run "idmint db init --stores db-a,db-b,db-c" once/;
    assert.match(first([none, none, undefined]), unrecorded);
  });

  it('names a replacement, a list in another order, and another size', () => {
    const replacing =
      /database 2 \(db-c\) is not in the set .* record, whose database 2 is db-c: .* --replace 2"/;
    assert.match(first([...records('a', 'b'), none]), replacing);
    const swapped = membershipProblems(names, records('b', 'a', 'c'), true).join('; ');
    assert.match(swapped, /database 0 \(db-a\) is database 1 of the set/);
    assert.match(
      first(records('a', 'b'), ['db-a', 'db-b']),
      /the list has 2 databases, the set .* record 3/,
    );
  });

  it('names a cut-short re-forming, and a replaced database still recording it', () => {
    const cutShort =
      /database 0 \(db-a\) records another set \(db-a, db-b, db-c, db-d\), unlike the others/;
    assert.match(first([{ id: 'a', set: abcd }, ...records('b', 'c')]), cutShort);
    // A member the set names that records none: its record was still to be written.
    const unwritten = [
      { id: 'a', set: abc },
      { id: 'b', set: undefined },
      { id: 'c', set: abc },
    ];
    assert.match(first(unwritten), /database 1 \(db-b\) records no set/);
    const abx = set('a', 'b', 'x');
    const replaced =
      /database 2 \(db-c\) is not in the set .* record \(db-a, db-b, db-x\) and records another/;
    assert.match(
      first([
        { id: 'a', set: abx },
        { id: 'b', set: abx },
        { id: 'c', set: abc },
      ]),
      replaced,
    );
  });
});
