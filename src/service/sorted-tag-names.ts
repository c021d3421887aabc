/**
 * Every tag a SegmentService knows, kept sorted by name (UTF-16 code units, as `<` compares), so
 * the status route can hand out a page of tags in name order without building and sorting an
 * object per tag on every request (with 100,000 tags that was 60 to 210 ms of blocked event loop).
 *
 * Changes are noted as they happen and folded in at the next read: a few by binary search and
 * splice, many (the first tag list read) by one sort of the new names and a linear merge. The
 * owner reports each name exactly once as it appears and once as it goes; the owner knows which
 * names are new, this class does not keep a second set of them.
 */
export class SortedTagNames {
  #names: string[] = [];
  /** Names added or removed since the last fold; a name in neither is as #names says. */
  readonly #added = new Set<string>();
  readonly #removed = new Set<string>();

  /** A name the owner did not know before. */
  add(tag: string): void {
    if (!this.#removed.delete(tag)) this.#added.add(tag);
  }

  /** A name the owner knew and no longer does. */
  remove(tag: string): void {
    if (!this.#added.delete(tag)) this.#removed.add(tag);
  }

  /** The names in order: the live array, to read before the next add or remove and never change. */
  names(): readonly string[] {
    this.#fold();
    return this.#names;
  }

  /**
   * Folds the pending changes in; called by {@link names}, and by the owner after a bulk change so
   * no request pays for it.
   */
  fold(): void {
    this.#fold();
  }

  #fold(): void {
    const changes = this.#added.size + this.#removed.size;
    if (changes === 0) return;
    if (changes <= SPLICE_LIMIT) {
      for (const tag of this.#removed) {
        const at = lowerBound(this.#names, tag);
        if (this.#names[at] === tag) this.#names.splice(at, 1);
      }
      for (const tag of this.#added) this.#names.splice(lowerBound(this.#names, tag), 0, tag);
    } else {
      const removed = this.#removed;
      const kept =
        removed.size === 0 ? this.#names : this.#names.filter((tag) => !removed.has(tag));
      // Default sort order is UTF-16 code units, the order of `<` on strings.
      this.#names = merge(kept, [...this.#added].sort());
    }
    this.#added.clear();
    this.#removed.clear();
  }
}

/**
 * Up to this many changes are spliced in one by one (each a binary search and a move of the array's
 * tail).
 */
const SPLICE_LIMIT = 64;

/** The first index whose name is not below `tag` (names.length when all are). */
export function lowerBound(names: readonly string[], tag: string): number {
  let low = 0;
  let high = names.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((names[mid] as string) < tag) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** The first index whose name is above `tag`. */
export function upperBound(names: readonly string[], tag: string): number {
  const at = lowerBound(names, tag);
  return names[at] === tag ? at + 1 : at;
}

function merge(a: readonly string[], b: readonly string[]): string[] {
  const out = new Array<string>(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length)
    out[k++] = (a[i] as string) <= (b[j] as string) ? (a[i++] as string) : (b[j++] as string);
  while (i < a.length) out[k++] = a[i++] as string;
  while (j < b.length) out[k++] = b[j++] as string;
  return out;
}
