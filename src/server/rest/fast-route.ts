import type { DescMethod, Message } from "@bufbuild/protobuf";

/**
 * A route's everyday request answered from memory, skipping what the full REST pipeline does for any request
 * (decoding the body, the interceptors, the in-process call). It sees only requests whose body says nothing
 * (empty or `{}`), and answers only what the full pipeline would answer for them: for anything else (a caller
 * it does not recognise at once, a state it does not hold) it declines, and the full pipeline answers,
 * errors included.
 */
export interface FastRoute<Caller extends object = object> {
  method: DescMethod;
  /**
   * The caller this route recognises from its credential alone (a token verified before), or undefined.
   * Asked before the body is read, as the full pipeline authorizes before reading it.
   */
  caller(authorization: string | undefined, variables: Record<string, string>): Caller | undefined;
  /** The response, or undefined to decline. */
  answer(caller: Caller, variables: Record<string, string>): Promise<Message | undefined>;
}
