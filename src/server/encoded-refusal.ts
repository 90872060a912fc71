import { isUtf8 } from "node:buffer";
import type { DescMethod, JsonValue } from "@bufbuild/protobuf";
import { DomainError, type FieldViolation } from "../platform/errors.js";
import { tooManyItemsError } from "./limits-interceptor.js";
import { checkJsonLimits, isBatchOverCap } from "./request-limits.js";
import { checkWireLimits } from "./wire-limits.js";

/** A request message as sent (after inflating), and for JSON its parsed value: read once, checked, then decoded. */
export interface EncodedMessage {
  binary: boolean;
  data: Uint8Array;
  /** JSON's parsed value; undefined for protobuf, or JSON that is not UTF-8 or does not parse. */
  json?: JsonValue;
}

export function encodedMessage(binary: boolean, data: Uint8Array): EncodedMessage {
  if (binary || !isUtf8(data)) return { binary, data };
  try {
    return { binary, data, json: JSON.parse(textDecoder.decode(data)) as JsonValue };
  } catch {
    return { binary, data }; // the decoder answers it
  }
}

/**
 * The refusal of a request over its caps or its bound on messages (or of JSON that is not UTF-8), found on its
 * encoded bytes before they are decoded: decoding hundreds of thousands of small messages would hold the event
 * loop for seconds, for anyone (authentication comes after decoding). The interceptors check the decoded
 * message the same way.
 */
export function encodedRefusal(method: DescMethod, message: EncodedMessage): Error | undefined {
  const { binary, data, json } = message;
  if (!binary && !isUtf8(data)) {
    // The decoder would read such bytes as U+FFFD and store that; REST refuses them as malformed JSON too.
    return new DomainError("invalid-argument", "the JSON body is not UTF-8", { slug: "malformed-request" });
  }
  let violations: FieldViolation[];
  try {
    if (binary) violations = checkWireLimits(method.input, data);
    else violations = json === undefined ? [] : checkJsonLimits(method.input, json);
  } catch {
    return undefined; // a pre-check only: the decoder and the interceptors still answer
  }
  return violations.length > 0 ? tooManyItemsError(violations, isBatchOverCap(method, violations)) : undefined;
}

const textDecoder = new TextDecoder();
