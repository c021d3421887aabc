import type { Clock } from '../ports/clock.ts';
import { ID_FAMILIES, type IdFamily } from '../contract/families.ts';
import { IdMintError } from '../core/errors.ts';
import { ObjectIdGenerator } from '../core/objectid.ts';
import { UlidGenerator } from '../core/ulid.ts';
import { UuidV4Generator, UuidV7Generator } from '../core/uuid.ts';

// The list of families is the contract's (src/contract/families.ts); the CLI and the metrics take
// it from here, beside the generators.
export { ID_FAMILIES, type IdFamily };

/** What the service asks of a family's generator. */
interface FamilyGenerator {
  nextBatch(count: number): string[];
}

/**
 * How to make each family's generator: a record over the registry's families, so a family added
 * to the registry without a generator here fails the type check.
 */
const GENERATORS: { readonly [F in IdFamily]: (clock: Clock) => FamilyGenerator } = {
  uuid7: (clock) => new UuidV7Generator({ clock }),
  uuid4: () => new UuidV4Generator(),
  ulid: (clock) => new UlidGenerator({ clock }),
  objectid: (clock) => new ObjectIdGenerator({ clock }),
};

/**
 * One generator per family for a server's (or a CLI command's) life, all on one clock: a
 * generator keeps its order (UUIDv7, ULID) and its uniqueness (ObjectId's counter per second)
 * only across the IDs it makes itself, so it is made once and kept, never per request.
 */
export class IdFamilies {
  readonly #generators: ReadonlyMap<IdFamily, FamilyGenerator>;

  /**
   * `clock`: a MonotonicClock in production (it never goes back while the process runs), a
   * ManualClock in tests.
   */
  constructor(options: { readonly clock: Clock }) {
    const { clock } = options;
    this.#generators = new Map(ID_FAMILIES.map((family) => [family, GENERATORS[family](clock)]));
  }

  /**
   * `count` IDs of `family` (1 to 10,000,000), as canonical strings; strictly increasing for
   * uuid7 and ulid, increasing for objectid but where its counter wraps (docs/formats.md).
   */
  next(family: IdFamily, count: number): string[] {
    const generator = this.#generators.get(family);
    // Only a caller outside TypeScript can name a family the registry lacks.
    if (generator === undefined) {
      throw new IdMintError('INVALID_ARGUMENT', `unknown ID family ${JSON.stringify(family)}`);
    }
    return generator.nextBatch(count);
  }
}
