/**
 * A gRPC load generator in its own process (stock grpc-js, one HTTP/2 connection): calls one unary method for a
 * number of seconds, either one call at a time or with `streams` calls in flight, and prints its figures as
 * JSON. Messages are sent and taken as raw bytes, so both servers cost the client the same.
 * Usage: node --import tsx bench/grpc-load.ts '<json options>'
 */
import * as grpc from "@grpc/grpc-js";

interface Options {
  address: string;
  path: string;
  /** The request message, base64. */
  message: string;
  authorization: string;
  streams: number;
  seconds: number;
  warmupSeconds: number;
}

const options = JSON.parse(process.argv[2] ?? "{}") as Options;
const message = Buffer.from(options.message, "base64");
const identity = (bytes: Buffer) => bytes;
const Client = grpc.makeGenericClientConstructor(
  {
    call: {
      path: options.path,
      requestStream: false,
      responseStream: false,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    },
  },
  "Bench",
);
const client = new Client(options.address, grpc.credentials.createInsecure());
const metadata = new grpc.Metadata();
metadata.set("authorization", options.authorization);

type UnaryCall = (request: Buffer, metadata: grpc.Metadata, done: (error: grpc.ServiceError | null) => void) => void;
const unary = (client as unknown as { call: UnaryCall }).call.bind(client);

function call(): Promise<void> {
  return new Promise((resolve, reject) => unary(message, metadata, (error) => (error ? reject(error) : resolve())));
}

async function drive(seconds: number): Promise<{ latencies: number[]; failures: number; elapsed: number }> {
  const latencies: number[] = [];
  let failures = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: options.streams }, async () => {
      while (performance.now() < deadline) {
        const begin = performance.now();
        try {
          await call();
          latencies.push(performance.now() - begin);
        } catch {
          failures++;
        }
      }
    }),
  );
  return { latencies, failures, elapsed: (performance.now() - started) / 1000 };
}

await drive(options.warmupSeconds);
const { latencies, failures, elapsed } = await drive(options.seconds);
latencies.sort((a, b) => a - b);
const percentile = (p: number) => Number((latencies[Math.floor(p * (latencies.length - 1))] ?? Number.NaN).toFixed(3));
client.close();
process.stdout.write(
  `${JSON.stringify({
    requestsPerSecond: Math.round(latencies.length / elapsed),
    p50Ms: percentile(0.5),
    p99Ms: percentile(0.99),
    failures,
  })}\n`,
);
