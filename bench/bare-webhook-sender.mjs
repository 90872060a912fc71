// The webhook rows' baseline: a plain node:http client (plain JavaScript, run pinned to the server core) sending
// the receiver what Provision sends, signed the same way (a fresh id, timestamp and HMAC per delivery, the same
// headers, keep-alive connections), with no database behind it: what the machine and the receiver allow.
// `burst`: `count` deliveries round-robin over the subscriptions' endpoints, `concurrency` at a time.
// `paced`: one delivery every 1/rate s to endpoint 0, its `data.numberOfSeats` a sequence number from `firstSeats`.
// Both warm up first, then reset the receiver's figures, then measure. Prints one JSON line: `startedMs` (when
// the measured part began, on the monotonic clock the receiver records arrivals on) and, when paced, `sentMs` by
// sequence number (when each delivery was due).
// Usage: node bench/bare-webhook-sender.mjs '<JSON options>'
import { createHmac, randomUUID } from "node:crypto";
import http from "node:http";

const options = JSON.parse(process.argv[2]);
const { receiverUrl, secrets, payload, templateId } = options;
const keys = secrets.map((secret) => Buffer.from(secret.slice("whsec_".length), "base64"));
const agent = new http.Agent({ keepAlive: true });
const eventType = JSON.parse(payload).type;
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

/** The template's envelope with a new id, and `numberOfSeats` set when given. */
function bodyOf(id, seats) {
  if (seats === undefined) return Buffer.from(payload.replace(templateId, id));
  const envelope = JSON.parse(payload);
  envelope.id = id;
  envelope.data.numberOfSeats = seats;
  return Buffer.from(JSON.stringify(envelope));
}

function send(index, seats) {
  const id = randomUUID();
  const body = bodyOf(id, seats);
  const timestamp = `${new Date().toISOString().slice(0, 19)}Z`;
  const signature = createHmac("sha256", keys[index]).update(`${id}.${timestamp}.`).update(body).digest("base64");
  const headers = {
    "content-type": "application/cloudevents+json; charset=utf-8",
    "user-agent": "bare-webhook-sender",
    "webhook-id": id,
    "webhook-timestamp": timestamp,
    "webhook-signature": `v1,${signature}`,
    "webhook-event-type": eventType,
    "webhook-delivery-attempt": "1",
    "content-length": String(body.length),
  };
  return post(`/hook/${index}`, headers, body);
}

function post(path, headers, body) {
  return new Promise((resolve, reject) => {
    const request = http.request(`${receiverUrl}${path}`, { method: "POST", headers, agent }, (response) => {
      response.resume();
      response.once("end", () => resolve(response.statusCode));
    });
    request.setNoDelay(true);
    request.once("error", reject);
    request.end(body);
  });
}

async function burst(count) {
  let next = 0;
  const worker = async () => {
    while (next < count) await send(next++ % keys.length);
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
}

/** Sends at `rate` per second (open loop) for `seconds`; answers when each was due, by sequence number. */
function paced(firstSeats, seconds) {
  const total = Math.round(options.rate * seconds);
  const sentMs = {};
  const sending = [];
  return new Promise((resolve) => {
    const start = nowMs();
    const tick = () => {
      const due = Math.min(total, Math.floor(((nowMs() - start) * options.rate) / 1000) + 1);
      for (let index = sending.length; index < due; index++) {
        sentMs[firstSeats + index] = start + (index * 1000) / options.rate;
        sending.push(send(0, firstSeats + index));
      }
      if (sending.length < total) setTimeout(tick, 1);
      else Promise.all(sending).then(() => resolve(sentMs));
    };
    tick();
  });
}

const reset = () => post("/reset", {}, Buffer.alloc(0));
if (options.mode === "burst") {
  await burst(options.warmupCount);
  await reset();
  const startedMs = nowMs();
  await burst(options.count);
  process.stdout.write(`${JSON.stringify({ startedMs })}\n`);
} else {
  await paced(options.firstSeats - Math.round(options.rate * options.warmupSeconds), options.warmupSeconds);
  await reset();
  const startedMs = nowMs();
  const sentMs = await paced(options.firstSeats, options.seconds);
  process.stdout.write(`${JSON.stringify({ startedMs, sentMs })}\n`);
}
agent.destroy();
