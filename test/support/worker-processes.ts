import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import './lock-dir.ts';
import type { WorkerProcessConfig } from './worker-process.ts';

const CHILD = fileURLToPath(new URL('./worker-process.ts', import.meta.url));

/** One `worker-process.ts` child, and what it reported. */
export class WorkerProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** Every ID it printed, with the wall time of the burst. */
  readonly ids: { at: number; id: bigint }[] = [];
  readonly errors: { at: number; code: string }[] = [];
  readonly retries: { at: number; code: string }[] = [];
  readonly loaded: Promise<{ now: number }>;
  readonly started: Promise<{ workerId: number; at: number }>;
  readonly exited: Promise<number | null>;
  stderr = '';

  constructor(config: WorkerProcessConfig, env: NodeJS.ProcessEnv = {}) {
    this.child = spawn(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', CHILD, JSON.stringify(config)],
      {
        env: { ...process.env, ...env },
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    this.child.stderr.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
    let loaded!: (value: { now: number }) => void;
    let started!: (value: { workerId: number; at: number }) => void;
    let failed!: (error: Error) => void;
    this.loaded = new Promise((resolve) => (loaded = resolve));
    this.started = new Promise((resolve, reject) => {
      started = resolve;
      failed = reject;
    });
    this.started.catch(() => {}); // observed by the test that expects it
    void this.exited.then((code) =>
      failed(new Error(`worker process exited (${code}) before starting: ${this.stderr}`)),
    );
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      const event = JSON.parse(line) as { t: string; [key: string]: unknown };
      if (event.t === 'ids')
        for (const id of event['ids'] as string[])
          this.ids.push({ at: event['at'] as number, id: BigInt(id) });
      else if (event.t === 'error')
        this.errors.push({ at: event['at'] as number, code: event['code'] as string });
      else if (event.t === 'retry')
        this.retries.push({ at: event['at'] as number, code: event['code'] as string });
      else if (event.t === 'loaded') loaded({ now: event['now'] as number });
      else if (event.t === 'started')
        started({ workerId: event['workerId'] as number, at: event['at'] as number });
      else if (event.t === 'failed')
        failed(Object.assign(new Error(event['message'] as string), { code: event['code'] }));
    });
  }

  /** Lets it acquire its worker ID (all loaded processes can be released at the same moment). */
  start(): void {
    this.child.stdin.write('start\n');
  }

  /** Graceful shutdown: it stops issuing and releases its lease. */
  async stop(): Promise<number | null> {
    this.child.stdin.end('stop\n');
    return this.exited;
  }

  /** SIGKILL: no release, no last report. */
  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** Asserts no ID appears twice across all `processes`; returns how many there were. */
export function assertNoDuplicates(processes: readonly WorkerProcess[]): number {
  const seen = new Set<bigint>();
  let count = 0;
  for (const p of processes) {
    for (const { id } of p.ids) {
      if (seen.has(id)) throw new Error(`ID ${id} was issued twice`);
      seen.add(id);
      count++;
    }
  }
  return count;
}

/** libfaketime from Debian's `faketime` package, or undefined when it is not installed. */
export function findLibfaketime(): string | undefined {
  for (const dir of ['/usr/lib', '/usr/lib64']) {
    if (!existsSync(dir)) continue;
    const candidates = [
      `${dir}/faketime/libfaketime.so.1`,
      ...readdirSync(dir).map((arch) => `${dir}/${arch}/faketime/libfaketime.so.1`),
    ];
    const found = candidates.find((path) => existsSync(path));
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Environment that runs a process with its wall clock `offset` away (libfaketime syntax, e.g.
 * "-600s"). The monotonic clock is left alone: faking it could make it negative on a machine
 * up for less than the offset.
 */
export function fakeTimeEnv(library: string, offset: string): NodeJS.ProcessEnv {
  return {
    LD_PRELOAD: library,
    FAKETIME: offset,
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
    FAKETIME_NO_CACHE: '1',
  };
}
