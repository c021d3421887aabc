import { IdMintClient } from '../../src/client/client.ts';
import { isIdMintError } from '../../src/core/errors.ts';

/** IDs drawn over HTTP, per mode, and which worker each snowflake batch came from. */
export interface Drawn {
  readonly segment: bigint[];
  readonly snowflake: bigint[];
  readonly workers: Set<number>;
  /** Requests that failed (a server gone, say), by error code. */
  readonly failures: Map<string, number>;
}

/** Options for {@link drawIds}. */
export interface DrawOptions {
  /** Servers to spread requests over, round robin. */
  readonly urls: readonly string[];
  readonly tag: string;
  /** IDs to draw per mode: 2/3 as single-ID requests, 1/3 in batches of 100. */
  readonly perMode: number;
  /** Requests in flight at once. */
  readonly concurrency: number;
  /** Stop early when this turns true (checked between requests). */
  readonly stop?: () => boolean;
  /** Where to put the IDs (to keep collecting across calls). */
  readonly into?: Drawn;
}

/** An empty {@link Drawn}. */
export function drawn(): Drawn {
  return { segment: [], snowflake: [], workers: new Set(), failures: new Map() };
}

/**
 * Draws `perMode` segment and `perMode` snowflake IDs over HTTP from `urls`, `concurrency`
 * requests at a time, mixing Leaf single-ID requests and JSON batches. A failed request is
 * counted, not retried: an ID that was never answered was never handed out.
 */
export async function drawIds(options: DrawOptions): Promise<Drawn> {
  const out = options.into ?? drawn();
  const clients = options.urls.map(
    (url) => new IdMintClient({ url, retries: 0, timeoutMs: 10_000 }),
  );
  const batch = 100;
  const singles = Math.round((options.perMode * 2) / 3);
  const batches = Math.ceil((options.perMode - singles) / batch);
  // One job per request: [mode, batch size]; interleaved so both modes run at once.
  const jobs: ['segment' | 'snowflake', number][] = [];
  for (let i = 0; i < singles; i++) jobs.push(['segment', 1], ['snowflake', 1]);
  for (let i = 0; i < batches; i++)
    jobs.splice((i * 7919) % jobs.length, 0, ['segment', batch], ['snowflake', batch]);
  let next = 0;
  const worker = async (lane: number) => {
    for (;;) {
      if (options.stop?.() === true) return;
      const index = next++;
      const job = jobs[index];
      if (job === undefined) return;
      const client = clients[(index + lane) % clients.length] as IdMintClient;
      const [mode, count] = job;
      try {
        if (mode === 'segment') {
          const ids =
            count === 1
              ? [await client.segment(options.tag)]
              : await client.segmentBatch(options.tag, count);
          for (const id of ids) out.segment.push(BigInt(id));
        } else if (count === 1) {
          out.snowflake.push(BigInt(await client.snowflake(options.tag)));
        } else {
          const answer = await client.snowflakeBatch(count);
          out.workers.add(answer.workerId);
          for (const id of answer.ids) out.snowflake.push(BigInt(id));
        }
      } catch (error) {
        const code = isIdMintError(error) ? error.code : 'OTHER';
        out.failures.set(code, (out.failures.get(code) ?? 0) + 1);
        if (!isIdMintError(error)) throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, lane) => worker(lane)));
  return out;
}

/** The values that occur more than once (the first few), for an assertion message. */
export function duplicates(ids: readonly bigint[]): bigint[] {
  const seen = new Set<bigint>();
  const repeated: bigint[] = [];
  for (const id of ids) {
    if (seen.has(id)) {
      if (repeated.length < 5) repeated.push(id);
    } else {
      seen.add(id);
    }
  }
  return repeated;
}
