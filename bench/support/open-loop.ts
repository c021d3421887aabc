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
// It reads bodies framed as RFC 9112 6.3 says: by Content-Length, chunked, or up to the end of the
// connection. It keeps `connections` sockets open for the whole run: one the server closes is
// replaced by a new one, so servers that close keep-alive connections can be measured too (Tomcat
// answers the 100th request on a connection with `Connection: close` and closes it, Leaf's and
// TinyId's default; others close idle ones). A request on a connection that closes before its
// answer is a failure; the replacement's connect time is part of the latencies of the requests
// that wait for it, as it would be for a real client.
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
  /**
   * Latency from each request's intended send time, ms, sorted ascending (every answer, 2xx or
   * not).
   */
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
  /**
   * Connections opened during the run to replace ones that closed (the server's choice, or a broken
   * one).
   */
  readonly reconnects: number;
}

/**
 * The value at percentile `p` (0-100) of ascending `sorted`: the smallest with at least p% at or
 * below it.
 */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  // Rounded first so 99.9% of 1,000 is 999, not 999.0000000000001 (which would ceil to 1,000).
  const rank = Math.ceil(Math.round((p / 100) * sorted.length * 1e6) / 1e6);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? Number.NaN;
}

/**
 * How many of the requests spaced `intervalMs` apart from time 0 are due at `elapsedMs` (request 0
 * is due at once).
 */
export function dueCount(elapsedMs: number, intervalMs: number, total: number): number {
  if (elapsedMs < 0) return 0;
  return Math.min(total, Math.floor(elapsedMs / intervalMs) + 1);
}

const HEADER_END = Buffer.from('\r\n\r\n');
const LINE_END = Buffer.from('\r\n');

/** Where the reader of a connection is in the answer it reads. */
type ReadState = 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'trailers' | 'until-close';

/** Told of each whole answer: its status, and whether the connection may carry another request. */
type Answered = (
  connection: Connection,
  intended: number,
  status: number,
  reusable: boolean,
) => void;

/** One keep-alive connection, reading one answer at a time. */
class Connection {
  #pending: Buffer = Buffer.alloc(0);
  #state: ReadState = 'head';
  /** Body bytes still to come (`length`), or the rest of a chunk with its CRLF (`chunk-data`). */
  #left = 0;
  #status = 0;
  #reusable = true;
  /** Intended time of the request in flight, or undefined when idle. */
  inFlight: number | undefined;
  readonly socket: Socket;
  readonly #answered: Answered;

  constructor(socket: Socket, answered: Answered) {
    this.socket = socket;
    this.#answered = answered;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#read(chunk));
  }

  /**
   * The socket has closed: an answer whose body runs to the end of the connection is whole now
   * (true). Any other answer in flight is lost (false).
   */
  closed(): boolean {
    if (this.#state !== 'until-close' || this.inFlight === undefined) return false;
    this.#done();
    return true;
  }

  #read(chunk: Buffer): void {
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    for (;;) {
      switch (this.#state) {
        case 'head': {
          const end = this.#pending.indexOf(HEADER_END);
          if (end < 0) return;
          this.#head(this.#pending.subarray(0, end).toString('latin1'));
          this.#pending = this.#pending.subarray(end + HEADER_END.length);
          // An interim answer (1xx) is followed by the final one; 204 and 304 have no body.
          if (this.#state === 'head' && !(this.#status >= 100 && this.#status < 200)) this.#done();
          break;
        }
        case 'length':
          if (this.#pending.length < this.#left) return;
          this.#pending = this.#pending.subarray(this.#left);
          this.#done();
          break;
        case 'chunk-size': {
          const end = this.#pending.indexOf(LINE_END);
          if (end < 0) return;
          // The size in hex, before any `;extension`.
          const size = Number.parseInt(
            this.#pending.subarray(0, end).toString('latin1').split(';')[0] ?? '',
            16,
          );
          this.#pending = this.#pending.subarray(end + LINE_END.length);
          if (!(size >= 0)) {
            this.#broken();
            return;
          }
          this.#left = size + LINE_END.length;
          this.#state = size === 0 ? 'trailers' : 'chunk-data';
          break;
        }
        case 'chunk-data':
          if (this.#pending.length < this.#left) return;
          this.#pending = this.#pending.subarray(this.#left);
          this.#state = 'chunk-size';
          break;
        case 'trailers': {
          // Trailer fields, if any, then the empty line that ends the message.
          const end = this.#pending.indexOf(LINE_END);
          if (end < 0) return;
          this.#pending = this.#pending.subarray(end + LINE_END.length);
          if (end === 0) this.#done();
          break;
        }
        case 'until-close':
          this.#pending = Buffer.alloc(0);
          return;
      }
    }
  }

  /** Reads a status line and header fields, and sets how the body ends. */
  #head(head: string): void {
    const version = head.slice(0, 8);
    this.#status = Number(head.slice(9, 12));
    const connection = /\r\nconnection:[ \t]*([^\r]*)/i.exec(head)?.[1]?.toLowerCase() ?? '';
    // HTTP/1.1 keeps the connection unless the server says close; HTTP/1.0 only if it says
    // keep-alive.
    this.#reusable =
      version === 'HTTP/1.1' ? !/\bclose\b/.test(connection) : /\bkeep-alive\b/.test(connection);
    const length = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
    const noBody =
      this.#status === 204 || this.#status === 304 || (this.#status >= 100 && this.#status < 200);
    if (noBody) this.#state = 'head';
    else if (/\r\ntransfer-encoding:[^\r]*\bchunked\b/i.test(head)) this.#state = 'chunk-size';
    else if (length !== null) {
      this.#left = Number(length[1]);
      this.#state = 'length';
    } else {
      this.#reusable = false;
      this.#state = 'until-close';
    }
  }

  #done(): void {
    this.#state = 'head';
    const intended = this.inFlight;
    this.inFlight = undefined;
    if (intended !== undefined) this.#answered(this, intended, this.#status, this.#reusable);
  }

  /**
   * An answer this client cannot read: the connection is dropped (its request is lost) and
   * replaced.
   */
  #broken(): void {
    this.#pending = Buffer.alloc(0);
    this.socket.destroy();
  }
}

function connectTo(host: string, port: number): Promise<Socket> {
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
  const extra = Object.entries(options.headers ?? {})
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  const request = Buffer.from(
    `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n${extra}\r\n`,
    'latin1',
  );
  const total = Math.round(options.rate * options.seconds);
  const interval = 1000 / options.rate;
  const latencies = new Float64Array(total);
  const lags = new Float64Array(total);
  let lagCount = 0;
  let answers = 0;
  let ok = 0;
  let lastAnswer = 0;

  // Due requests no connection could take yet, as intended times (a FIFO with a moving head).
  const backlog: number[] = [];
  let backlogHead = 0;
  const idle: Connection[] = [];
  /** The connections open now, to close at the end. */
  const open = new Set<Connection>();
  /** Requests whose connection closed before their answer came. */
  let lost = 0;
  let reconnects = 0;
  let finished = false;
  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    finish = () => {
      finished = true;
      resolve();
    };
  });
  const settled = () => answers + lost >= total;

  const send = (connection: Connection, intended: number) => {
    connection.inFlight = intended;
    connection.socket.write(request);
  };
  /** A connection free for a request: the oldest waiting one, or the idle list. */
  const ready = (connection: Connection) => {
    if (backlogHead < backlog.length) send(connection, backlog[backlogHead++] as number);
    else idle.push(connection);
  };
  const answered = (
    connection: Connection,
    intended: number,
    status: number,
    reusable: boolean,
  ) => {
    const now = performance.now();
    latencies[answers++] = now - intended;
    lastAnswer = now;
    if (status >= 200 && status < 300) ok++;
    // `Connection: close` (or a body that ended with the connection): closing it brings a new one.
    if (reusable) ready(connection);
    else connection.socket.destroy();
    if (settled()) finish();
  };
  const adopt = (socket: Socket): Connection => {
    const connection = new Connection(socket, answered);
    open.add(connection);
    socket.on('error', () => {});
    // Whoever closed it (the server after its last answer, an idle timeout, a reset), the run goes
    // on with as many connections as it started with.
    socket.on('close', () => {
      open.delete(connection);
      const index = idle.indexOf(connection);
      if (index >= 0) idle.splice(index, 1);
      if (!connection.closed() && connection.inFlight !== undefined) {
        connection.inFlight = undefined;
        lost++;
        if (settled()) finish();
      }
      if (!finished) replace();
    });
    return connection;
  };
  const replace = () => {
    if (finished) return;
    connectTo(host, port).then(
      (socket) => {
        if (finished) {
          socket.destroy();
          return;
        }
        reconnects++;
        ready(adopt(socket));
      },
      // Refused or reset (the server restarting): try again shortly; waiting requests age
      // meanwhile.
      () => setTimeout(replace, 50).unref(),
    );
  };
  const sockets = await Promise.all(
    Array.from({ length: options.connections }, () => connectTo(host, port)),
  );
  for (const socket of sockets) idle.push(adopt(socket));

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
  for (const connection of open) connection.socket.destroy();
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
    reconnects,
  };
}
