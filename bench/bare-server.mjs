// The baseline: plain node:http (HTTP/1.1) and node:http2 (h2c) servers replaying, byte for byte, the
// responses Provision gave to the benchmarked requests. Plain JavaScript so it loads nothing but Node.
// Usage: node bench/bare-server.mjs <replies.json> <http1 port> <h2c port>; prints "ready" when listening.
import fs from "node:fs";
import http from "node:http";
import http2 from "node:http2";

const [file, http1Port, h2cPort] = process.argv.slice(2);
/** { http1: { "<METHOD> <path>": reply }, h2c: { "<path>": { headers, body, trailers } } }; bodies in base64. */
const replies = JSON.parse(fs.readFileSync(file, "utf8"));
for (const table of [replies.http1, replies.h2c]) {
  for (const reply of Object.values(table)) reply.body = Buffer.from(reply.body, "base64");
}

const http1 = http.createServer((request, response) => {
  const reply = replies.http1[`${request.method} ${request.url}`] ?? replies.http1[`${request.method} *`];
  request.resume();
  request.once("end", () => {
    if (!reply) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(reply.status, { ...reply.headers, "content-length": reply.body.length });
    response.end(reply.body);
  });
});
http1.on("connection", (socket) => socket.setNoDelay(true));

const h2c = http2.createServer();
h2c.on("connection", (socket) => socket.setNoDelay(true));
h2c.on("stream", (stream, headers) => {
  const reply = replies.h2c[headers[":path"]];
  stream.resume();
  stream.once("end", () => {
    if (!reply) {
      stream.respond({ ":status": 404 }, { endStream: true });
      return;
    }
    stream.respond({ ":status": 200, ...reply.headers }, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers(reply.trailers));
    stream.end(reply.body);
  });
});

await Promise.all([
  new Promise((resolve) => http1.listen(Number(http1Port), "127.0.0.1", resolve)),
  new Promise((resolve) => h2c.listen(Number(h2cPort), "127.0.0.1", resolve)),
]);
process.stdout.write("ready\n");
process.on("SIGTERM", () => process.exit(0));
