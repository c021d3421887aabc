import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a real service, for fault injection without stopping the shared
 * service (other suites use it at the same time). Point the code under test at `proxy.url` /
 * `proxy.port` and then:
 *
 * - `cut()`: drop every open connection and refuse new ones (the service is "down");
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
  #mode: 'pass' | 'cut' | 'hang' = 'pass';
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

  delay(ms: number): void {
    this.#delayMs = ms;
  }

  restore(): void {
    this.#mode = 'pass';
    this.#delayMs = 0;
  }

  retarget(target: { host: string; port: number }): void {
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    this.#target = target;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
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
