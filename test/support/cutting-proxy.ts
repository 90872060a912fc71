import net from "node:net";

/**
 * A TCP proxy on loopback in front of MySQL that, once armed, loses the connection of the next transaction whose
 * query text contains every one of `marks`, at its COMMIT (in the same query or a later one): the COMMIT goes on to
 * the server, which runs it, and the client's side of the connection is closed before any answer comes back, as a
 * network failure between the two would. Armed with an outage instead, it is MySQL going down at that COMMIT: the
 * COMMIT never reaches the server (which rolls the transaction back), every connection is cut, and new ones are
 * refused for `outageMs`.
 */
export async function startCuttingProxy(target: { host: string; port: number }) {
  let armed: string[] | undefined;
  let outageMs = 0;
  let downUntil = 0;
  let cuts = 0;
  const sockets = new Set<net.Socket>();
  const goDown = () => {
    downUntil = Date.now() + outageMs;
    for (const socket of sockets) socket.destroy();
  };
  const server = net.createServer((client) => {
    if (Date.now() < downUntil) {
      client.destroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    let marked = false;
    let cutHere = false;
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {});
    }
    upstream.on("data", (chunk) => {
      if (!client.destroyed) client.write(chunk);
    });
    upstream.on("close", () => client.destroy());
    client.on("data", (chunk) => {
      const text = chunk.toString("latin1");
      if (armed?.every((mark) => text.includes(mark))) {
        armed = undefined;
        marked = true;
      }
      if (marked && text.includes("COMMIT") && outageMs > 0) {
        marked = false;
        cuts++;
        goDown();
        return;
      }
      upstream.write(chunk);
      if (marked && text.includes("COMMIT")) {
        marked = false;
        cuts++;
        cutHere = true;
        client.destroy();
        // The server finishes the query (its answers go nowhere) before it sees the connection end.
        setTimeout(() => upstream.end(), 1000).unref();
      }
    });
    client.on("close", () => {
      if (!cutHere) upstream.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    /** Cuts the COMMIT of the next transaction with a query containing every mark. */
    arm: (...marks: string[]) => {
      armed = marks;
      outageMs = 0;
    },
    /** Takes MySQL down for `ms` at the COMMIT of the next transaction with a query containing every mark. */
    armOutage: (ms: number, ...marks: string[]) => {
      armed = marks;
      outageMs = ms;
    },
    cuts: () => cuts,
    close: async (): Promise<void> => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export type CuttingProxy = Awaited<ReturnType<typeof startCuttingProxy>>;
