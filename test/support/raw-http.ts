import { connect, type Socket } from 'node:net';

/** An HTTP/1.1 response read off a raw socket. */
export interface RawResponse {
  readonly statusCode: number;
  /** Header names in lower case. */
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** What a one-shot exchange saw: the bytes, how the connection ended, and when. */
export interface RawExchange {
  readonly text: string;
  /** The server closed the connection (FIN or reset) within the wait. */
  readonly closed: boolean;
  /** A socket error (ECONNRESET, EPIPE), if any. */
  readonly error: string | undefined;
  /** ms from the first write to the close (or to the end of the wait). */
  readonly ms: number;
}

/**
 * Opens a connection to `url`, writes `data` (chunks written in turn), and collects everything
 * until the server closes the connection or `waitMs` passes. For requests no HTTP client would
 * send: malformed framing, stalled bodies, CONNECT.
 */
export function rawExchange(
  url: string,
  data: string | readonly string[],
  waitMs = 3000,
): Promise<RawExchange> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let text = '';
    let error: string | undefined;
    let started = 0;
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed, error, ms: Date.now() - started });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    socket.on('error', (e: NodeJS.ErrnoException) => {
      error = e.code ?? e.message;
    });
    socket.on('close', () => finish(true));
    socket.once('connect', () => {
      started = Date.now();
      for (const chunk of [data].flat()) socket.write(chunk);
    });
  });
}

/** Parses one complete response (Content-Length framed, or none for a bodiless one). */
export function parseResponse(text: string): RawResponse {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) throw new Error(`no complete response head in ${JSON.stringify(text)}`);
  const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
  const status = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine);
  if (status === null)
    throw new Error(`not an HTTP/1.1 status line: ${JSON.stringify(statusLine)}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  const body = text.slice(end + 4, end + 4 + length);
  if (Buffer.byteLength(body, 'latin1') !== length)
    throw new Error(`body shorter than Content-Length ${length}: ${JSON.stringify(text)}`);
  return { statusCode: Number(status[1]), headers, body };
}

/**
 * One keep-alive connection driven by hand, one request at a time, that records exactly how the
 * server treated it: every response complete or not, and whether the connection ended cleanly
 * (FIN after a `Connection: close` response) or was reset.
 */
export class RawConnection {
  readonly socket: Socket;
  /** Socket errors seen (ECONNRESET when the server reset the connection). */
  readonly errors: string[] = [];
  /** True once the server has closed its side. */
  ended = false;
  #buffer = '';
  #waiter: { resolve: (response: RawResponse) => void; reject: (error: Error) => void } | undefined;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#buffer += chunk.toString('latin1');
      this.#deliver();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      this.errors.push(error.code ?? error.message);
      this.#fail(
        `the connection failed before the response was complete (${error.code ?? error.message})`,
      );
    });
    socket.on('end', () => {
      this.ended = true;
      this.#fail('the server closed the connection before the response was complete');
    });
    socket.on('close', () => {
      this.ended = true;
      this.#fail(
        `the connection closed before the response was complete ` +
          `(${this.errors.join(', ') || 'no error'})`,
      );
    });
  }

  static open(url: string): Promise<RawConnection> {
    const { hostname, port } = new URL(url);
    const socket = connect({ host: hostname, port: Number(port) });
    return new Promise((resolve, reject) => {
      socket.once('connect', () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  /** Sends a GET and resolves with its complete response; rejects if the connection ends first. */
  get(path: string): Promise<RawResponse> {
    if (this.#waiter !== undefined) throw new Error('one request at a time');
    // A request on a connection the server has closed would never be answered.
    if (this.ended)
      return Promise.reject(
        new Error('the server had closed the connection before the request was sent'),
      );
    const response = new Promise<RawResponse>((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: idmint\r\n\r\n`);
    return response;
  }

  /** Resolves when the server has closed the connection. */
  closed(): Promise<void> {
    if (this.socket.closed) return Promise.resolve();
    return new Promise((resolve) => this.socket.once('close', () => resolve()));
  }

  #deliver(): void {
    const end = this.#buffer.indexOf('\r\n\r\n');
    if (end < 0 || this.#waiter === undefined) return;
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(this.#buffer.slice(0, end))?.[1] ?? 0);
    if (this.#buffer.length < end + 4 + length) return;
    const response = parseResponse(this.#buffer.slice(0, end + 4 + length));
    this.#buffer = this.#buffer.slice(end + 4 + length);
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter.resolve(response);
  }

  #fail(reason: string): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.reject(new Error(reason));
  }
}
