import assert from 'node:assert/strict';

/**
 * Draws snowflake IDs from a running server over HTTP (`GET /v1/snowflake?count=N`), one request
 * after another, until `until` settles; resolves to every ID it was given. A request that fails
 * (a server that stopped) ends the draw.
 */
export async function drawSnowflakes(
  url: string,
  until: Promise<unknown>,
  count = 2000,
): Promise<bigint[]> {
  let done = false;
  void until.finally(() => (done = true));
  const ids: bigint[] = [];
  while (!done) {
    let body: { ids?: string[] };
    try {
      const response = await fetch(`${url}/v1/snowflake?count=${count}`);
      if (response.status !== 200) break;
      body = (await response.json()) as { ids?: string[] };
    } catch {
      break;
    }
    for (const id of body.ids ?? []) ids.push(BigInt(id));
  }
  return ids;
}

/** How many IDs of `lists` are issued more than once, over all of them together. */
export function duplicateCount(lists: readonly (readonly bigint[])[]): number {
  const seen = new Set<bigint>();
  let duplicates = 0;
  for (const list of lists) {
    for (const id of list) {
      if (seen.has(id)) duplicates++;
      else seen.add(id);
    }
  }
  return duplicates;
}

/** Asserts that no ID of `lists` was issued twice, naming how many were. */
export function assertNoDuplicateIds(lists: readonly (readonly bigint[])[], what: string): void {
  const total = lists.reduce((sum, list) => sum + list.length, 0);
  assert.equal(duplicateCount(lists), 0, `${what}: IDs issued twice among ${total}`);
}
