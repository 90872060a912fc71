/** A gRPC length-prefixed message: one flags byte (1: compressed), the length (4 bytes, big-endian), the data. */
const HEADER_BYTES = 5;

/**
 * The data of a body that is exactly one uncompressed message; undefined for anything else (an empty or
 * truncated body, a compressed flag, trailing bytes, more than one message), which connect-node answers.
 */
export function decodeEnvelope(body: Buffer): Uint8Array | undefined {
  if (body.length < HEADER_BYTES || body[0] !== 0) return undefined;
  if (body.readUInt32BE(1) !== body.length - HEADER_BYTES) return undefined;
  return body.subarray(HEADER_BYTES);
}
