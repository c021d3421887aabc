import { MonotonicClock } from '../clocks/monotonic-clock.ts';
import { IdMintError } from '../core/errors.ts';
import type { Layout } from '../core/layout.ts';
import { SnowflakeGenerator } from '../core/snowflake.ts';
import type { Clock } from '../ports/clock.ts';
import type { SegmentStore } from '../ports/segment-store.ts';
import { openSegmentStore } from '../stores/open-segment-store.ts';
import type { ServerConfig } from './config.ts';

/** What the server needs from snowflake mode. */
export interface SnowflakeWorker {
  readonly layout: Layout;
  readonly workerId: number;
  nextString(): string;
  nextBatch(count: number): bigint[];
  /** True while the worker-ID lease is held and IDs may be issued. */
  leaseHeld(): boolean;
  rollbackCount(): number;
  /** Releases the lease; no ID is issued afterwards. */
  close(): Promise<void>;
}

/** The ID sources behind the routes; a mode turned off is absent. */
export interface Backends {
  readonly store?: SegmentStore;
  readonly snowflake?: SnowflakeWorker;
  /** Closes everything opened, in order. Idempotent. */
  close(): Promise<void>;
}

/** Options the embedding code or a test may pass to {@link openBackends}. */
export interface BackendOptions {
  /** Clock for snowflake mode; default MonotonicClock. */
  readonly clock?: Clock;
}

/** Opens the store and the registry the configuration names, and leases a worker ID. */
export async function openBackends(config: ServerConfig, options: BackendOptions = {}): Promise<Backends> {
  const store = config.segment.enabled ? await openStore(config) : undefined;
  let snowflake: SnowflakeWorker | undefined;
  try {
    snowflake = config.snowflake.enabled ? openSnowflake(config, options.clock ?? new MonotonicClock()) : undefined;
  } catch (error) {
    await store?.close();
    throw error;
  }
  return {
    store,
    snowflake,
    async close() {
      await snowflake?.close();
      await store?.close();
    },
  };
}

/** Opens the segment store and checks it answers, so a server that starts can serve. */
async function openStore(config: ServerConfig): Promise<SegmentStore> {
  const { store: url, table, timeoutMs, poolSize } = config.segment;
  const store = await openSegmentStore(url, { table, timeoutMs, poolSize, source: 'segment.store' });
  try {
    await store.listTags();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

function openSnowflake(config: ServerConfig, clock: Clock): SnowflakeWorker {
  const match = /^static:([0-9]{1,10})$/.exec(config.snowflake.registry);
  if (match === null) {
    throw new IdMintError('CONFIG_INVALID', `snowflake.registry = "${config.snowflake.registry}": only static:N is supported so far`);
  }
  const generator = new SnowflakeGenerator({
    clock,
    layout: config.snowflake.layout,
    workerId: Number(match[1]),
    datacenterId: config.snowflake.datacenterId,
    sequenceSpread: config.snowflake.sequenceSpread,
    rollback: config.snowflake.rollback,
  });
  let open = true;
  return {
    layout: generator.layout,
    workerId: generator.workerId,
    nextString: () => generator.nextString(),
    nextBatch: (count) => generator.nextBatch(count),
    leaseHeld: () => open,
    rollbackCount: () => generator.rollbackCount(),
    async close() {
      open = false;
      generator.setValidUntil(Number.NEGATIVE_INFINITY);
    },
  };
}
