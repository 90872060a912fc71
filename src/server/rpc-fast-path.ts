import { type DescMessage, type DescMethod, fromJson, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { createMethodSerializationLookup, type MethodSerializationLookup } from "@connectrpc/connect/protocol";
import type { Logger } from "../platform/logger.js";
import { clientAddressKey, clientAddressOf } from "./client-address.js";
import { type EncodedMessage, encodedMessage, encodedRefusal } from "./encoded-refusal.js";
import { connectErrorOf } from "./error-interceptor.js";
import type { InProcessCall, ResponseMetadata } from "./in-process-rpc.js";
import { responseSignal } from "./response-signal.js";
import { incomingHeaders } from "./rest/incoming-headers.js";
import type { NodeRequest, NodeResponse } from "./rest/rest-handler.js";
import { type ReadBody, readBody } from "./rpc-body.js";
import {
  type BodyMessage,
  type FastPathSettings,
  type Negotiated,
  responseGone,
  type UnaryProtocol,
} from "./rpc-fast-protocol.js";
import { screenedBytes } from "./rpc-screen.js";

type Serialization = MethodSerializationLookup<DescMessage, DescMessage>;

export type InProcessInvoker = (method: DescMethod, call: InProcessCall) => Promise<Message>;

/** Hands a request to connect-node, with the body as read so far when the fast path read some of it. */
export type HandOver = (body?: ReadBody) => void;

export interface FastPathOptions {
  invoke: InProcessInvoker;
  settings: FastPathSettings;
  protocols: UnaryProtocol[];
  logger: Logger;
}

/**
 * Answers the common unary call (Connect or gRPC, one message, uncompressed or in an encoding connect-node
 * offers) itself: reads the body, checks its caps on the encoded message, decodes it, calls the implementation
 * in process through the interceptors and writes the answer, with none of connect-node's per-call async
 * iterables. Anything else, and any body that is not one well-formed message, goes to connect-node, which
 * answers it (and its mistakes) as it always has.
 */
export function createFastPath(options: FastPathOptions) {
  const { settings, protocols } = options;
  const serializations = new Map<DescMethod, Serialization>();
  const serializationOf = (method: DescMethod) => {
    let serialization = serializations.get(method);
    if (!serialization) {
      serialization = createMethodSerializationLookup(method, settings.binaryOptions, settings.jsonOptions, settings);
      serializations.set(method, serialization);
    }
    return serialization;
  };

  /** True when the fast path took the request; false leaves it untouched for connect-node. */
  return function serve(request: NodeRequest, response: NodeResponse, method: DescMethod, handOver: HandOver) {
    if (method.methodKind !== "unary") return false;
    let protocol: UnaryProtocol | undefined;
    let negotiated: Negotiated | undefined;
    for (protocol of protocols) {
      negotiated = protocol.negotiate(request, settings);
      if (negotiated) break;
    }
    if (!protocol || !negotiated) return false;
    const declared = declaredLength(request);
    // connect-node refuses a body declared too long before reading it.
    if (declared !== undefined && declared > settings.readMaxBytes) return false;
    const call = { request, response, method, protocol, negotiated, declared, handOver, receivedAt: Date.now() };
    answer(call).catch((reason: unknown) => {
      if (responseGone(response) || ConnectError.from(reason).code === Code.Aborted) return;
      options.logger.error(
        { err: reason, requestId: request.headers["x-request-id"], procedure: method.name },
        "RPC handler failed",
      );
    });
    return true;
  };

  async function answer(call: FastCall): Promise<void> {
    const { request, response, method, protocol, negotiated } = call;
    const body = await readBody(request, screenedBytes(settings.readMaxBytes));
    if (!body) return;
    const serialization = serializationOf(method);
    const bytes = body.complete && (call.declared ?? body.bytes.length) === body.bytes.length ? body.bytes : undefined;
    // A message over the limit is connect-node's to refuse (the body is read further, for its screen).
    const sent = bytes && sizedMessage(protocol.messageOf(bytes, negotiated), settings.readMaxBytes);
    const data = sent && (await inflated(sent, negotiated, settings.readMaxBytes));
    const metadata: ResponseMetadata = {};
    const message = data && encodedMessage(negotiated.binary, data);
    const refusal = message && encodedRefusal(method, message);
    if (refusal) return answerError(call, refusal, metadata);
    const input = sent?.trailing ? undefined : parse(serialization, method, message, settings.jsonOptions);
    if (!input) {
      call.handOver(body);
      return;
    }
    let output: Uint8Array;
    try {
      const message = await options.invoke(method, callOf(call, input, metadata));
      output = serialize(serialization, negotiated.binary, message);
    } catch (reason) {
      return answerError(call, reason, metadata);
    }
    await protocol.answer(response, negotiated, output, metadata, settings);
  }

  async function answerError(call: FastCall, reason: unknown, metadata: ResponseMetadata): Promise<void> {
    const { request, response, method, protocol, negotiated } = call;
    const where = { requestId: request.headers["x-request-id"], procedure: method.name };
    const error = connectErrorOf(reason, options.logger, where);
    await protocol.answerError(response, negotiated, error, metadata, settings);
  }
}

interface FastCall {
  request: NodeRequest;
  response: NodeResponse;
  method: DescMethod;
  protocol: UnaryProtocol;
  negotiated: Negotiated;
  declared: number | undefined;
  handOver: HandOver;
  /** When its headers were read: the client's deadline counts from here, body included. */
  receivedAt: number;
}

/** Encodings of frozen messages: a frozen message (a cached answer, deep-frozen by convention) cannot change. */
const frozenEncodings = new WeakMap<Message, { binary?: Uint8Array; json?: Uint8Array }>();

function serialize(serialization: Serialization, binary: boolean, message: Message): Uint8Array {
  if (!Object.isFrozen(message)) return serialization.getO(binary).serialize(message);
  let encodings = frozenEncodings.get(message);
  if (!encodings) {
    encodings = {};
    frozenEncodings.set(message, encodings);
  }
  const format = binary ? "binary" : "json";
  encodings[format] ??= serialization.getO(binary).serialize(message);
  return encodings[format];
}

function sizedMessage(sent: BodyMessage | undefined, readMaxBytes: number): BodyMessage | undefined {
  return sent && sent.data.length <= readMaxBytes ? sent : undefined;
}

/**
 * The message as decoded: inflated when it was sent compressed (within readMaxBytes). Undefined when it cannot
 * be: connect-node answers those bytes, as it always has.
 */
async function inflated(
  sent: BodyMessage,
  negotiated: Negotiated,
  readMaxBytes: number,
): Promise<Uint8Array | undefined> {
  if (!sent.compressed) return sent.data;
  return negotiated.requestCompression?.decompress(sent.data, readMaxBytes).catch(() => undefined);
}

/**
 * The request message, JSON decoded from the value its check parsed (as connect's JSON serialization decodes the
 * text); undefined when it does not decode (connect-node then answers the same bytes).
 */
function parse(
  serialization: Serialization,
  method: DescMethod,
  message: EncodedMessage | undefined,
  jsonOptions: FastPathSettings["jsonOptions"],
): Message | undefined {
  if (!message) return undefined;
  try {
    if (message.binary) return serialization.getI(true).parse(message.data) as Message;
    return message.json === undefined ? undefined : fromJson(method.input, message.json, jsonOptions);
  } catch {
    return undefined;
  }
}

function callOf(call: FastCall, message: Message, metadata: ResponseMetadata): InProcessCall {
  const { request, response, protocol, negotiated } = call;
  const deadline = negotiated.timeoutMs === undefined ? undefined : call.receivedAt + negotiated.timeoutMs;
  return {
    message,
    header: incomingHeaders(request.headers),
    contextValues: createContextValues().set(clientAddressKey, clientAddressOf(request)),
    signal: () => responseSignal(response, deadline),
    requestMethod: "POST",
    url: urlOf(request),
    protocolName: protocol.name,
    timeoutMs: deadline === undefined ? undefined : () => deadline - Date.now(),
    response: metadata,
  };
}

/** The request's Content-Length as connect-node reads it; undefined when absent or not a length. */
function declaredLength(request: NodeRequest): number | undefined {
  const value = request.headers["content-length"];
  if (value === undefined) return undefined;
  const length = Number.parseInt(value, 10);
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined;
}

function urlOf(request: NodeRequest): string {
  const scheme = "encrypted" in request.socket && request.socket.encrypted ? "https" : "http";
  const authority = "authority" in request ? request.authority : request.headers.host;
  return `${scheme}://${authority}${request.url}`;
}
