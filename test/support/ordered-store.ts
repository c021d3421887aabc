// A real segment store seen as one that keeps cluster-ordered tags: the named tags read as
// `ordering: cluster` and `issuers` is the given IssuerLeases. For the service's unit tests until
// every store keeps issuer leases itself; ranges still come from the real database.
import type { IssuerLeases } from '../../src/ports/issuer-lease.ts';
import type { SegmentStore, TagRecord } from '../../src/ports/segment-store.ts';

export function orderedStore(
  store: SegmentStore,
  ordered: readonly string[],
  leases: IssuerLeases,
): SegmentStore {
  const names = new Set(ordered);
  const mark = <R extends { tag: string }>(record: R): R =>
    names.has(record.tag) ? { ...record, ordering: 'cluster' } : record;
  return new Proxy(store, {
    get(target, property) {
      if (property === 'issuers') return leases;
      if (property === 'getTag')
        return async (tag: string) => {
          const record = await target.getTag(tag);
          return record === undefined ? undefined : mark<TagRecord>(record);
        };
      if (property === 'listTagPage')
        return async (after: string | undefined, limit: number) => {
          const page = await target.listTagPage(after, limit);
          return { ...page, records: page.records.map(mark) };
        };
      if (property === 'listTagChanges')
        return async (since: string | undefined) => {
          const changes = await target.listTagChanges(since);
          return { ...changes, records: changes.records.map(mark) };
        };
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
