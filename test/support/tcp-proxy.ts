import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a real service, for fault injection without stopping the shared
 * service (other suites use it at the same time). Point the code under test at `proxy.url` /
 * `proxy.port` and then:
 *
 * - `cut()`: drop every open connection and close new ones as they come (the service is "down");
 * - `refuse()`: drop every open connection and stop listening, so the system refuses new ones
 *   (ECONNREFUSED: the service's process is gone); `restore()` listens on the same port again;
 * - `hang()`: keep connections open but stop forwarding (a black hole: requests time out);
 * - `delay(ms)`: forward, with each chunk held back `ms`;
 * - `restore()`: back to normal for new and (after hang/delay) existing connections;
 * - `retarget(target)`: drop every open connection and send new ones to another server, as a
 *   virtual IP or a pooler does when a replica is promoted in place of a dead primary.
 */
export class TcpProxy {
  #target: { host: string; port: number };
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #mode: 'pass' | 'cut' | 'hang' | 'refuse' = 'pass';
  #delayMs = 0;
  port = 0;

  private constructor(target: { host: string; port: number }) {
    this.#target = target;
    this.#server = createServer((client) => this.#accept(client));
  }

  /** Starts a proxy on an ephemeral loopback port forwarding to `target`. */
  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    const address = proxy.#server.address();
    proxy.port = typeof address === 'object' && address !== null ? address.port : 0;
    return proxy;
  }

  /** `host:port` of the proxy. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  cut(): void {
    this.#mode = 'cut';
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
  }

  hang(): void {
    this.#mode = 'hang';
  }

  async refuse(): Promise<void> {
    if (this.#mode === 'refuse') return;
    this.cut();
    this.#mode = 'refuse';
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  delay(ms: number): void {
    this.#delayMs = ms;
  }

  /** Back to forwarding; after refuse(), resolves once the port listens again. */
  async restore(): Promise<void> {
    const refused = this.#mode === 'refuse';
    this.#mode = 'pass';
    this.#delayMs = 0;
    if (refused)
      await new Promise<void>((resolve) => this.#server.listen(this.port, '127.0.0.1', resolve));
  }

  retarget(target: { host: string; port: number }): void {
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    this.#target = target;
  }

  async close(): Promise<void> {
    const listening = this.#mode !== 'refuse';
    this.cut();
    if (listening) await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: Socket): void {
    if (this.#mode === 'cut') {
      client.destroy();
      return;
    }
    const upstream = connect(this.#target);
    this.#sockets.add(client);
    this.#sockets.add(upstream);
    const forward = (from: Socket, to: Socket) => {
      from.on('data', (chunk: Buffer) => {
        if (this.#mode === 'hang') return; // swallowed: the peer waits forever
        if (this.#delayMs > 0) setTimeout(() => to.write(chunk), this.#delayMs);
        else to.write(chunk);
      });
    };
    forward(client, upstream);
    forward(upstream, client);
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.#sockets.delete(client);
      this.#sockets.delete(upstream);
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  }
}
