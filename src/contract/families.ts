// The ID families the server issues at `/v1/<family>`: the one list of them. The server's routes,
// the OpenAPI document, the client and the CLI all derive theirs from it, and the generators
// (src/service/id-families.ts) are a record over it, so a family added here and not there fails
// the type check. No imports: the client loads this file as it is, in any runtime.

/** What the HTTP API says about one family. */
export interface IdFamilyEntry {
  /** The family's name in prose, e.g. `UUIDv7`. */
  readonly title: string;
  /** The OpenAPI operationId of its route. */
  readonly operationId: string;
  /** The OpenAPI summary of its route: what its IDs are. */
  readonly summary: string;
  /** One ID of the family, for the OpenAPI document. */
  readonly example: string;
}

/**
 * Every family, in the order the documents list them; the key is its route (`/v1/<key>`) and its
 * name everywhere.
 */
export const ID_FAMILY_REGISTRY = {
  uuid7: {
    title: 'UUIDv7',
    operationId: 'uuid7Ids',
    summary: 'UUIDv7s (RFC 9562), strictly increasing as strings and bytes',
    example: '019a0f6c-1d32-7a41-8b3c-5e0d2f7a9c11',
  },
  uuid4: {
    title: 'UUIDv4',
    operationId: 'uuid4Ids',
    summary: 'UUIDv4s (RFC 9562): 122 random bits, no order',
    example: '3b241101-e2bb-4255-8caf-4136c566a962',
  },
  ulid: {
    title: 'ULID',
    operationId: 'ulids',
    summary: "ULIDs, monotonic by the spec's rule: strictly increasing",
    example: '01K7ZJ3F2V0Q8X3N6W1T5R9B4M',
  },
  objectid: {
    title: 'ObjectId',
    operationId: 'objectIds',
    summary: 'MongoDB ObjectIds (BSON spec), never repeating: a used-up second is waited out',
    example: '6a1f0c2b9e4d7f3a1c2b0e9d',
  },
} as const satisfies Readonly<Record<string, IdFamilyEntry>>;

/** An ID family the server issues at `/v1/<family>`. */
export type IdFamily = keyof typeof ID_FAMILY_REGISTRY;

/** The families' names, in the registry's order. */
export const ID_FAMILIES = Object.keys(ID_FAMILY_REGISTRY) as readonly IdFamily[];

/** The families' titles as prose: "UUIDv7, UUIDv4, ULID and ObjectId". */
export function familyTitles(): string {
  const titles = ID_FAMILIES.map((family) => ID_FAMILY_REGISTRY[family].title);
  return titles.length < 2
    ? titles.join('')
    : `${titles.slice(0, -1).join(', ')} and ${titles.at(-1)}`;
}
