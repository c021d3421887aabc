// An open-loop HTTP load generator, for latency at a fixed rate measured the way wrk2 measures it.
//
// Request i is due at start + i / rate, whatever the answers do: when every connection is busy
// (the server stalled, or is slower than the rate), due requests wait in a queue here and are sent
// as connections free up, and each latency is taken from the request's INTENDED send time, not
// from when it could be sent. A closed-loop tool (autocannon, ab, wrk without -R) sends the next
// request only after an answer, so a 100 ms stall delays one request per connection and hides
// every request that should have been sent meanwhile: coordinated omission. autocannon's rate
// option does not correct it either: it still times each request from its actual send.
//
// The client is a minimal HTTP/1.1 keep-alive client on raw sockets (one request in flight per
// connection, no pipelining), several times cheaper per request than node:http's, so on a machine
// where the generator shares the cores with the server it takes as little CPU from it as it can.
// It reads responses framed by Content-Length only (what Fastify sends for text, JSON strings
// and buffers); a chunked answer counts as a failure.
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';

export interface OpenLoopOptions {
  /** `http://host:port/path?query` (plain HTTP only). */
  readonly url: string;
  /** Requests per second, evenly spaced. */
  readonly rate: number;
  readonly seconds: number;
  /** Keep-alive connections opened before the clock starts; one request in flight on each. */
  readonly connections: number;
  readonly headers?: Readonly<Record<string, string>>;
  /** Callbacks run at given ms after the start (to pause the server in a validation run). */
  readonly events?: readonly { readonly atMs: number; readonly run: () => void }[];
  /** Requests still unanswered this long after the last one was due are counted as failures. */
  readonly drainMs?: number;
}

export interface OpenLoopResult {
  /** Requests due in the run: rate x seconds, exactly. */
  readonly intended: number;
  /** Answered with a 2xx. */
  readonly ok: number;
  /** Non-2xx answers, broken connections, and requests unanswered at the end. */
  readonly failures: number;
  /** Answers per second over the run (from the first due time to the last answer). */
  readonly achievedRate: number;
  /** Latency from each request's intended send time, ms, sorted ascending (every answer, 2xx or not). */
  readonly latencies: Float64Array;
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
  /**
   * How late the generator's loop got to each due request (then sent on a free connection, or
   * queued when none was free), ms, p99.9 and max: its own event-loop delays (GC, CPU taken by
   * other processes). Part of every latency above; when it is near the p99.9, the tail is the
   * generator's and the machine's, not the server's.
   */
  readonly sendLagP999: number;
  readonly sendLagMax: number;
}

/** The value at percentile `p` (0-100) of ascending `sorted`: the smallest with at least p% at or below it. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  // Rounded first so 99.9% of 1,000 is 999, not 999.0000000000001 (which would ceil to 1,000).
  const rank = Math.ceil(Math.round((p / 100) * sorted.length * 1e6) / 1e6);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? Number.NaN;
}

/** How many of the requests spaced `intervalMs` apart from time 0 are due at `elapsedMs` (request 0 is due at once). */
export function dueCount(elapsedMs: number, intervalMs: number, total: number): number {
  if (elapsedMs < 0) return 0;
  return Math.min(total, Math.floor(elapsedMs / intervalMs) + 1);
}

const HEADER_END = Buffer.from('\r\n\r\n');

/** One keep-alive connection, reading one answer at a time. */
class Connection {
  private pending: Buffer = Buffer.alloc(0);
  private bodyLeft = -1;
  private status = 0;
  /** Intended time of the request in flight, or undefined when idle. */
  inFlight: number | undefined;
  readonly socket: Socket;
  private readonly answered: (connection: Connection, intended: number, status: number) => void;

  constructor(socket: Socket, answered: (connection: Connection, intended: number, status: number) => void) {
    this.socket = socket;
    this.answered = answered;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.read(chunk));
  }

  private read(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    for (;;) {
      if (this.bodyLeft < 0) {
        const end = this.pending.indexOf(HEADER_END);
        if (end < 0) return;
        const head = this.pending.subarray(0, end).toString('latin1');
        this.status = Number(head.slice(9, 12));
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        // No length (chunked): not a framing this client reads; the status says failure.
        this.bodyLeft = length === null ? 0 : Number(length[1]);
        if (length === null) this.status = 0;
        this.pending = this.pending.subarray(end + HEADER_END.length);
      }
      if (this.pending.length < this.bodyLeft) return;
      this.pending = this.pending.subarray(this.bodyLeft);
      this.bodyLeft = -1;
      const intended = this.inFlight;
      this.inFlight = undefined;
      if (intended !== undefined) this.answered(this, intended, this.status);
    }
  }
}

function open(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** Runs one open-loop measurement; resolves once every due request is answered or given up on. */
export async function openLoop(options: OpenLoopOptions): Promise<OpenLoopResult> {
  const url = new URL(options.url);
  if (url.protocol !== 'http:') throw new Error(`open-loop: only http:// URLs, got ${options.url}`);
  const host = url.hostname;
  const port = Number(url.port || 80);
  const extra = Object.entries(options.headers ?? {}).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  const request = Buffer.from(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n${extra}\r\n`, 'latin1');
  const total = Math.round(options.rate * options.seconds);
  const interval = 1000 / options.rate;
  const latencies = new Float64Array(total);
  const lags = new Float64Array(total);
  let lagCount = 0;
  let answers = 0;
  let ok = 0;
  let failures = 0;
  let lastAnswer = 0;

  // Due requests no connection could take yet, as intended times (a FIFO with a moving head).
  const backlog: number[] = [];
  let backlogHead = 0;
  const idle: Connection[] = [];
  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const settled = () => answers + failures >= total;

  const send = (connection: Connection, intended: number) => {
    connection.inFlight = intended;
    connection.socket.write(request);
  };
  const answered = (connection: Connection, intended: number, status: number) => {
    const now = performance.now();
    latencies[answers++] = now - intended;
    lastAnswer = now;
    if (status >= 200 && status < 300) ok++;
    else failures++;
    if (backlogHead < backlog.length) send(connection, backlog[backlogHead++] as number);
    else idle.push(connection);
    if (settled()) finish();
  };
  const sockets = await Promise.all(Array.from({ length: options.connections }, () => open(host, port)));
  const connections = sockets.map((socket) => new Connection(socket, answered));
  for (const connection of connections) {
    // A broken connection fails its request; the rest of the run goes on over the others.
    connection.socket.on('close', () => {
      const index = idle.indexOf(connection);
      if (index >= 0) idle.splice(index, 1);
      if (connection.inFlight !== undefined) {
        connection.inFlight = undefined;
        failures++;
        if (settled()) finish();
      }
    });
    connection.socket.on('error', () => {});
    idle.push(connection);
  }

  const start = performance.now();
  let next = 0;
  const dispatch = (intended: number) => {
    // The generator's own lateness: how long after its due time this loop got to the request,
    // whether a connection was free or not. (Taken only at sends, it missed a stall of the
    // generator itself: most requests due meanwhile found every connection busy and queued.)
    lags[lagCount++] = performance.now() - intended;
    const connection = idle.pop();
    if (connection === undefined) backlog.push(intended);
    else send(connection, intended);
  };
  const tick = () => {
    const due = dueCount(performance.now() - start, interval, total);
    while (next < due) dispatch(start + next++ * interval);
    if (next >= total) return;
    // Sleep when the next request is more than a timer's granularity away; otherwise come back
    // after pending I/O (setImmediate), so answers are read between sends.
    const wait = start + next * interval - performance.now();
    if (wait > 2) setTimeout(tick, wait - 1);
    else setImmediate(tick);
  };
  const timers = (options.events ?? []).map((event) => setTimeout(event.run, event.atMs));
  tick();

  const drainMs = options.drainMs ?? 10_000;
  const giveUp = setTimeout(finish, options.seconds * 1000 + drainMs);
  await done;
  clearTimeout(giveUp);
  for (const timer of timers) clearTimeout(timer);
  for (const connection of connections) connection.socket.destroy();
  // Requests never answered (or never even sent) are failures with no latency to show.
  const unanswered = total - answers;
  const sorted = latencies.subarray(0, answers).sort();
  const sortedLags = lags.subarray(0, lagCount).sort();
  return {
    intended: total,
    ok,
    failures: total - ok,
    achievedRate: answers / (Math.max(lastAnswer - start, interval) / 1000),
    latencies: sorted,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    p999: percentile(sorted, 99.9),
    // An unanswered request waited at least the whole drain: max says so.
    max: unanswered > 0 ? Number.POSITIVE_INFINITY : (sorted[sorted.length - 1] ?? Number.NaN),
    sendLagP999: percentile(sortedLags, 99.9),
    sendLagMax: sortedLags[sortedLags.length - 1] ?? Number.NaN,
  };
}
