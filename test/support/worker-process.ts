// A node in the multi-process scenarios: opens a worker registry from a URL (as the server
// will), waits for "start" on stdin so many processes can start at the same moment, then issues
// IDs in bursts and reports everything as JSON lines on stdout until "stop" (graceful close) or
// a signal. Run as: node worker-process.ts '<json config>'.
import { createInterface } from 'node:readline';
import type { LayoutSpec } from '../../src/core/layout.ts';
import {
  openWorkerRegistry,
  type OpenWorkerRegistryOptions,
} from '../../src/backends/open-worker-registry.ts';
import { SnowflakeWorker, type WorkerRollbackOptions } from '../../src/service/snowflake-worker.ts';

/** What a worker process is told to do. */
export interface WorkerProcessConfig {
  readonly url: string;
  readonly options: OpenWorkerRegistryOptions;
  readonly identity: { readonly host: string; readonly port: number };
  readonly layout: LayoutSpec | string;
  readonly rollback?: WorkerRollbackOptions;
  readonly renewIntervalMs: number;
  readonly safetyMarginMs: number;
  /** IDs per burst, and the pause between bursts. */
  readonly batch: number;
  readonly everyMs: number;
  /** Keep retrying a start refused as WORKER_IDS_EXHAUSTED this long (a node waiting for an ID). */
  readonly retryStartMs?: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as WorkerProcessConfig;
const say = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const codeOf = (error: unknown) => (error as { code?: string }).code ?? 'UNKNOWN';

const registry = await openWorkerRegistry(config.url, config.options);
say({ t: 'loaded', pid: process.pid, now: Date.now() });
const lines = createInterface({ input: process.stdin });
const commands = lines[Symbol.asyncIterator]();
await commands.next(); // "start"

const deadline = Date.now() + (config.retryStartMs ?? 0);
let worker: SnowflakeWorker | undefined;
while (worker === undefined) {
  try {
    worker = await SnowflakeWorker.start({
      registry,
      identity: config.identity,
      layout: config.layout,
      rollback: config.rollback,
      renewIntervalMs: config.renewIntervalMs,
      safetyMarginMs: config.safetyMarginMs,
    });
  } catch (error) {
    const code = codeOf(error);
    if (
      Date.now() < deadline &&
      (code === 'WORKER_IDS_EXHAUSTED' || code === 'REGISTRY_UNAVAILABLE')
    ) {
      say({ t: 'retry', code, at: Date.now() });
      await new Promise((resolve) => setTimeout(resolve, 100));
      continue;
    }
    say({ t: 'failed', code, message: (error as Error).message, at: Date.now() });
    await registry.close().catch(() => {});
    process.exit(3);
  }
}
const running = worker;
say({ t: 'started', workerId: running.workerId, at: Date.now() });

let lastError = '';
const pump = setInterval(() => {
  try {
    const ids = running.nextBatch(config.batch);
    say({ t: 'ids', at: Date.now(), ids: ids.map(String) });
    lastError = '';
  } catch (error) {
    const code = codeOf(error);
    // Each change of error is reported with its time; repeats only matter as "still failing".
    if (code !== lastError) say({ t: 'error', code, at: Date.now() });
    lastError = code;
  }
}, config.everyMs);

await commands.next(); // "stop"
clearInterval(pump);
await running.close();
await registry.close();
say({ t: 'closed', at: Date.now() });
lines.close();
