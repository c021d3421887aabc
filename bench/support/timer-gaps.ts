// How late a 1 ms timer fires while something runs: the event loop's longest block during it.
// Run over an idle interval, the same measure gives this machine's floor: on the 2-core virtual
// machine the benchmarks run on, a process doing nothing sees its timer fire several ms late
// now and then (the host's scheduling, not the process), and no smaller block or latency tail
// can be told apart from that.
import { percentile } from './open-loop.ts';

export interface TimerGaps<T> {
  readonly value: T;
  /** Wall time of `run`, ms. */
  readonly ms: number;
  /** The longest gap between two firings of a 1 ms timer during `run`, ms. */
  readonly maxGapMs: number;
  /** The 99.9th percentile of those gaps, ms. */
  readonly p999GapMs: number;
}

/** Runs `run` with a 1 ms timer alongside, and reports the timer's gaps. */
export async function timerGaps<T>(run: () => Promise<T>): Promise<TimerGaps<T>> {
  const gaps: number[] = [];
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    gaps.push(now - last);
    last = now;
  }, 1);
  const start = performance.now();
  const value = await run();
  const ms = performance.now() - start;
  // One more firing, so a block at the very end is counted.
  await new Promise((resolve) => setTimeout(resolve, 5));
  clearInterval(ticker);
  const sorted = Float64Array.from(gaps).sort();
  return {
    value,
    ms,
    maxGapMs: sorted.at(-1) ?? 0,
    p999GapMs: gaps.length === 0 ? 0 : percentile(sorted, 99.9),
  };
}

/** Resolves after `ms`. */
export const idleFor = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));
