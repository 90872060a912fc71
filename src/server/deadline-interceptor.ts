import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { inProcessCallOf } from "./in-process-rpc.js";

const TIMEOUT_HEADERS = ["connect-timeout-ms", "grpc-timeout"];

/**
 * Holds a unary call to the client's deadline (`connect-timeout-ms`, `grpc-timeout`): a call whose deadline has
 * passed when its implementation would start (it waited for its body, its credential, a turn) is answered
 * `deadline_exceeded` without running, and one still running at its deadline is answered so then, as the client
 * has stopped waiting (what it started may still complete, as after any timeout). REST calls carry no deadline.
 */
export function deadlineInterceptor(): Interceptor {
  return (next) => async (request) => {
    if (request.stream) return next(request);
    const call = inProcessCallOf(request);
    if (call) {
      const left = call.timeoutMs?.();
      if (left === undefined) return next(request);
      if (left <= 0) throw deadlineExceeded();
      return untilDeadline(next(request), left);
    }
    if (!TIMEOUT_HEADERS.some((name) => request.header.has(name))) return next(request);
    const signal = request.signal;
    if (signal.aborted && isDeadline(signal.reason)) throw deadlineExceeded();
    return untilSignalledDeadline(next(request), signal);
  };
}

function deadlineExceeded(): ConnectError {
  return new ConnectError("the call's deadline passed", Code.DeadlineExceeded);
}

function isDeadline(reason: unknown): boolean {
  return reason instanceof ConnectError && reason.code === Code.DeadlineExceeded;
}

/** The call's answer, or deadline_exceeded once `leftMs` have passed; the call's own outcome is then dropped. */
function untilDeadline<T>(answer: Promise<T>, leftMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(deadlineExceeded()), leftMs);
  });
  return raced(answer, expired, () => clearTimeout(timer));
}

/** As untilDeadline, for connect-node's calls: their signal aborts with deadline_exceeded at the deadline. */
function untilSignalledDeadline<T>(answer: Promise<T>, signal: AbortSignal): Promise<T> {
  let onAbort = () => {};
  const expired = new Promise<never>((_, reject) => {
    onAbort = () => {
      if (isDeadline(signal.reason)) reject(deadlineExceeded());
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
  return raced(answer, expired, () => signal.removeEventListener("abort", onAbort));
}

function raced<T>(answer: Promise<T>, expired: Promise<never>, settle: () => void): Promise<T> {
  answer.catch(() => undefined);
  expired.catch(() => undefined);
  return Promise.race([answer, expired]).finally(settle);
}
