import { create, type DescMessage, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import {
  type ContextValues,
  createContextKey,
  createServiceImplSpec,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type ServiceImpl,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";

/** A service of the contract and its (possibly partial) implementation. */
export type ServiceImplementation = [DescService, object];

/** Pairs a service with its implementation, checking the implementation's type against that service. */
export function implementation<T extends DescService>(
  service: T,
  impl: Partial<ServiceImpl<T>>,
): ServiceImplementation {
  return [service, impl];
}

/** One call made in process, as the REST layer and the RPC fast path make it. */
export interface InProcessCall {
  message: Message;
  header: Headers;
  contextValues: ContextValues;
  /** Created only when the implementation or an interceptor asks for it. */
  signal: () => AbortSignal;
  requestMethod: string;
  url: string;
  /** What the implementation's context names the protocol: "rest" unless set ("connect", "grpc"). */
  protocolName?: string;
  /** The time left for the call, as the client's deadline header gave it. */
  timeoutMs?: () => number | undefined;
  /** Receives the response headers and trailers the implementation or an interceptor set, if any. */
  response?: ResponseMetadata;
}

/** Response headers and trailers of one call; each is created only when something sets one. */
export interface ResponseMetadata {
  header?: Headers;
  trailer?: Headers;
}

/** The call behind a request, for the context its implementation gets: interceptors pass requests on as they like. */
const inProcessCallKey = createContextKey<InProcessCall | undefined>(undefined, { description: "in-process call" });

/** The in-process call behind a request, or undefined for a call connect-node serves. */
export function inProcessCallOf(request: UnaryRequest): InProcessCall | undefined {
  return request.contextValues.get(inProcessCallKey);
}

type UnaryNext = (request: UnaryRequest) => Promise<UnaryResponse>;

/**
 * Calls unary implementations through the same interceptors as Connect and gRPC, with the decoded message
 * as it is: no serialization and no transport. Each method's interceptor chain is built once.
 */
export function createInProcessInvoker(services: ServiceImplementation[], interceptors: Interceptor[]) {
  const chains = new Map<DescMethod, UnaryNext>();
  for (const [service, impl] of services) {
    for (const spec of Object.values(createServiceImplSpec(service, impl as never).methods)) {
      if (spec.kind === "unary") chains.set(spec.method, chainOf(spec, interceptors));
    }
  }

  return async function invoke(method: DescMethod, call: InProcessCall): Promise<Message> {
    const next = chains.get(method);
    if (!next) throw new Error(`${method.parent.typeName}.${method.name} is not a registered unary method`);
    call.contextValues.set(inProcessCallKey, call);
    const response = await next(requestOf(method, call));
    return response.message;
  };
}

function chainOf(spec: MethodImplSpec, interceptors: Interceptor[]): UnaryNext {
  const { method } = spec;
  const impl = spec.impl as (input: Message, context: HandlerContext) => Promise<Message>;
  const call: UnaryNext = async (request) => {
    const context = contextOf(request, request.contextValues.get(inProcessCallKey));
    const output = await impl(request.message, context);
    return {
      stream: false,
      service: method.parent,
      method: method as UnaryResponse["method"],
      message: create(method.output as DescMessage, output as never),
      get header() {
        return context.responseHeader;
      },
      get trailer() {
        return context.responseTrailer;
      },
    };
  };
  return interceptors.reduceRight<UnaryNext>((next, interceptor) => interceptor(next as never) as UnaryNext, call);
}

function requestOf(method: DescMethod, call: InProcessCall): UnaryRequest {
  return {
    stream: false,
    service: method.parent,
    method: method as UnaryRequest["method"],
    message: call.message,
    header: call.header,
    contextValues: call.contextValues,
    requestMethod: call.requestMethod,
    url: call.url,
    get signal() {
      return call.signal();
    },
  };
}

function contextOf(request: UnaryRequest, call: InProcessCall | undefined): HandlerContext {
  const response: ResponseMetadata = call?.response ?? {};
  return {
    method: request.method,
    service: request.service,
    requestMethod: request.requestMethod,
    requestHeader: request.header,
    protocolName: call?.protocolName ?? "rest",
    url: request.url,
    values: request.contextValues,
    timeoutMs: call?.timeoutMs ?? (() => undefined),
    get signal() {
      return request.signal;
    },
    get responseHeader() {
      response.header ??= new Headers();
      return response.header;
    },
    get responseTrailer() {
      response.trailer ??= new Headers();
      return response.trailer;
    },
  };
}
