import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';

const BENCHMARKS_MD = new URL('../../docs/benchmarks.md', import.meta.url);

/** One line describing where and when figures were measured. */
export function machineLine(): string {
  const cpu = cpus()[0]?.model.trim() ?? 'unknown CPU';
  return (
    `Measured ${new Date().toISOString().slice(0, 10)} on ${cpus().length} x ${cpu}, Node ` +
    `${process.version}.`
  );
}

/**
 * The load average now, as a sentence for a report, with a warning when it is above 1: other work
 * on a 2-core machine takes CPU from the servers and from the load generator alike.
 */
export function loadNote(): string {
  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  const busy =
    (loadavg()[0] ?? 0) > 1
      ? ' **The 1-minute load average was above 1 when the run started (other work on the ' +
        'machine, or the load of an earlier benchmark still decaying): absolute figures may ' +
        'be lower than on an idle machine; the ratios are the comparable part.**'
      : '';
  return `Load average before the run: ${load}.${busy}`;
}

/** Renders rows as a Markdown table. */
export function markdownTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** Formats a rate like 18,734,000. */
export function formatRate(perSecond: number): string {
  return Math.round(perSecond).toLocaleString('en-US');
}

/**
 * Replaces the section between `<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->` in
 * docs/benchmarks.md, so each benchmark updates only its own figures.
 */
export function writeSection(name: string, markdown: string): void {
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  const doc = readFileSync(BENCHMARKS_MD, 'utf8');
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  if (from < 0 || to < from)
    throw new Error(`docs/benchmarks.md has no ${start} ... ${end} section`);
  writeFileSync(
    BENCHMARKS_MD,
    `${doc.slice(0, from + start.length)}\n${markdown.trim()}\n${doc.slice(to)}`,
  );
}

/** The median of a list of numbers. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] ?? 0)
    : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/** Resolves after `ms` real milliseconds (lets the clock catch up between rounds). */
export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
