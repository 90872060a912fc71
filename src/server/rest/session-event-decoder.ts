import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { SessionEvent } from "../../../gen/provision/v1/session_event_pb.js";
import { timestampOfText } from "./json-codec.js";

const INT64_DIGITS = /^-?\d{1,18}$/;
/** A UTF-16 surrogate without its other half (a well-formed pair is one code point to a `u` expression). */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * A SessionEvent (the items of usage transactions, logs and metrics: up to 1,000 a request) decoded straight from
 * its plain JSON, without the generic decoder's two passes: fields by their JSON or proto names, strings as
 * strings (well-formed UTF-16), `transactionId` a whole number (or a string of at most 18 digits), `apiVersion` an int32 number,
 * `creationDateTime` as the generic decoder reads it. Undefined for anything else (an unknown field, a value of
 * another type or form): the generic decoder then answers it, with its violations, so both take the same input
 * to the same message (`session-event-decoder.test.ts`).
 */
export function decodeSessionEvent(json: JsonObject): SessionEvent | undefined {
  let transactionId = 0n;
  let sessionId = "";
  let apiVersion = 0;
  let creationDateTime: Timestamp | undefined;
  let eventName = "";
  let eventData = "";
  for (const key in json) {
    const value = json[key];
    if (value === null) continue;
    switch (key) {
      case "transactionId":
      case "transaction_id": {
        const id = int64Of(value);
        if (id === undefined) return undefined;
        transactionId = id;
        break;
      }
      case "apiVersion":
      case "api_version":
        if (!isInt32(value)) return undefined;
        apiVersion = value === 0 ? 0 : value;
        break;
      case "creationDateTime":
      case "creation_date_time":
        creationDateTime = typeof value === "string" ? timestampOfText(value) : undefined;
        if (creationDateTime === undefined) return undefined;
        break;
      case "sessionId":
      case "session_id":
        if (!isWellFormedText(value)) return undefined;
        sessionId = value;
        break;
      case "eventName":
      case "event_name":
        if (!isWellFormedText(value)) return undefined;
        eventName = value;
        break;
      case "eventData":
      case "event_data":
        if (!isWellFormedText(value)) return undefined;
        eventData = value;
        break;
      default:
        return undefined;
    }
  }
  const event: SessionEvent = {
    $typeName: "provision.v1.SessionEvent",
    transactionId,
    sessionId,
    apiVersion,
    eventName,
    eventData,
  };
  // Unset, the field is absent, as `create` leaves it.
  if (creationDateTime) event.creationDateTime = creationDateTime;
  return event;
}

function int64Of(value: JsonValue): bigint | undefined {
  if (typeof value === "number") return Number.isSafeInteger(value) ? BigInt(value) : undefined;
  return typeof value === "string" && INT64_DIGITS.test(value) ? BigInt(value) : undefined;
}

/** A string with no lone surrogate: one the generic decoder would refuse as not UTF-8 is left to it. */
function isWellFormedText(value: JsonValue): value is string {
  return typeof value === "string" && !LONE_SURROGATE.test(value);
}

function isInt32(value: JsonValue): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= -2147483648 && value <= 2147483647;
}
