import net from "node:net";
import test from "ava";
import { startTestServer } from "../support/test-server.js";

test("a connection reset before its first byte does not bring the server down", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.close());
  for (let attempt = 0; attempt < 5; attempt++) {
    const socket = net.connect(server.port, "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.resetAndDestroy();
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
  const health = await fetch(`${server.baseUrl}/healthz`);
  t.is(health.status, 200);
});

test("a connection reset in the middle of a request does not bring the server down", async (t) => {
  const server = await startTestServer();
  t.teardown(() => server.close());
  const socket = net.connect(server.port, "127.0.0.1");
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  socket.write("POST /api/v1/provision/admin/assets/products HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{");
  await new Promise((resolve) => setTimeout(resolve, 50));
  socket.resetAndDestroy();
  const preface = net.connect(server.port, "127.0.0.1");
  await new Promise<void>((resolve) => preface.once("connect", () => resolve()));
  preface.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  preface.resetAndDestroy();
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.is((await fetch(`${server.baseUrl}/healthz`)).status, 200);
});
