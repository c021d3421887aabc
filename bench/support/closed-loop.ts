// The bench servers' processes, and closed-loop load (autocannon) against them: the shared part
// of bench/http.bench.ts and bench/latency.bench.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { percentile } from './open-loop.ts';

export interface Target {
  readonly url: string;
  readonly child: ChildProcess;
  /** The bare app in the same process, when started with `twin` (in-process idmint only). */
  readonly twin?: string;
}

/**
 * Starts bench/support/http-target.ts in a process of its own. `processes` above 1 starts idmint
 * as `idmint serve --processes N` (passed to the target as BENCH_PROCESSES); `twin` also serves
 * the bare app in idmint's process (BENCH_TWIN).
 */
export function startTarget(
  kind: 'bare' | 'idmint',
  processes = 1,
  cpu?: number,
  options: { readonly twin?: boolean } = {},
): Promise<Target> {
  const script = fileURLToPath(new URL('./http-target.ts', import.meta.url));
  const node = [process.execPath, ...process.execArgv, script, kind];
  // Pinned with taskset (Linux) when a CPU is given: the server then never waits for the
  // generator's time slice on its own core.
  const [command = process.execPath, ...args] =
    cpu === undefined ? node : ['taskset', '-c', String(cpu), ...node];
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      BENCH_PROCESSES: String(processes),
      BENCH_TWIN: options.twin === true ? '1' : '0',
    },
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${kind} target exited with ${code}`)));
    child.stdout?.once('data', (chunk: Buffer) => {
      const { url, twin } = JSON.parse(chunk.toString('utf8')) as { url: string; twin?: string };
      resolve({ url, child, ...(twin === undefined ? {} : { twin }) });
    });
  });
}

/** Stops targets started by {@link startTarget}. */
export function stopTargets(targets: readonly Target[]): void {
  for (const target of targets) {
    target.child.removeAllListeners('exit');
    target.child.kill('SIGTERM');
  }
}

export interface ClosedLoopResult {
  readonly requestsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
  readonly failures: number;
  /** Every response's latency, ms, ascending (empty unless keepLatencies). */
  readonly latencies: Float64Array;
}

export interface ClosedLoopOptions {
  readonly connections: number;
  /** bodyLoop only: called with each whole 200 body (collected only when given). */
  readonly onBody?: (body: Buffer) => void;
  /** Record every response's latency (from its actual send: what a closed loop can measure). */
  readonly keepLatencies?: boolean;
  readonly headers?: Record<string, string>;
}

/**
 * autocannon against `url` for `seconds`: each connection sends its next request when the last is
 * answered.
 */
export async function closedLoop(
  url: string,
  seconds: number,
  options: ClosedLoopOptions,
): Promise<ClosedLoopResult> {
  let latencies = new Float64Array(1 << 20);
  let count = 0;
  // Without a callback autocannon returns its tracker: an EventEmitter that is also a promise of
  // the result (its typings show only the promise).
  const instance = autocannon({
    url,
    connections: options.connections,
    duration: seconds,
    pipelining: 1,
    ...(options.headers === undefined ? {} : { headers: options.headers }),
  }) as unknown as Promise<autocannon.Result> & EventEmitter;
  if (options.keepLatencies === true) {
    // autocannon's summary rounds to whole milliseconds, too coarse here: each response's own
    // timing.
    instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => {
      if (count === latencies.length) {
        const grown = new Float64Array(latencies.length * 2);
        grown.set(latencies);
        latencies = grown;
      }
      latencies[count++] = ms;
    });
  }
  const result = await instance;
  const sorted = latencies.subarray(0, count).sort();
  return {
    requestsPerSecond: result.requests.total / (result.duration || seconds),
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    p999: percentile(sorted, 99.9),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    failures: result.non2xx + result.errors + result.timeouts,
    latencies: sorted,
  };
}

/**
 * A closed loop for large answers: `connections` loops each GET `url` and count the body's bytes,
 * over node:http with keep-alive. autocannon's client, not the server, is the bottleneck for
 * bodies of hundreds of kilobytes (it caps a binary batch of 100,000 IDs near 25-30 million IDs/s
 * here where this client reads 70 million and more), so batch throughput is measured with this.
 */
export async function bodyLoop(
  url: string,
  seconds: number,
  options: ClosedLoopOptions,
): Promise<ClosedLoopResult & { readonly bytes: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections });
  const latencies: number[] = [];
  let failures = 0;
  let bytes = 0;
  const get = () =>
    new Promise<void>((resolve) => {
      const sent = performance.now();
      request(url, { agent, headers: options.headers ?? {} }, (response) => {
        if (response.statusCode !== 200) failures++;
        const chunks: Buffer[] | undefined =
          options.onBody !== undefined && response.statusCode === 200 ? [] : undefined;
        response.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          chunks?.push(chunk);
        });
        response.on('end', () => {
          latencies.push(performance.now() - sent);
          if (chunks !== undefined) options.onBody?.(Buffer.concat(chunks));
          resolve();
        });
      })
        .on('error', () => {
          failures++;
          resolve();
        })
        .end();
    });
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: options.connections }, async () => {
      while (performance.now() < end) await get();
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  agent.destroy();
  const sorted = Float64Array.from(latencies).sort();
  return {
    requestsPerSecond: latencies.length / elapsed,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    p999: percentile(sorted, 99.9),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    failures,
    latencies: sorted,
    bytes,
  };
}
