// One-liners, named as the ecosystem names them (`uuid`'s v7() and v4(), `ulid`'s ulid(),
// bson's ObjectId): each returns the next ID as a string from a default generator of its family.
//
// A time-ordered family keeps its order (UUIDv7, ULID) and its uniqueness (ObjectId's counter
// within a second) only across the IDs one generator makes, so each one-liner must use one
// generator for the life of the process, not a new one per call. That generator is the one piece
// of module state in idmint, kept on purpose and in the open: DESIGN.md forbids hidden mutable
// state so that everything can be made twice in one process, and the classes remain for that
// (`new UuidV7Generator({ clock, rollback, random })`). The `uuid` package keeps its v7 state per
// module the same way. Each default generator is made on first use, with a MonotonicClock and
// the family's default rollback policy (`borrow`, docs/formats.md), and is never replaced.
import { UuidV4Generator } from '../core/uuid.ts';
import { ObjectIdGenerator, UlidGenerator, UuidV7Generator } from './generators.ts';

/** The generators behind the one-liners, each made on its first use and kept (see above). */
class DefaultGenerators {
  #uuid7: UuidV7Generator | undefined;
  #uuid4: UuidV4Generator | undefined;
  #ulid: UlidGenerator | undefined;
  #objectId: ObjectIdGenerator | undefined;

  get uuid7(): UuidV7Generator {
    return (this.#uuid7 ??= new UuidV7Generator());
  }

  get uuid4(): UuidV4Generator {
    return (this.#uuid4 ??= new UuidV4Generator());
  }

  get ulid(): UlidGenerator {
    return (this.#ulid ??= new UlidGenerator());
  }

  get objectId(): ObjectIdGenerator {
    return (this.#objectId ??= new ObjectIdGenerator());
  }
}

const defaults = new DefaultGenerators();

/**
 * The next UUIDv7 (RFC 9562), `xxxxxxxx-xxxx-7xxx-Vxxx-xxxxxxxxxxxx`: strictly increasing across
 * every call in this process. As bytes: `new UuidV7Generator().next()`.
 */
export function uuidv7(): string {
  return defaults.uuid7.nextString();
}

/**
 * A random UUIDv4 (RFC 9562), `xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx`. As bytes: `new
 * UuidV4Generator().next()`.
 */
export function uuidv4(): string {
  return defaults.uuid4.nextString();
}

/**
 * The next ULID, 26 characters of Crockford base32: strictly increasing across every call in
 * this process (the ULID spec's monotonic rule). As bytes: `new UlidGenerator().next()`.
 */
export function ulid(): string {
  return defaults.ulid.nextString();
}

/**
 * The next MongoDB ObjectId, 24 lowercase hex digits: never repeated in this process, increasing
 * but where its 24-bit counter wraps (docs/formats.md). As bytes: `new ObjectIdGenerator().next()`.
 */
export function objectId(): string {
  return defaults.objectId.nextString();
}
