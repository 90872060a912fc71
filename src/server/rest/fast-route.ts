import type { DescMethod, Message } from "@bufbuild/protobuf";

/** The rest of a fast answer, once the route is sure to give it: its response, or the error it answers. */
export type FastAnswer = () => Message | Promise<Message>;

/**
 * A route's everyday request answered without the full REST pipeline (decoding the body, the interceptors, the
 * in-process call). It sees only requests whose body says nothing (empty or `{}`), and with a query only when
 * it reads one. It answers only what the full pipeline would answer: for anything else (a caller it does not
 * recognise at once, a state it does not hold, a query it does not read as the pipeline would) it declines
 * while nothing is done yet, and the full pipeline answers, errors included.
 */
export interface FastRoute<Caller extends object = object> {
  method: DescMethod;
  /** Whether the route reads the query string; a route that does not declines every request with one. */
  readsQuery?: boolean;
  /**
   * The caller this route recognises from its credential alone (a token verified before), or undefined.
   * Asked before the body is read, as the full pipeline authorizes before reading it.
   */
  caller(authorization: string | undefined, variables: Record<string, string>): Caller | undefined;
  /**
   * Everything the route checks before it acts, with no effect the full pipeline would repeat: undefined (or a
   * failure) declines. Then the answer, whose failures are answered as the full pipeline answers them. Both
   * may be given at once (no promise) when memory holds everything they need.
   */
  prepare(
    caller: Caller,
    variables: Record<string, string>,
    query: URLSearchParams,
  ): FastAnswer | undefined | Promise<FastAnswer | undefined>;
}
