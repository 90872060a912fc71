// The webhook benchmark's endpoint: a plain node:http server on 127.0.0.1 (plain JavaScript, so it loads nothing
// but Node), run pinned to the load core. `POST /hook/<n>` is subscription n's endpoint: it checks the signature
// with secret n, echoes registration challenges signed as the spec asks, answers everything else 204, and records
// each arrival (when its whole body is in) on the monotonic clock shared by every process (process.hrtime).
// Control: `GET /healthz`, `GET /count`, `GET /figures`, `POST /reset`.
// Usage: node bench/webhook-receiver-process.mjs <port> '<JSON list of whsec_ secrets>'
import { createHmac, timingSafeEqual } from "node:crypto";
import http from "node:http";

const [port, secretsJson] = process.argv.slice(2);
const keys = JSON.parse(secretsJson).map((secret) => Buffer.from(secret.slice("whsec_".length), "base64"));
const CHALLENGE = "Webhooks.Registration.Challenge";

let figures = emptyFigures();

function emptyFigures() {
  return {
    received: 0,
    badSignatures: 0,
    challenges: 0,
    /** `<n> <webhook-id>` of every delivery: a second arrival of one is a duplicate. */
    seen: new Set(),
    duplicates: 0,
    /** Milliseconds on the monotonic clock. */
    arrivals: [],
    /** Arrival of the first delivery whose `data.numberOfSeats` is this, by that value. */
    bySeats: {},
  };
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

function sign(key, id, timestamp, body) {
  return createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest("base64");
}

function signedBy(key, headers, body) {
  const expected = Buffer.from(`v1,${sign(key, headers["webhook-id"], headers["webhook-timestamp"], body)}`);
  return String(headers["webhook-signature"] ?? "")
    .split(" ")
    .some((entry) => entry.length === expected.length && timingSafeEqual(Buffer.from(entry), expected));
}

function record(index, headers, body, arrivedMs) {
  figures.received++;
  figures.arrivals.push(arrivedMs);
  const key = keys[index];
  if (!key || !signedBy(key, headers, body)) figures.badSignatures++;
  const delivery = `${index} ${headers["webhook-id"]}`;
  if (figures.seen.has(delivery)) figures.duplicates++;
  figures.seen.add(delivery);
  const envelope = parsed(body);
  const seats = envelope.data?.numberOfSeats;
  if (seats !== undefined && figures.bySeats[seats] === undefined) figures.bySeats[seats] = arrivedMs;
  return envelope;
}

function parsed(body) {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    return {};
  }
}

/** The registration challenge's reply: the echo, signed over `{request id}.{request timestamp}.{reply body}`. */
function challengeReply(key, headers, envelope) {
  const body = JSON.stringify({ challenge: envelope.data.challenge });
  const signature = `v1,${sign(key, headers["webhook-id"], headers["webhook-timestamp"], Buffer.from(body))}`;
  return { status: 200, headers: { "content-type": "application/json", "webhook-signature": signature }, body };
}

function answerHook(index, request, body, arrivedMs) {
  const envelope = record(index, request.headers, body, arrivedMs);
  if (envelope.type !== CHALLENGE || !keys[index]) return { status: 204 };
  figures.challenges++;
  return challengeReply(keys[index], request.headers, envelope);
}

function report() {
  const { seen, ...rest } = figures;
  return { ...rest, unique: seen.size };
}

function answerControl(request) {
  if (request.method === "GET" && request.url === "/healthz") return { status: 200 };
  if (request.method === "GET" && request.url === "/count") return json({ received: figures.received });
  if (request.method === "GET" && request.url === "/figures") return json(report());
  if (request.method === "POST" && request.url === "/reset") {
    figures = emptyFigures();
    return { status: 204 };
  }
  return { status: 404 };
}

function json(value) {
  return { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify(value) };
}

const server = http.createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const arrivedMs = nowMs();
    const hook = /^\/hook\/(\d+)$/.exec(request.url ?? "");
    const answer =
      request.method === "POST" && hook
        ? answerHook(Number(hook[1]), request, Buffer.concat(chunks), arrivedMs)
        : answerControl(request);
    response.writeHead(answer.status, answer.headers ?? {});
    response.end(answer.body ?? "");
  });
});
server.on("connection", (socket) => socket.setNoDelay(true));
server.keepAliveTimeout = 60_000;

await new Promise((resolve) => server.listen(Number(port), "127.0.0.1", resolve));
process.stdout.write("ready\n");
process.on("SIGTERM", () => process.exit(0));
