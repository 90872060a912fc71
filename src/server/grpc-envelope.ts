/** A gRPC length-prefixed message: one flags byte (1: compressed), the length (4 bytes, big-endian), the data. */
const HEADER_BYTES = 5;

/**
 * The data of a body's first message, flagged compressed only when the request names an encoding, and whether
 * more bytes follow it (connect-node answers such a body: a unary call sends one message); undefined for an
 * empty or truncated body or another flag, which connect-node answers too.
 */
export function decodeEnvelope(
  body: Buffer,
  encoded = false,
): { data: Uint8Array; compressed: boolean; trailing: boolean } | undefined {
  if (body.length < HEADER_BYTES || !(body[0] === 0 || (body[0] === 1 && encoded))) return undefined;
  const end = HEADER_BYTES + body.readUInt32BE(1);
  if (end > body.length) return undefined;
  return { data: body.subarray(HEADER_BYTES, end), compressed: body[0] === 1, trailing: end < body.length };
}
