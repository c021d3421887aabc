import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FF1 as NobleFF1 } from '@noble/ciphers/ff1.js';
import { randomInt, seededRandom, testSeed } from '../../test/support/random.ts';
import { isIdMintError, type ErrorCode } from './errors.ts';
import { createFf1 } from './ff1.ts';

function throwsCode(fn: () => unknown, code: ErrorCode, pattern?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(isIdMintError(error, code), `expected ${code}, got ${String(error)}`);
    if (pattern) assert.match(error.message, pattern);
    return true;
  });
}

const hex = (text: string) => Uint8Array.from(Buffer.from(text, 'hex'));

// NIST SP 800-38G FF1 samples (csrc.nist.gov, "FF1samples.pdf"): samples 1-3 AES-128, 4-6 AES-192,
// 7-9 AES-256; radix 10 and 36. Values cross-checked in two independent public test suites (a
// Python FF1 package's NIST vectors and @noble/ciphers' test vectors) before being copied here.
const K128 = '2B7E151628AED2A6ABF7158809CF4F3C';
const K192 = `${K128}EF4359D8D580AA4F`;
const K256 = `${K192}7F036D6F04FC6A94`;
const T_EMPTY = '';
const T_10 = '39383736353433323130';
const T_11 = '3737373770717273373737';
const NIST_SAMPLES = [
  {
    sample: 1,
    key: K128,
    radix: 10,
    tweak: T_EMPTY,
    plaintext: '0123456789',
    ciphertext: '2433477484',
  },
  {
    sample: 2,
    key: K128,
    radix: 10,
    tweak: T_10,
    plaintext: '0123456789',
    ciphertext: '6124200773',
  },
  {
    sample: 3,
    key: K128,
    radix: 36,
    tweak: T_11,
    plaintext: '0123456789abcdefghi',
    ciphertext: 'a9tv40mll9kdu509eum',
  },
  {
    sample: 4,
    key: K192,
    radix: 10,
    tweak: T_EMPTY,
    plaintext: '0123456789',
    ciphertext: '2830668132',
  },
  {
    sample: 5,
    key: K192,
    radix: 10,
    tweak: T_10,
    plaintext: '0123456789',
    ciphertext: '2496655549',
  },
  {
    sample: 6,
    key: K192,
    radix: 36,
    tweak: T_11,
    plaintext: '0123456789abcdefghi',
    ciphertext: 'xbj3kv35jrawxv32ysr',
  },
  {
    sample: 7,
    key: K256,
    radix: 10,
    tweak: T_EMPTY,
    plaintext: '0123456789',
    ciphertext: '6657667009',
  },
  {
    sample: 8,
    key: K256,
    radix: 10,
    tweak: T_10,
    plaintext: '0123456789',
    ciphertext: '1001623463',
  },
  {
    sample: 9,
    key: K256,
    radix: 36,
    tweak: T_11,
    plaintext: '0123456789abcdefghi',
    ciphertext: 'xs8a0azh2avyalyzuwd',
  },
];

describe('FF1: NIST SP 800-38G samples', () => {
  for (const s of NIST_SAMPLES) {
    const name = `sample ${s.sample}: AES-${s.key.length * 4}, radix ${s.radix}`;
    it(`${name}, ${s.tweak.length / 2}-byte tweak`, () => {
      const ff1 = createFf1({ key: hex(s.key), radix: s.radix });
      const tweak = hex(s.tweak);
      assert.equal(ff1.encryptString(s.plaintext, tweak), s.ciphertext);
      assert.equal(ff1.decryptString(s.ciphertext, tweak), s.plaintext);
      // The numeral-array API, and a prepared domain, give the same.
      const numerals = [...s.plaintext].map((c) => Number.parseInt(c, 36));
      const expected = [...s.ciphertext].map((c) => Number.parseInt(c, 36));
      assert.deepEqual(ff1.encrypt(numerals, tweak), expected);
      assert.deepEqual(ff1.prepare(s.plaintext.length, tweak).decrypt(expected), numerals);
    });
  }

  it('the samples cover both paths: radix 10 on doubles, radix 36 on bigints', () => {
    assert.equal(createFf1({ key: hex(K128), radix: 10 }).prepare(10).pairs, true);
    assert.equal(createFf1({ key: hex(K128), radix: 36 }).prepare(19).pairs, false);
  });
});

describe('FF1: agrees with @noble/ciphers on random inputs', () => {
  it('400 random keys, radices, lengths (up to 200 numerals) and tweaks', () => {
    const seed = testSeed();
    const random = seededRandom(seed);
    const radices = [2, 3, 8, 10, 16, 26, 36, 62, 256, 1000, 65_535];
    for (let trial = 0; trial < 400; trial++) {
      const key = Uint8Array.from({ length: [16, 24, 32][trial % 3] ?? 16 }, () =>
        randomInt(random, 255),
      );
      const radix = radices[randomInt(random, radices.length - 1)] ?? 10;
      let minimum = 2;
      while (radix ** minimum < 1_000_000) minimum++;
      const length = minimum + randomInt(random, trial % 4 === 0 ? 200 - minimum : 24);
      const tweak = Uint8Array.from({ length: randomInt(random, 40) }, () =>
        randomInt(random, 255),
      );
      const x = Array.from({ length }, () => randomInt(random, radix - 1));
      const ours = createFf1({ key, radix }).encrypt(x, tweak);
      const theirs = NobleFF1(radix, key, tweak).encrypt(x);
      assert.deepEqual(
        ours,
        theirs,
        `seed ${seed}, trial ${trial}: radix ${radix}, length ${length}, tweak ` +
          `${tweak.length} bytes`,
      );
      assert.deepEqual(
        createFf1({ key, radix }).decrypt(ours, tweak),
        x,
        `seed ${seed}, trial ${trial}: decrypt`,
      );
    }
  });

  it('a string tweak is its UTF-8 bytes', () => {
    const ff1 = createFf1({ key: hex(K128) });
    const x = [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2];
    assert.deepEqual(ff1.encrypt(x, 'tag-é'), ff1.encrypt(x, new TextEncoder().encode('tag-é')));
    assert.deepEqual(
      ff1.encrypt(x, 'tag-é'),
      NobleFF1(10, hex(K128), new TextEncoder().encode('tag-é')).encrypt(x),
    );
    assert.notDeepEqual(ff1.encrypt(x, 'orders'), ff1.encrypt(x, 'orderz'));
  });
});

describe('FF1: permutation and the batched path', () => {
  it('radix 10, 6 digits: the whole domain of 1,000,000 maps one to one, and decrypts back', () => {
    const domain = createFf1({ key: hex(K256) }).prepare(6, 'all');
    const a = new Float64Array(1_000_000);
    const b = new Float64Array(1_000_000);
    for (let x = 0; x < 1_000_000; x++) {
      a[x] = Math.floor(x / 1000);
      b[x] = x % 1000;
    }
    domain.encryptPairs(a, b);
    const seen = new Uint8Array(1_000_000);
    for (let x = 0; x < 1_000_000; x++) {
      const y = (a[x] as number) * 1000 + (b[x] as number);
      if (seen[y] === 1) assert.fail(`${x} maps to ${y}, already taken`);
      seen[y] = 1;
    }
    domain.decryptPairs(a, b);
    for (let x = 0; x < 1_000_000; x++)
      if ((a[x] as number) * 1000 + (b[x] as number) !== x)
        assert.fail(`${x} did not decrypt back`);
  });

  it('encryptPairs over a batch equals encryptValue one by one (18 and 24 digits)', () => {
    const ff1 = createFf1({ key: hex(K192) });
    for (const length of [18, 24]) {
      const domain = ff1.prepare(length, 'orders');
      const mv = Number(domain.modulusV);
      const values = Array.from({ length: 500 }, (_, i) => BigInt(i) * 7_919_000_003n + 12_345n);
      const a = Float64Array.from(values, (v) => Number(v / domain.modulusV));
      const b = Float64Array.from(values, (v) => Number(v % domain.modulusV));
      domain.encryptPairs(a, b);
      values.forEach((v, k) => {
        const one = domain.encryptValue(v);
        assert.equal(
          BigInt(a[k] as number) * BigInt(mv) + BigInt(b[k] as number),
          one,
          `value ${v}`,
        );
        assert.equal(domain.decryptValue(one), v);
      });
    }
  });
});

describe('FF1: validation', () => {
  it('refuses bad keys without echoing them, and bad radices', () => {
    const key = hex('00112233445566778899aabbccddeeff00');
    assert.throws(
      () => createFf1({ key }),
      (error: unknown) =>
        isIdMintError(error, 'INVALID_ARGUMENT') &&
        /16, 24 or 32 bytes.*got 17 bytes/.test(error.message) &&
        !/0011|112233/.test(error.message),
    );
    throwsCode(() => createFf1({ key: 'secret' as never }), 'INVALID_ARGUMENT', /got string/);
    for (const radix of [1, 65_537, 2.5])
      throwsCode(
        () => createFf1({ key: hex(K128), radix }),
        'INVALID_ARGUMENT',
        /radix must be an integer from 2 to 65536/,
      );
  });

  it('refuses domains below a million, numerals outside the radix, long tweaks', () => {
    const ff1 = createFf1({ key: hex(K128) });
    throwsCode(
      () => ff1.encrypt([1, 2, 3, 4, 5]),
      'INVALID_ARGUMENT',
      /from 6 to 4096 numerals for radix 10/,
    );
    assert.equal(ff1.encrypt([1, 2, 3, 4, 5, 6]).length, 6);
    throwsCode(
      () => ff1.encrypt([1, 2, 3, 4, 5, 10]),
      'INVALID_ARGUMENT',
      /numeral 5 must be an integer from 0 to 9/,
    );
    throwsCode(() => ff1.encrypt([1, 2, 3, 4, 5, -1]), 'INVALID_ARGUMENT', /numeral 5/);
    throwsCode(
      () => ff1.encrypt([0, 0, 0, 0, 0, 0], new Uint8Array(1025)),
      'INVALID_ARGUMENT',
      /at most 1024 bytes/,
    );
    throwsCode(
      () => ff1.encryptString('12345a'),
      'INVALID_ARGUMENT',
      /"a" at position 6 is not a numeral of radix 10/,
    );
    throwsCode(
      () => createFf1({ key: hex(K128), radix: 62 }).encryptString('abcdef'),
      'INVALID_ARGUMENT',
      /radix 36 or less/,
    );
    throwsCode(
      () =>
        createFf1({ key: hex(K128), radix: 36 })
          .prepare(19)
          .encryptPairs(new Float64Array(1), new Float64Array(1)),
      'INVALID_ARGUMENT',
      /below 2\^45/,
    );
    throwsCode(
      () => ff1.prepare(18).encryptPairs(new Float64Array([1e9]), new Float64Array([0])),
      'INVALID_ARGUMENT',
      /outside/,
    );
    throwsCode(() => ff1.prepare(18).encryptValue(10n ** 18n), 'INVALID_ARGUMENT', /radix\^18 - 1/);
  });
});
