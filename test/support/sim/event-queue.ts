/** One thing that happens at one instant of virtual time. */
export interface SimEvent {
  /** Virtual time (ms, the registry's clock) at which it happens. */
  readonly at: number;
  /** Insertion order: events at one instant happen in the order they were scheduled. */
  readonly seq: number;
  /** What it does; true when it may have woken the code under test (then the loop drains). */
  readonly run: () => boolean;
}

/**
 * The simulation's agenda: a binary min-heap of events by (time, insertion order), so one seed
 * always gives one order, however many events share an instant.
 */
export class EventQueue {
  readonly #heap: SimEvent[] = [];
  #seq = 0;

  get size(): number {
    return this.#heap.length;
  }

  push(at: number, run: () => boolean): void {
    const heap = this.#heap;
    const event: SimEvent = { at, seq: this.#seq++, run };
    heap.push(event);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(event, heap[parent] as SimEvent)) break;
      heap[i] = heap[parent] as SimEvent;
      i = parent;
    }
    heap[i] = event;
  }

  /** The earliest event, removed; undefined when none is left. */
  pop(): SimEvent | undefined {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child =
        right < heap.length && before(heap[right] as SimEvent, heap[left] as SimEvent)
          ? right
          : left;
      if (!before(heap[child] as SimEvent, last)) break;
      heap[i] = heap[child] as SimEvent;
      i = child;
    }
    heap[i] = last;
    return top;
  }
}

function before(a: SimEvent, b: SimEvent): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
