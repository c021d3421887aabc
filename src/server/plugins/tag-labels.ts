/** The `tag` label value that every tag beyond the limit shares (see {@link TagLabels}). */
export const OTHER_TAG = '_other';

/**
 * Bounds the per-tag series of the metrics: the first `max` tags seen in use get a `tag` label of
 * their own, for the life of the process (a counter never moves between series, so rate() stays
 * right); every later tag is summed under {@link OTHER_TAG}. Tags are only ever seen here once
 * drawn from or loaded, so an idle tag costs no series: with 100,000 tags in the store every tag
 * used to cost five series (25 MB and 2.5 s of blocked event loop per scrape).
 * A real tag named `_other` shares that series.
 */
export class TagLabels {
  readonly #max: number;
  readonly #own = new Set<string>();

  constructor(max: number) {
    this.#max = max;
  }

  /**
   * The label value for `tag`: its own name while fewer than `max` tags have one, else `_other`.
   */
  label(tag: string): string {
    if (this.#own.has(tag)) return tag;
    if (this.#own.size >= this.#max || tag === OTHER_TAG) return OTHER_TAG;
    this.#own.add(tag);
    return tag;
  }
}

/** Sums `value` per label: the shape every per-tag metric takes once tags share `_other`. */
export function sumByLabel<T>(
  items: Iterable<T>,
  labels: TagLabels,
  tagOf: (item: T) => string,
  value: (item: T) => number,
): Map<string, number> {
  const sums = new Map<string, number>();
  for (const item of items) {
    const label = labels.label(tagOf(item));
    sums.set(label, (sums.get(label) ?? 0) + value(item));
  }
  return sums;
}
