import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REQUIRE_SERVICES } from './services.ts';

/**
 * Debian's `prometheus` server (its `prometheus` package, which scripts/services.sh up installs
 * with promtool); IDMINT_TEST_PROMETHEUS names another binary.
 */
const BINARY = process.env['IDMINT_TEST_PROMETHEUS'] ?? 'prometheus';

/** Why there is no Prometheus to run, or undefined when there is one. */
export const PROMETHEUS_MISSING =
  spawnSync(BINARY, ['--version'], { stdio: 'ignore' }).status === 0
    ? undefined
    : `${BINARY} not found (apt-get install prometheus, or scripts/services.sh up; ` +
      `IDMINT_TEST_PROMETHEUS names one)`;

/**
 * The `skip` option of a test that scrapes with a real Prometheus: skipped with a loud line when
 * the binary is missing, except with IDMINT_REQUIRE_SERVICES=1, when the test runs and fails
 * (see {@link startPrometheus}), as for a missing database.
 */
export function prometheusSkip(): string | false {
  if (PROMETHEUS_MISSING === undefined || REQUIRE_SERVICES) return false;
  process.stderr.write(`\n!!! SKIPPING the Prometheus scrape test: ${PROMETHEUS_MISSING}\n`);
  return PROMETHEUS_MISSING;
}

/** One sample of an instant query's answer. */
export interface QuerySample {
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** What /api/v1/query answers (an instant vector). */
interface QueryAnswer {
  readonly status: string;
  readonly error?: string;
  readonly data?: {
    readonly result: {
      readonly metric: Record<string, string>;
      readonly value: [number, string];
    }[];
  };
}

/** A Prometheus server of a test's own, scraping one target. */
export interface TestPrometheus {
  /** Its HTTP API, `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** An instant query (PromQL) at the newest data. */
  query(expression: string): Promise<QuerySample[]>;
  /** Resolves once a scrape of the target that began at or after `sinceMs` (epoch ms) is stored. */
  scrapedSince(sinceMs: number, timeoutMs?: number): Promise<void>;
  /**
   * A sample of Prometheus's own /metrics
   * (`prometheus_target_scrapes_sample_duplicate_timestamp_total`).
   */
  ownMetric(name: string): Promise<number | undefined>;
  /** Stops the server (by its PID) and removes its data. */
  stop(): Promise<void>;
}

/** The job name the scraped target's series carry. */
export const SCRAPE_JOB = 'idmint-test';

/**
 * Starts Prometheus on a free loopback port with a configuration and storage directory of its
 * own, scraping `target` (`host:port`, path /metrics) every `intervalMs`; resolves once it is
 * ready. Throws when there is no binary (a test that runs without one is one that must fail).
 */
export async function startPrometheus(target: string, intervalMs = 200): Promise<TestPrometheus> {
  if (PROMETHEUS_MISSING !== undefined)
    throw new Error(`IDMINT_REQUIRE_SERVICES=1 but ${PROMETHEUS_MISSING}`);
  const dir = mkdtempSync(join(tmpdir(), 'idmint-prometheus-'));
  const config = join(dir, 'prometheus.yml');
  const interval = `${intervalMs}ms`;
  writeFileSync(
    config,
    `global:\n  scrape_interval: ${interval}\n  scrape_timeout: ${interval}\n` +
      `scrape_configs:\n  - job_name: ${SCRAPE_JOB}\n    static_configs:\n      - targets: ` +
      `['${target}']\n`,
  );
  let lastError: unknown;
  // The port is free when chosen; another process may take it before Prometheus binds it.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const args = [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ];
    const child = spawn(BINARY, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      log = (log + chunk.toString('utf8')).slice(-4000);
    });
    const url = `http://127.0.0.1:${port}`;
    try {
      await waitReady(url, child);
      return handle(url, child, dir);
    } catch (error) {
      lastError = new Error(`prometheus did not start: ${(error as Error).message}\n${log}`);
      await stopChild(child);
    }
  }
  rmSync(dir, { recursive: true, force: true });
  throw lastError;
}

function handle(url: string, child: ChildProcess, dir: string): TestPrometheus {
  const query = async (expression: string): Promise<QuerySample[]> => {
    const response = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expression)}`);
    const body = (await response.json()) as QueryAnswer;
    if (body.status !== 'success' || body.data === undefined) {
      throw new Error(`query ${expression}: ${body.error ?? response.status}`);
    }
    return body.data.result.map((sample) => ({
      labels: sample.metric,
      value: Number(sample.value[1]),
    }));
  };
  return {
    url,
    query,
    async scrapedSince(sinceMs, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        // `up` is written at every scrape with the scrape's start time as its timestamp.
        const [last] = await query(`timestamp(up{job="${SCRAPE_JOB}"})`);
        if (last !== undefined && last.value * 1000 >= sinceMs) return;
        if (Date.now() > deadline) {
          throw new Error(
            `no scrape stored since ${new Date(sinceMs).toISOString()} within ${timeoutMs} ms`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    async ownMetric(name) {
      const text = await (await fetch(`${url}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      return line === undefined ? undefined : Number(line.slice(name.length + 1));
    },
    async stop() {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves once `/-/ready` answers 200; rejects if the process exits first or after 60 s. */
async function waitReady(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`exited with ${child.exitCode ?? child.signalCode}`);
    }
    const status = await fetch(`${url}/-/ready`).then(
      (response) => response.status,
      () => 0,
    );
    if (status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('not ready within 60 s');
}

/**
 * SIGTERM to the process this module started (by its PID), SIGKILL if it has not exited after 10 s.
 */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => {
        if (typeof address === 'object' && address !== null) resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}
