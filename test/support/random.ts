/**
 * A small seeded PRNG (mulberry32) so property-style tests are reproducible: a failure prints its
 * seed, and IDMINT_TEST_SEED=<seed> replays it.
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed for this run: IDMINT_TEST_SEED if set, otherwise fresh. */
export function testSeed(): number {
  const fromEnv = process.env['IDMINT_TEST_SEED'];
  return fromEnv === undefined ? Math.floor(Math.random() * 2 ** 32) : Number(fromEnv);
}

/** A uniformly random integer in [0, max] for max up to 2^53 - 1. */
export function randomInt(random: () => number, max: number): number {
  return Math.floor(random() * (max + 1));
}

/** A uniformly random bigint in [0, max]. */
export function randomBigInt(random: () => number, max: bigint): bigint {
  const hi = BigInt(Math.floor(random() * 2 ** 32));
  const lo = BigInt(Math.floor(random() * 2 ** 32));
  return ((hi << 32n) | lo) % (max + 1n);
}
