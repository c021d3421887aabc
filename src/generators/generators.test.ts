import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ManualClock,
  ObjectIdGenerator,
  SnowflakeGenerator,
  UlidGenerator,
  UuidV7Generator,
  decodeObjectId,
  decodeUlid,
  decodeUuid,
  decomposeId,
  isIdMintError,
  isObjectId,
  isUlid,
  isUuid,
  objectId,
  ulid,
  uuidv4,
  uuidv7,
} from '../index.ts';

// The package's public generators (src/index.ts), as a user of the `uuid` or `ulid` packages
// would call them: no clock to make, strings back.

const T0 = Date.UTC(2026, 5, 1, 12);

describe('generators with a default clock', () => {
  it('UuidV7Generator, UlidGenerator and ObjectIdGenerator need no options', () => {
    const before = Date.now();
    const uuid = new UuidV7Generator().nextString();
    const id = new UlidGenerator().nextString();
    const oid = new ObjectIdGenerator().nextString();
    const after = Date.now();
    const uuidMs = decodeUuid(uuid).timestamp ?? -1;
    assert.ok(uuidMs >= before && uuidMs <= after, `UUIDv7 time ${uuidMs} within the call`);
    assert.ok(decodeUlid(id).timestamp >= before && decodeUlid(id).timestamp <= after);
    assert.ok(decodeObjectId(oid).timestamp >= Math.floor(before / 1000) * 1000);
    // The byte forms are still there.
    assert.equal(new UuidV7Generator().next().length, 16);
    assert.equal(new UlidGenerator().next().length, 16);
    assert.equal(new ObjectIdGenerator().next().length, 12);
  });

  it('a clock given is the one used, as before', () => {
    const clock = new ManualClock(T0);
    assert.equal(decodeUuid(new UuidV7Generator({ clock }).nextString()).timestamp, T0);
    assert.equal(decodeUlid(new UlidGenerator({ clock }).nextString()).timestamp, T0);
    assert.equal(decomposeId(new SnowflakeGenerator({ clock, workerId: 3 }).next()).timestamp, T0);
  });

  it('SnowflakeGenerator takes no clock but requires a worker ID', () => {
    const generator = new SnowflakeGenerator({ workerId: 7 });
    assert.equal(decomposeId(generator.next()).workerId, 7);
    assert.equal(decomposeId(generator.nextString(), 'idmint').workerId, 7);
    // @ts-expect-error: workerId is required; this line stops compiling if it becomes optional.
    const missing = () => new SnowflakeGenerator({});
    const invalid = (pattern: RegExp) => (error: unknown) =>
      isIdMintError(error, 'INVALID_ARGUMENT') && pattern.test(error.message);
    assert.throws(missing, invalid(/needs a workerId/));
    assert.throws(
      () => new UuidV7Generator(null as never),
      invalid(/options must be an object, got null/),
    );
  });
});

describe('one-liners: uuidv7(), uuidv4(), ulid(), objectId()', () => {
  const N = 200_000;

  it('uuidv7() returns strings, strictly increasing across calls', () => {
    let last = '';
    for (let i = 0; i < N; i++) {
      const id = uuidv7();
      if (!(id > last)) assert.fail(`uuidv7() #${i} ${id} is not above ${last}`);
      last = id;
    }
    assert.ok(isUuid(last) && decodeUuid(last).version === 7);
  });

  it("ulid() returns strings, strictly increasing across calls (the spec's monotonic rule)", () => {
    let last = '';
    for (let i = 0; i < N; i++) {
      const id = ulid();
      if (!(id > last)) assert.fail(`ulid() #${i} ${id} is not above ${last}`);
      last = id;
    }
    assert.ok(isUlid(last));
  });

  it('objectId() never repeats and increases but where its 24-bit counter wraps', () => {
    const seen = new Set<string>();
    let last = '';
    let wraps = 0;
    for (let i = 0; i < N; i++) {
      const id = objectId();
      seen.add(id);
      if (!(id > last) && last !== '') wraps++;
      last = id;
    }
    assert.equal(seen.size, N);
    // The counter starts at random: 200,000 IDs cross 0xffffff -> 0 at most once.
    assert.ok(wraps <= 1, `${wraps} decreases`);
    assert.ok(isObjectId(last));
  });

  it('uuidv4() returns random version-4 strings', () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => uuidv4()));
    assert.equal(ids.size, 10_000);
    for (const id of [...ids].slice(0, 100)) assert.equal(decodeUuid(id).version, 4);
  });

  it("interleaved calls keep each family's order", () => {
    let u = '';
    let l = '';
    for (let i = 0; i < 10_000; i++) {
      const [nu, nl] = [uuidv7(), ulid()];
      objectId();
      uuidv4();
      assert.ok(nu > u && nl > l);
      [u, l] = [nu, nl];
    }
  });
});
