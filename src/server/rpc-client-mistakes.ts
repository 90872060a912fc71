import { Code, type ConnectError } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { createAsyncIterable, readAllBytes } from "@connectrpc/connect/protocol";
import { codeToString, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { DomainError } from "../platform/errors.js";
import { toConnectError } from "./error-interceptor.js";

/**
 * What connect-node reports as `internal` although the request was at fault: a message that is not valid
 * protobuf (or not valid UTF-8 in a string field), a compressed message without an encoding to undo it, a body
 * that does not decompress. These errors arise while the request is read, before any interceptor runs, and
 * carry no cause to tell them by; their messages are all there is.
 */
const CLIENT_MISTAKES = [
  /^parse binary: /,
  /^received compressed envelope, but do not know how to decompress$/,
  /^decompression failed$/,
];
const INTERNAL = String(Code.Internal);
const INVALID_ARGUMENT = String(Code.InvalidArgument);
const GRPC_DETAILS = "grpc-status-details-bin";
const RESOURCE_EXHAUSTED = String(Code.ResourceExhausted);
/** connect-node's refusal of a body over `readMaxBytes` (BODY_LIMIT_BYTES), read before any interceptor runs. */
const OVERSIZE = /is larger than configured readMaxBytes (\d+)( after decompression)?$/;

export function isClientMistake(message: string): boolean {
  return CLIENT_MISTAKES.some((pattern) => pattern.test(message));
}

/** A client mistake's error: `invalid_argument` with the ProblemDetails every other error carries. */
function malformed(message: string): ConnectError {
  return toConnectError(new DomainError("invalid-argument", message, { slug: "malformed-request" }));
}

/**
 * The error a body over the limit is answered with: `resource_exhausted` with the ProblemDetails every other
 * error carries (`body-too-large`), as REST answers it 413; undefined for any other message.
 */
function oversize(message: string): ConnectError | undefined {
  const limit = OVERSIZE.exec(message)?.[1];
  if (limit === undefined) return undefined;
  return toConnectError(new DomainError("too-large", `the body exceeds ${limit} bytes`, { slug: "body-too-large" }));
}

/**
 * Wraps one RPC's handler so that a client mistake is `invalid_argument` (HTTP 400, gRPC status 3) on every
 * protocol with the `malformed-request` ProblemDetails, a body over the limit carries its ProblemDetails, and the empty 415 and 405 connect-node answers carry
 * a Connect error body.
 */
export function answeringClientMistakes(handler: UniversalHandler): UniversalHandler {
  const wrapped = async (request: Parameters<UniversalHandler>[0]) => reclassify(await handler(request));
  return Object.assign(wrapped, handler);
}

async function reclassify(response: UniversalServerResponse): Promise<UniversalServerResponse> {
  if (response.status === 415) {
    return connectError(415, Code.InvalidArgument, "unsupported content type for this procedure");
  }
  if (response.status === 405) {
    const answer = connectError(405, Code.Unimplemented, "this procedure is called with POST");
    answer.header?.set("Allow", "POST");
    return answer;
  }
  if (response.trailer) {
    reclassifyGrpcStatus(response.trailer);
    return response;
  }
  const contentType = response.header?.get("content-type") ?? "";
  const connectUnaryError = response.status === 500 || response.status === 429 || response.status === 400;
  if (connectUnaryError && contentType === "application/json" && !response.header?.has("content-encoding")) {
    return reclassifyConnectUnary(response);
  }
  if (contentType.startsWith("application/grpc-web")) return reclassifyGrpcWeb(response);
  return response;
}

/**
 * Sets gRPC status 3 in place of 13 when the message names a client mistake, the malformed-request details on a
 * status 3 without any (connect-node's: a message that does not decode), and a body over the limit's error with
 * its details; true when it changed the trailer.
 */
function reclassifyGrpcStatus(trailer: Headers): boolean {
  const status = trailer.get("grpc-status");
  const message = decodeURIComponent(trailer.get("grpc-message") ?? "");
  const tooLarge = status === RESOURCE_EXHAUSTED ? oversize(message) : undefined;
  if (tooLarge) {
    setTrailerStatus(trailer, tooLarge);
    return true;
  }
  const undecodable = status === INVALID_ARGUMENT && !trailer.has(GRPC_DETAILS);
  if (!undecodable && (status !== INTERNAL || !isClientMistake(message))) return false;
  setTrailerStatus(trailer, malformed(message));
  return true;
}

async function reclassifyConnectUnary(response: UniversalServerResponse): Promise<UniversalServerResponse> {
  const bytes = response.body ? await readAllBytes(response.body, Number.MAX_SAFE_INTEGER) : new Uint8Array(0);
  const error = parseConnectError(bytes);
  const tooLarge = error?.code === codeToString(Code.ResourceExhausted) ? oversize(error.message ?? "") : undefined;
  if (tooLarge) return withConnectError(response, response.status, errorToJsonBytes(tooLarge, {}));
  // Our own errors carry ProblemDetails; one without is connect-node's: a JSON message that does not decode.
  const undecodable = error?.code === codeToString(Code.InvalidArgument) && !error.details;
  const mistake = error?.code === codeToString(Code.Internal) && isClientMistake(error.message ?? "");
  if (!undecodable && !mistake) {
    return { ...response, body: createAsyncIterable([bytes]) };
  }
  return withConnectError(response, 400, errorToJsonBytes(malformed(error.message ?? ""), {}));
}

function withConnectError(response: UniversalServerResponse, status: number, text: Uint8Array) {
  response.header?.set("content-length", String(text.byteLength));
  return { ...response, status, body: createAsyncIterable([text]) };
}

function parseConnectError(bytes: Uint8Array): { code?: string; message?: string; details?: unknown } | undefined {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
}

/**
 * gRPC-Web sends its trailers as the last message of the body; a request that fails to parse gets nothing
 * else, so the first chunk is the trailer.
 */
async function reclassifyGrpcWeb(response: UniversalServerResponse): Promise<UniversalServerResponse> {
  if (!response.body) return response;
  const body = response.body[Symbol.asyncIterator]();
  const first = await body.next();
  const chunk: Uint8Array | undefined = first.done ? undefined : first.value;
  if (chunk && isLoneTrailer(chunk)) {
    const trailer = trailerParse(chunk.subarray(5));
    if (reclassifyGrpcStatus(trailer)) {
      await body.return?.();
      return { ...response, body: createAsyncIterable([envelope(trailerFlag, trailerSerialize(trailer))]) };
    }
  }
  return { ...response, body: replay(first, body) };
}

function isLoneTrailer(chunk: Uint8Array): boolean {
  if (chunk.byteLength < 5 || chunk[0] !== trailerFlag) return false;
  const length = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength).getUint32(1);
  return length === chunk.byteLength - 5;
}

function envelope(flags: number, data: Uint8Array): Uint8Array {
  const bytes = new Uint8Array(data.byteLength + 5);
  const view = new DataView(bytes.buffer);
  view.setUint8(0, flags);
  view.setUint32(1, data.byteLength);
  bytes.set(data, 5);
  return bytes;
}

async function* replay(first: IteratorResult<Uint8Array>, rest: AsyncIterator<Uint8Array>): AsyncGenerator<Uint8Array> {
  try {
    for (let next = first; !next.done; next = await rest.next()) yield next.value;
  } finally {
    await rest.return?.();
  }
}

function connectError(status: number, code: Code, message: string): UniversalServerResponse {
  const text = new TextEncoder().encode(JSON.stringify({ code: codeToString(code), message }));
  const header = new Headers({ "content-type": "application/json", "content-length": String(text.byteLength) });
  return { status, header, body: createAsyncIterable([text]) };
}
