// The generators as the package exports them: core's, with a default clock. Core reads time only
// through the Clock port it is given (core/core-imports.test.ts keeps it from importing a
// clock), so the default is supplied here, outside core: a MonotonicClock per generator, which
// never goes back while the process runs (docs/layouts.md#clocks). Pass `clock` for another one
// (a ManualClock in tests). Everything else, validation included, is core's.
import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import { IdMintError } from '../core/errors.ts';
import { ObjectIdGenerator as CoreObjectIdGenerator } from '../core/objectid.ts';
import type { ObjectIdOptions as CoreObjectIdOptions } from '../core/objectid.ts';
import { SnowflakeGenerator as CoreSnowflakeGenerator } from '../core/snowflake.ts';
import type { SnowflakeOptions as CoreSnowflakeOptions } from '../core/snowflake.ts';
import {
  UlidGenerator as CoreUlidGenerator,
  type UlidOptions as CoreUlidOptions,
} from '../core/ulid.ts';
import {
  UuidV7Generator as CoreUuidV7Generator,
  type UuidV7Options as CoreUuidV7Options,
} from '../core/uuid.ts';
import type { Clock } from '../ports/clock.ts';

/** Core's options with the clock made optional: the default is a new MonotonicClock. */
type WithDefaultClock<T extends { readonly clock: Clock }> = Omit<T, 'clock'> & {
  /** Clock to read time from. Default: a new `MonotonicClock` (never goes back in this process). */
  readonly clock?: Clock;
};

/** Options for {@link SnowflakeGenerator}: `workerId` is required, the clock is not. */
export type SnowflakeOptions = WithDefaultClock<CoreSnowflakeOptions>;
/** Options for {@link UuidV7Generator}; all optional. */
export type UuidV7Options = WithDefaultClock<CoreUuidV7Options>;
/** Options for {@link UlidGenerator}; all optional. */
export type UlidOptions = WithDefaultClock<CoreUlidOptions>;
/** Options for {@link ObjectIdGenerator}; all optional. */
export type ObjectIdOptions = WithDefaultClock<CoreObjectIdOptions>;

function withClock<T extends object>(
  options: T | undefined,
  generator: string,
): T & { readonly clock: Clock } {
  if (options === undefined)
    return { clock: new MonotonicClock() } as T & { readonly clock: Clock };
  if (options === null || typeof options !== 'object') {
    const got = options === null ? 'null' : `a ${typeof options}`;
    throw new IdMintError('INVALID_ARGUMENT', `${generator} options must be an object, got ${got}`);
  }
  const given = (options as { readonly clock?: Clock }).clock;
  return { ...options, clock: given ?? new MonotonicClock() };
}

/**
 * Snowflake IDs for one worker ID: `new SnowflakeGenerator({ workerId: 7 })`. The worker ID is
 * required (two running generators with one worker ID issue the same IDs); to have one leased
 * for you, use `SnowflakeWorker.start({ registry })` instead (docs/workers.md).
 */
export class SnowflakeGenerator extends CoreSnowflakeGenerator {
  constructor(options: SnowflakeOptions) {
    super(withClock(options, 'SnowflakeGenerator'));
  }
}

/** UUIDv7s, strictly increasing per generator: `new UuidV7Generator().nextString()`. */
export class UuidV7Generator extends CoreUuidV7Generator {
  constructor(options?: UuidV7Options) {
    super(withClock(options, 'UuidV7Generator'));
  }
}

/** Monotonic ULIDs: `new UlidGenerator().nextString()`. */
export class UlidGenerator extends CoreUlidGenerator {
  constructor(options?: UlidOptions) {
    super(withClock(options, 'UlidGenerator'));
  }
}

/** MongoDB ObjectIds: `new ObjectIdGenerator().nextString()`. */
export class ObjectIdGenerator extends CoreObjectIdGenerator {
  constructor(options?: ObjectIdOptions) {
    super(withClock(options, 'ObjectIdGenerator'));
  }
}
