import { isUtf8 } from "node:buffer";
import type { DescMessage, DescMethod, JsonValue } from "@bufbuild/protobuf";
import { DomainError, type FieldViolation } from "../platform/errors.js";
import { tooManyItemsError } from "./limits-interceptor.js";
import { checkJsonLimits, isBatchOverCap } from "./request-limits.js";
import { checkWireLimits } from "./wire-limits.js";

/**
 * The refusal of a request over its caps or its bound on messages (or of JSON that is not UTF-8), found on its
 * encoded bytes before they are decoded: decoding hundreds of thousands of small messages would hold the event
 * loop for seconds, for anyone (authentication comes after decoding). The interceptors check the decoded
 * message the same way.
 */
export function encodedRefusal(method: DescMethod, binary: boolean, data: Uint8Array): Error | undefined {
  if (!binary && !isUtf8(data)) {
    // The decoder would read such bytes as U+FFFD and store that; REST refuses them as malformed JSON too.
    return new DomainError("invalid-argument", "the JSON body is not UTF-8", { slug: "malformed-request" });
  }
  let violations: FieldViolation[];
  try {
    violations = binary ? checkWireLimits(method.input, data) : jsonLimits(method.input, data);
  } catch {
    return undefined; // a pre-check only: the decoder and the interceptors still answer
  }
  return violations.length > 0 ? tooManyItemsError(violations, isBatchOverCap(method, violations)) : undefined;
}

function jsonLimits(schema: DescMessage, data: Uint8Array) {
  let json: JsonValue;
  try {
    json = JSON.parse(textDecoder.decode(data)) as JsonValue;
  } catch {
    return []; // the decoder answers it
  }
  return checkJsonLimits(schema, json);
}

const textDecoder = new TextDecoder();
