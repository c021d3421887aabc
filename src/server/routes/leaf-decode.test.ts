import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { getLayout } from '../../core/layout.ts';
import { leafDecodeBody, parseJavaLong, readsForm } from './leaf-decode.ts';

describe("Leaf's /decodeSnowflakeId, piece by piece", () => {
  it("parses as Java's Long.parseLong: sign, leading zeros, any script's digits, 64 bits", () => {
    const cases: [string, bigint | undefined][] = [
      ['0', 0n],
      ['-0', 0n],
      ['+7', 7n],
      ['00012', 12n],
      ['-9223372036854775808', -(2n ** 63n)],
      ['9223372036854775807', 2n ** 63n - 1n],
      ['9223372036854775808', undefined],
      ['-9223372036854775809', undefined],
      ['٩٨', 98n], // Arabic-Indic
      ['१०', 10n], // Devanagari
      ['１２', 12n], // fullwidth
      ['', undefined],
      ['+', undefined],
      ['-', undefined],
      ['+-1', undefined],
      [' 1', undefined],
      ['1_000', undefined],
      ['0x10', undefined],
      ['1e3', undefined],
      ['\u{1D7CF}', undefined], // MATHEMATICAL BOLD DIGIT ONE: a surrogate pair, not a digit
      ['9'.repeat(1_000_000), undefined],
    ];
    for (const [text, value] of cases) assert.equal(parseJavaLong(text), value, text.slice(0, 30));
  });

  it('relies on each run of decimal digits in the BMP being one 0-9, apart from others', () => {
    const digit = /^\p{Nd}$/u;
    let run = 0;
    for (let unit = 0; unit <= 0x10000; unit++) {
      if (unit < 0x10000 && digit.test(String.fromCharCode(unit))) run++;
      else {
        assert.ok(run === 0 || run === 10, `a run of ${run} digits ends at U+${unit.toString(16)}`);
        if (run === 10) {
          // The run's zero parses as 0 and its nine as 9.
          assert.equal(parseJavaLong(String.fromCharCode(unit - 10)), 0n);
          assert.equal(parseJavaLong(String.fromCharCode(unit - 1)), 9n);
        }
        run = 0;
      }
    }
  });

  it("decodes with Leaf's arithmetic, in HashMap's key order, a datacenter between", () => {
    assert.equal(
      leafDecodeBody(-1n, getLayout('leaf')),
      '{"workerId":"1023","sequenceId":"4095",' +
        '"timestamp":"1288834974656(2010-11-04 01:42:54.656)"}',
    );
    const twitter = leafDecodeBody(
      (5n << 22n) | (3n << 17n) | (9n << 12n) | 7n,
      getLayout('twitter'),
    );
    assert.equal(
      twitter,
      '{"workerId":"9","datacenterId":"3","sequenceId":"7",' +
        '"timestamp":"1288834974662(2010-11-04 01:42:54.662)"}',
    );
  });

  it('reads a form body where Tomcat and Spring Boot do', () => {
    const form = 'application/x-www-form-urlencoded';
    assert.equal(readsForm('POST', form), true);
    assert.equal(readsForm('POST', `${form}; charset=UTF-8`), true);
    assert.equal(readsForm('POST', 'Application/X-WWW-Form-Urlencoded'), false);
    assert.equal(readsForm('PUT', 'Application/X-WWW-Form-Urlencoded'), true);
    assert.equal(readsForm('PATCH', form), true);
    assert.equal(readsForm('DELETE', form), false);
    assert.equal(readsForm('GET', form), false);
    assert.equal(readsForm('POST', 'multipart/form-data; boundary=x'), false);
    assert.equal(readsForm('POST', undefined), false);
  });
});
