// Clients of a cluster-ordered tag for the promise tests: concurrent loops, each sending one
// request at a time to a random node over a random ID route, recording every answer's send and
// arrival times (one clock: this process's performance.now()) and its IDs. Failures (a node
// killed or stopped, ISSUER_UNAVAILABLE during a handover) are counted, not answers.
import { Agent, request } from 'node:http';
import type { TimedAnswer } from './ordering-check.ts';

export interface LoadResult {
  readonly answers: TimedAnswer[];
  readonly ids: bigint[];
  /** Requests that got no answer with IDs, by what went wrong. */
  readonly failures: Map<string, number>;
}

/** A running load: `stop()` ends the loops and resolves with what they recorded. */
export interface Load {
  /** Answers recorded so far. */
  answered(): number;
  /** Sends `count` requests to `url` at once (each recorded as any other); resolves when done. */
  burst(url: string, count: number): Promise<void>;
  stop(): Promise<LoadResult>;
}

const ROUTES = [
  (tag: string) => `/api/segment/get/${encodeURIComponent(tag)}`,
  (tag: string) =>
    `/v1/segment/${encodeURIComponent(tag)}?count=${1 + Math.floor(Math.random() * 5)}`,
  (tag: string) =>
    `/tinyid/id/nextIdSimple?bizType=${encodeURIComponent(tag)}` +
    `&batchSize=${1 + Math.floor(Math.random() * 3)}`,
];

/** Starts `clients` loops against the nodes `urls()` lists at each request. */
export function startLoad(urls: () => readonly string[], tag: string, clients = 12): Load {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const answers: TimedAnswer[] = [];
  const ids: bigint[] = [];
  const failures = new Map<string, number>();
  let running = true;
  const fail = (why: string) => failures.set(why, (failures.get(why) ?? 0) + 1);
  /** One request to `node`, recorded; false when it got no IDs. */
  const one = async (node: string, timeoutMs: number): Promise<boolean> => {
    const route = ROUTES[Math.floor(Math.random() * ROUTES.length)] as (tag: string) => string;
    const sent = performance.now();
    const answer = await get(agent, `${node}${route(tag)}`, timeoutMs);
    const received = performance.now();
    const got = answer.status === 200 ? parseIds(answer.body) : [];
    if (got.length === 0) {
      fail(answer.status === 0 ? 'unreachable' : `${answer.status} ${code(answer.body)}`);
      return false;
    }
    let min = got[0] as bigint;
    let max = min;
    for (const id of got) {
      if (id < min) min = id;
      if (id > max) max = id;
      ids.push(id);
    }
    answers.push({ sent, received, min, max, node });
    return true;
  };
  const loop = async () => {
    while (running) {
      const nodes = urls();
      const node = nodes[Math.floor(Math.random() * nodes.length)];
      // A node that does not answer (stopped, killed) holds a loop up to its timeout: short.
      if (node === undefined || !(await one(node, 1000)))
        // A failing node is tried again soon, not in a tight loop.
        await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  const loops = Array.from({ length: clients }, loop);
  return {
    answered: () => answers.length,
    async burst(url, count) {
      await Promise.all(Array.from({ length: count }, () => one(url, 10_000)));
    },
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
      return { answers, ids, failures };
    },
  };
}

function get(
  agent: Agent,
  url: string,
  timeoutMs: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = request(url, { agent, timeout: timeoutMs }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        body += chunk;
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      response.on('error', () => resolve({ status: 0, body: '' }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.end();
  });
}

/** IDs of a Leaf answer (`123`), a v1 batch (`{"ids":[...]}`) or TinyId's `1,2,3`. */
function parseIds(body: string): bigint[] {
  if (body.startsWith('{')) return (JSON.parse(body) as { ids?: string[] }).ids?.map(BigInt) ?? [];
  if (!/^[0-9]+(,[0-9]+)*$/.test(body)) return [];
  return body.split(',').map(BigInt);
}

function code(body: string): string {
  return /"code":"([A-Z_]+)"/.exec(body)?.[1] ?? (body === '' ? 'empty' : 'other');
}
