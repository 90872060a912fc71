import { randomBytes } from "node:crypto";
import { verifySignatureHeader } from "./signing.js";

/** What the registration challenge sent and what the endpoint answered. */
export interface ChallengeReply {
  /** The request's `webhook-id` and `webhook-timestamp` (header texts). */
  requestId: string;
  requestTimestamp: string;
  /** The raw response body, whole (not a truncated copy). */
  responseBody: Buffer;
  /** The response's `webhook-signature` header. */
  responseSignature: string | undefined;
  /** The subscription's keys: current, and previous during a rotation overlap. */
  keys: Buffer[];
  /** The value sent in `data.challenge`. */
  challenge: string;
}

export type ChallengeVerdict = { ok: true } | { ok: false; error: string };

/** A new challenge value: 32 random bytes, base64url. */
export function newChallenge(): string {
  return randomBytes(32).toString("base64url");
}

/**
 * Accepts a reply whose body is a JSON object with the one member `challenge` equal to the value sent, signed
 * (`webhook-signature`) over `{request id}.{request timestamp}.{raw response body}` with one of the keys.
 * The status (2xx) is the caller's to check.
 */
export function checkChallengeReply(reply: ChallengeReply): ChallengeVerdict {
  const echoProblem = echoProblemOf(reply.responseBody, reply.challenge);
  if (echoProblem) return { ok: false, error: `challenge not echoed: ${echoProblem}` };
  if (reply.responseSignature === undefined) {
    return { ok: false, error: "bad response signature: no webhook-signature header" };
  }
  const { requestId, requestTimestamp, responseBody, keys } = reply;
  if (!verifySignatureHeader(reply.responseSignature, keys, requestId, requestTimestamp, responseBody)) {
    return { ok: false, error: "bad response signature" };
  }
  return { ok: true };
}

function echoProblemOf(body: Buffer, challenge: string): string | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return "the body is not JSON";
  }
  if (!isObject(parsed) || !onlyMemberIs(parsed, "challenge")) {
    return 'the body must be a JSON object with the one member "challenge"';
  }
  return parsed.challenge === challenge ? null : "the value differs from the one sent";
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function onlyMemberIs(object: Record<string, unknown>, name: string): boolean {
  const members = Object.keys(object);
  return members.length === 1 && members[0] === name;
}
