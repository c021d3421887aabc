import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isIdMintError } from './errors.ts';
import { PeriodicSequence, checkPeriodicTagName, parsePeriodic } from './periodic.ts';

const daily = (template = '{yyyyMMdd}{seq:6}', timeZone = 'UTC') =>
  PeriodicSequence.from({ period: 'day', timeZone, template });
const monthly = (template = '{yyyyMM}{seq:8}', timeZone = 'UTC') =>
  PeriodicSequence.from({ period: 'month', timeZone, template });

const refused = (make: () => unknown, pattern: RegExp, code = 'INVALID_ARGUMENT') =>
  assert.throws(
    make,
    (error) => isIdMintError(error, code as 'INVALID_ARGUMENT') && pattern.test(error.message),
  );

describe('periodic templates', () => {
  it('formats the period and a zero-padded sequence number, fixed width', () => {
    const seq = daily();
    const period = seq.periodAt(Date.UTC(2026, 10, 27, 12));
    assert.equal(seq.format('orders', period, 42n), '20261127000042');
    assert.equal(seq.format('orders', period, 999_999n), '20261127999999');
    assert.equal(seq.width, 14);
    assert.equal(seq.numeric, true);
    const other = daily('ORD-{yy}{MM}{dd}-{seq:4}');
    assert.equal(other.format('o', period, 7n), 'ORD-261127-0007');
    assert.equal(other.numeric, false);
    assert.equal(other.width, 15);
    assert.equal(
      monthly().format('m', monthly().periodAt(Date.UTC(2026, 1, 3)), 5n),
      '20260200000005',
    );
  });

  it('refuses a sequence number past its digits instead of wrapping it', () => {
    const seq = daily('{yyyyMMdd}{seq:2}');
    const period = seq.periodAt(Date.UTC(2026, 10, 27));
    assert.equal(seq.format('t', period, 99n), '2026112799');
    refused(
      () => seq.format('t', period, 100n),
      /all 99 sequence numbers of period 20261127/,
      'PERIOD_SEQUENCE_EXHAUSTED',
    );
  });

  it('refuses unknown tokens, missing fields, finer fields and bad widths, naming them', () => {
    refused(() => daily('{yyyyMMdd}{seq:6}{HH}'), /unknown token \{HH\}/);
    refused(() => daily('{yyyyMMdd}'), /no \{seq:N\}/);
    refused(() => daily('{yyyyMM}{seq:6}'), /must print the day/);
    refused(() => monthly('{yyyyMMdd}{seq:6}'), /must print the month/);
    refused(() => daily('{yyyyMMdd}{seq:0}'), /N from 1 to 18/);
    refused(() => daily('{yyyyMMdd}{seq:19}'), /N from 1 to 18/);
    refused(() => daily('{yyyyMMdd}{seq:6}{seq:2}'), /\{seq\} twice/);
    refused(() => daily('{yyyy}{yy}{MM}{dd}{seq:6}'), /\{yyyy\} twice/);
    refused(() => daily('{yyyyMMdd}/{seq:6}'), /outside tokens/);
    refused(() => daily('{yyyyMMdd}{seq:6'), /unmatched/);
    refused(() => daily('{yyyyMMdd}{seq:11}'), /19-digit IDs.*at most 18/);
    refused(() => daily('{yyyyMMdd}{seq:6}', 'Mars/Olympus'), /IANA time zone/);
    refused(
      () => PeriodicSequence.from({ period: 'week' as 'day', timeZone: 'UTC', template: '' }),
      /period must be one of day, month/,
    );
    // Letters lift the 18-digit limit: the ID is a string, not a number.
    assert.equal(daily('X{yyyyMMdd}{seq:12}').width, 21);
  });

  it('refuses a step that one period cannot hold, and a start past the digits', () => {
    const seq = daily('{yyyyMMdd}{seq:3}');
    seq.checkStep(999);
    refused(() => seq.checkStep(1000), /step 1000 is larger than the 999 sequence numbers/);
    refused(
      () =>
        PeriodicSequence.from({
          period: 'day',
          timeZone: 'UTC',
          template: '{yyyyMMdd}{seq:2}',
          start: 100,
        }),
      /start must be an integer from 0 to 99/,
    );
    const fromZero = PeriodicSequence.from({
      period: 'day',
      timeZone: 'UTC',
      template: '{yyyyMMdd}{seq:2}',
      start: 0,
    });
    fromZero.checkStep(100);
  });

  it('stores canonically and reads back the same option', () => {
    const seq = daily('{yyyyMMdd}{seq:6}', 'asia/shanghai');
    assert.equal(seq.timeZone, 'Asia/Shanghai');
    const back = parsePeriodic(seq.toText());
    assert.deepEqual(back.toOptions(), {
      period: 'day',
      timeZone: 'Asia/Shanghai',
      template: '{yyyyMMdd}{seq:6}',
      start: 1,
    });
    refused(() => parsePeriodic('{'), /not JSON/);
  });

  it('names rows <tag>@<key> and keeps room for the key in 128 characters', () => {
    const seq = daily();
    assert.equal(seq.rowTag('orders', seq.periodAt(Date.UTC(2026, 10, 27))), 'orders@20261127');
    checkPeriodicTagName('x'.repeat(119), 'day');
    refused(() => checkPeriodicTagName('x'.repeat(120), 'day'), /at most 119/);
    checkPeriodicTagName('x'.repeat(121), 'month');
    refused(() => checkPeriodicTagName('a@b', 'day'), /no "@"/);
  });
});

describe('periods in time zones', () => {
  it('reads the day in the configured zone, not UTC', () => {
    const shanghai = daily('{yyyyMMdd}{seq:6}', 'Asia/Shanghai');
    // 2026-11-27 16:00 UTC is 2026-11-28 00:00 in Shanghai (UTC+8, no DST).
    const window = shanghai.windowAt(Date.UTC(2026, 10, 27, 17));
    assert.equal(window.key, '20261128');
    assert.equal(window.start, Date.UTC(2026, 10, 27, 16));
    assert.equal(window.end, Date.UTC(2026, 10, 28, 16));
    assert.equal(shanghai.windowAt(Date.UTC(2026, 10, 27, 16) - 1).key, '20261127');
  });

  it('gives DST days 23 and 25 hours (America/New_York)', () => {
    const ny = daily('{yyyyMMdd}{seq:6}', 'America/New_York');
    // 2026-03-08: 02:00 EST -> 03:00 EDT. Midnight is 05:00 UTC, the next 04:00 UTC.
    const spring = ny.windowAt(Date.UTC(2026, 2, 8, 12));
    assert.deepEqual(
      [spring.key, spring.start, spring.end],
      ['20260308', Date.UTC(2026, 2, 8, 5), Date.UTC(2026, 2, 9, 4)],
    );
    assert.equal(spring.end - spring.start, 23 * 3_600_000);
    // 2026-11-01: 02:00 EDT -> 01:00 EST.
    const autumn = ny.windowAt(Date.UTC(2026, 10, 1, 12));
    assert.equal(autumn.end - autumn.start, 25 * 3_600_000);
  });

  it('starts a day at 01:00 where midnight is skipped (America/Santiago)', () => {
    // 2026-09-06: 00:00 -04 becomes 01:00 -03, so the day starts at 04:00 UTC and has 23 hours.
    const santiago = daily('{yyyyMMdd}{seq:6}', 'America/Santiago');
    const day = santiago.windowAt(Date.UTC(2026, 8, 6, 12));
    assert.deepEqual(
      [day.key, day.start, day.end],
      ['20260906', Date.UTC(2026, 8, 6, 4), Date.UTC(2026, 8, 7, 3)],
    );
  });

  it('ends months on their last day, leap years included', () => {
    const seq = monthly();
    const feb = seq.windowAt(Date.UTC(2028, 1, 15));
    assert.deepEqual(
      [feb.key, feb.start, feb.end],
      ['202802', Date.UTC(2028, 1, 1), Date.UTC(2028, 2, 1)],
    );
    const dec = seq.windowAt(Date.UTC(2026, 11, 31, 23, 59, 59, 999));
    assert.deepEqual([dec.key, dec.end], ['202612', Date.UTC(2027, 0, 1)]);
    assert.equal(seq.windowAt(dec.end).key, '202701');
    const paris = monthly('{yyyyMM}{seq:8}', 'Europe/Paris').windowAt(
      Date.UTC(2026, 2, 31, 21, 59),
    );
    // 2026-03-31 23:59 in Paris (UTC+2 since the 29th): April starts at 22:00 UTC.
    assert.deepEqual([paris.key, paris.end], ['202603', Date.UTC(2026, 2, 31, 22)]);
  });

  it('places every instant of a window in its period, and the end in the next', () => {
    const ny = daily('{yyyyMMdd}{seq:6}', 'America/New_York');
    const day = ny.windowAt(Date.UTC(2026, 10, 1, 12));
    assert.equal(ny.periodAt(day.start).key, day.key);
    assert.equal(ny.periodAt(day.end - 1).key, day.key);
    assert.notEqual(ny.periodAt(day.start - 1).key, day.key);
    assert.notEqual(ny.periodAt(day.end).key, day.key);
  });
});
