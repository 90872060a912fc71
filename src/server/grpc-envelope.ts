/** A gRPC length-prefixed message: one flags byte (1: compressed), the length (4 bytes, big-endian), the data. */
const HEADER_BYTES = 5;

/**
 * The data of a body that is exactly one message, flagged compressed only when the request names an encoding;
 * undefined for anything else (an empty or truncated body, another flag, trailing bytes, more than one
 * message), which connect-node answers.
 */
export function decodeEnvelope(body: Buffer, encoded = false): { data: Uint8Array; compressed: boolean } | undefined {
  if (body.length < HEADER_BYTES || !(body[0] === 0 || (body[0] === 1 && encoded))) return undefined;
  if (body.readUInt32BE(1) !== body.length - HEADER_BYTES) return undefined;
  return { data: body.subarray(HEADER_BYTES), compressed: body[0] === 1 };
}
