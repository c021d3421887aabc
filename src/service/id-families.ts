import type { Clock } from '../ports/clock.ts';
import { ObjectIdGenerator } from '../core/objectid.ts';
import { UlidGenerator } from '../core/ulid.ts';
import { UuidV4Generator, UuidV7Generator } from '../core/uuid.ts';

/** The self-contained ID families the server and the CLI issue (docs/formats.md). */
export const ID_FAMILIES = ['uuid7', 'uuid4', 'ulid', 'objectid'] as const;
export type IdFamily = (typeof ID_FAMILIES)[number];

/**
 * One generator per family for a server's (or a CLI command's) life, all on one clock: a
 * generator keeps its order (UUIDv7, ULID) and its uniqueness (ObjectId's counter per second)
 * only across the IDs it makes itself, so it is made once and kept, never per request.
 */
export class IdFamilies {
  readonly #generators: Readonly<Record<IdFamily, { nextBatch(count: number): string[] }>>;

  /** `clock`: a MonotonicClock in production (it never goes back while the process runs), a ManualClock in tests. */
  constructor(options: { readonly clock: Clock }) {
    const { clock } = options;
    this.#generators = {
      uuid7: new UuidV7Generator({ clock }),
      uuid4: new UuidV4Generator(),
      ulid: new UlidGenerator({ clock }),
      objectid: new ObjectIdGenerator({ clock }),
    };
  }

  /**
   * `count` IDs of `family` (1 to 10,000,000), as canonical strings; strictly increasing for
   * uuid7 and ulid, increasing for objectid but where its counter wraps (docs/formats.md).
   */
  next(family: IdFamily, count: number): string[] {
    return this.#generators[family].nextBatch(count);
  }
}
