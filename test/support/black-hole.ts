import { createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP server that accepts connections and never answers: a database or coordinator that is
 * "up" to the network but hangs (an overloaded server, a half-dead proxy, a firewall that
 * swallows packets after the handshake). Point a backend URL at `address` and every request
 * waits forever unless idmint bounds it.
 */
export class BlackHole {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  /** Connections accepted so far, open or not. */
  accepted = 0;
  port = 0;

  private constructor() {
    this.#server = createServer((socket) => {
      this.accepted++;
      this.#sockets.add(socket);
      socket.on('data', () => undefined); // read and drop: the peer's writes never block
      socket.on('error', () => undefined);
      socket.on('close', () => this.#sockets.delete(socket));
    });
  }

  static async start(): Promise<BlackHole> {
    const hole = new BlackHole();
    await new Promise<void>((resolve) => hole.#server.listen(0, '127.0.0.1', resolve));
    const address = hole.#server.address();
    hole.port = typeof address === 'object' && address !== null ? address.port : 0;
    return hole;
  }

  /** `127.0.0.1:<port>`. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Connections the peer still holds open. */
  get open(): number {
    return this.#sockets.size;
  }

  /** Resolves once the peer has closed every connection, or rejects after `timeoutMs`. */
  async whenAllClosed(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.#sockets.size > 0) {
      if (Date.now() > deadline)
        throw new Error(`${this.#sockets.size} connection(s) still open after ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
