import net from "node:net";

export interface TcpProxy {
  port: number;
  /** How many connections to it are open. */
  openConnections(): number;
  /** Cuts every proxied connection and resets each new one until `restore()`: the upstream is down. */
  refuse(): void;
  restore(): void;
  /**
   * Passes nothing either way and holds each new connection unanswered until `resume()`: the upstream gone
   * silent (a network partition), with no reset to tell the client.
   */
  stall(): void;
  /**
   * Ends a stall; with `oldConnectionsStaySilent`, only for connections made from now on: those open before stay
   * silent for good, as a NAT or load balancer that lost their entries without a reset would leave them.
   */
  resume(options?: { oldConnectionsStaySilent?: boolean }): void;
  /** Stops accepting and cuts every proxied connection, as if the upstream went away. */
  close(): Promise<void>;
}

/**
 * A TCP proxy on an ephemeral port of 127.0.0.1 that pipes each connection to `target`; the first `resetFirst`
 * connections are reset (TCP RST) as soon as they arrive, as a server too busy to answer them would.
 */
export async function startTcpProxy(
  target: { host: string; port: number },
  { resetFirst = 0 } = {},
): Promise<TcpProxy> {
  let toReset = resetFirst;
  const sockets = new Set<net.Socket>();
  const clients = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
  };
  let refusing = false;
  let stalled = false;
  const pairs = new Set<[net.Socket, net.Socket]>();
  const held: net.Socket[] = [];
  const connect = (client: net.Socket) => {
    const upstream = net.connect(target.port, target.host);
    track(client);
    track(upstream);
    clients.add(client);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    client.once("close", () => clients.delete(client));
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
    upstream.once("close", () => pairs.delete(pair));
    client.pipe(upstream);
    upstream.pipe(client);
  };
  const server = net.createServer((client) => {
    if (refusing || toReset > 0) {
      if (!refusing) toReset--;
      client.resetAndDestroy();
      return;
    }
    if (stalled) {
      track(client);
      held.push(client);
      return;
    }
    connect(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    openConnections: () => clients.size,
    refuse() {
      refusing = true;
      for (const socket of sockets) socket.destroy();
    },
    restore() {
      refusing = false;
    },
    stall() {
      if (stalled) return;
      stalled = true;
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    resume({ oldConnectionsStaySilent = false } = {}) {
      if (!stalled) return;
      stalled = false;
      if (oldConnectionsStaySilent) pairs.clear();
      for (const [client, upstream] of pairs) {
        client.pipe(upstream);
        upstream.pipe(client);
      }
      for (const client of held.splice(0)) if (!client.destroyed) connect(client);
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
