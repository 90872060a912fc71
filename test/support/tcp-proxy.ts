import net from "node:net";

export interface TcpProxy {
  port: number;
  /** How many connections to it are open. */
  openConnections(): number;
  /** Cuts every proxied connection and resets each new one until `restore()`: the upstream is down. */
  refuse(): void;
  restore(): void;
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
  const server = net.createServer((client) => {
    if (refusing || toReset > 0) {
      if (!refusing) toReset--;
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    track(client);
    track(upstream);
    clients.add(client);
    client.once("close", () => clients.delete(client));
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
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
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
