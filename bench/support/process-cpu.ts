// CPU time of a server under test, for CPU per request: unlike latency percentiles on a shared
// machine, the CPU a process spends per answered request barely moves when other work takes
// turns on the cores, so it is the steadier measure of what a route costs beside the bare one.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * Clock ticks per second of /proc's utime and stime (`getconf CLK_TCK`; 100 on Linux in practice).
 */
let ticksPerSecond: number | undefined;

/**
 * The fields after the command name of /proc/PID/stat (the name may hold spaces and parentheses).
 */
function statFields(pid: string): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
  } catch {
    return undefined; // exited meanwhile
  }
}

/**
 * User plus system CPU time, in ms, of process `pid` and every live descendant (the supervisor
 * and its children for `idmint serve --processes N`), from /proc. NaN where /proc is missing
 * (not Linux): callers then show no CPU figure.
 */
export function treeCpuMs(pid: number): number {
  if (process.platform !== 'linux') return Number.NaN;
  ticksPerSecond ??=
    Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  const parents = new Map<string, string>();
  const ticks = new Map<string, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(entry);
    if (fields === undefined) continue;
    // After the name: state(0) ppid(1) ... utime(11) stime(12).
    parents.set(entry, fields[1] ?? '');
    ticks.set(entry, Number(fields[11]) + Number(fields[12]));
  }
  let total = 0;
  for (const [child] of ticks) {
    for (
      let at: string | undefined = child;
      at !== undefined && at !== '0' && at !== '';
      at = parents.get(at)
    ) {
      if (at === String(pid)) {
        total += ticks.get(child) ?? 0;
        break;
      }
    }
  }
  return (total * 1000) / ticksPerSecond;
}
