import { Code, ConnectError, type Interceptor, type UnaryRequest } from "@connectrpc/connect";
import { parseTimeout as parseConnectTimeout } from "@connectrpc/connect/protocol-connect";
import { parseTimeout as parseGrpcTimeout } from "@connectrpc/connect/protocol-grpc";
import type { Logger } from "../platform/logger.js";
import { connectErrorOf } from "./error-interceptor.js";
import { inProcessCallOf } from "./in-process-rpc.js";

/** The longest wait a Node timer keeps (about 24.8 days): a later deadline is as good as none. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/**
 * Holds a unary call to the client's deadline (`connect-timeout-ms`, `grpc-timeout`, counted from when its headers
 * were read): a call whose deadline has passed when its implementation would start (it waited for its body, its
 * credential, a turn) is answered `deadline_exceeded` without running, and one still running at its deadline is
 * answered so then, as the client has stopped waiting (what it started may still complete, as after any timeout;
 * a failure of it is still logged as any other). REST calls carry no deadline.
 */
export function deadlineInterceptor(logger: Logger): Interceptor {
  return (next) => (request) => {
    if (request.stream) return next(request);
    const call = inProcessCallOf(request);
    const left = call ? call.timeoutMs?.() : connectNodeTimeoutOf(request);
    if (left === undefined || left > LONGEST_TIMER_MS) return next(request);
    if (left <= 0) return Promise.reject(deadlineExceeded());
    const logLateFailure = (error: unknown) =>
      connectErrorOf(error, logger, { requestId: request.header.get("x-request-id"), procedure: request.method.name });
    // connect-node's own signal aborts at the deadline; for in-process calls a timer does.
    if (call) return untilDeadline(next(request), left, logLateFailure);
    return untilSignalledDeadline(next(request), request.signal, logLateFailure);
  };
}

/**
 * The time a call connect-node serves may take, from its timeout header (undefined without one); 0 once its
 * signal has aborted at the deadline.
 */
function connectNodeTimeoutOf(request: UnaryRequest): number | undefined {
  const connect = request.header.get("connect-timeout-ms");
  const grpc = request.header.get("grpc-timeout");
  if (connect === null && grpc === null) return undefined;
  const { timeoutMs } =
    connect !== null
      ? parseConnectTimeout(connect, Number.MAX_SAFE_INTEGER)
      : parseGrpcTimeout(grpc, Number.MAX_SAFE_INTEGER);
  if (timeoutMs === undefined || timeoutMs > LONGEST_TIMER_MS) return timeoutMs;
  return request.signal.aborted && isDeadline(request.signal.reason) ? 0 : timeoutMs;
}

function deadlineExceeded(): ConnectError {
  return new ConnectError("the call's deadline passed", Code.DeadlineExceeded);
}

function isDeadline(reason: unknown): boolean {
  return reason instanceof ConnectError && reason.code === Code.DeadlineExceeded;
}

type LateFailure = (error: unknown) => void;

/** The call's answer, or deadline_exceeded once `leftMs` have passed. */
function untilDeadline<T>(answer: Promise<T>, leftMs: number, lateFailure: LateFailure): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(deadlineExceeded()), leftMs);
  });
  return raced(answer, expired, () => clearTimeout(timer), lateFailure);
}

/** As untilDeadline, for connect-node's calls: their signal aborts with deadline_exceeded at the deadline. */
function untilSignalledDeadline<T>(answer: Promise<T>, signal: AbortSignal, lateFailure: LateFailure): Promise<T> {
  let onAbort = () => {};
  const expired = new Promise<never>((_, reject) => {
    onAbort = () => {
      if (isDeadline(signal.reason)) reject(deadlineExceeded());
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
  return raced(answer, expired, () => signal.removeEventListener("abort", onAbort), lateFailure);
}

/** The first of the two to settle; a failure of the call after its deadline was answered goes to `lateFailure`. */
function raced<T>(answer: Promise<T>, expired: Promise<never>, settle: () => void, lateFailure: LateFailure) {
  let answered = false;
  answer.then(
    () => undefined,
    (error: unknown) => {
      if (answered) lateFailure(error);
    },
  );
  expired.catch(() => {
    answered = true;
  });
  return Promise.race([answer, expired]).finally(settle);
}
