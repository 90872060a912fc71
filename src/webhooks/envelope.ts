/** What the envelope of one event says; `dataJson` is the text of its `data` object. */
export interface EnvelopeFields {
  id: string;
  providerId: string;
  type: string;
  /** When the change happened. */
  time: Date;
  subject: string;
  entityKind: string;
  entityId: string;
  eventVersion: number;
  dataJson: string;
}

const TEST_FLAG = '"_test":true';

/** The envelope `source`: the URN naming the provider, as the license token's `iss`. */
export function eventSource(providerId: string): string {
  return `urn:provision:provider:${providerId}`;
}

/** The CloudEvents 1.0 JSON text, members in a fixed order, `data` inserted verbatim (last). */
export function envelopeText(fields: EnvelopeFields): string {
  requireObjectText(fields.dataJson);
  const head = JSON.stringify({
    specversion: "1.0",
    id: fields.id,
    source: eventSource(fields.providerId),
    type: fields.type,
    time: fields.time.toISOString(),
    subject: fields.subject,
    datacontenttype: "application/json",
    entitykind: fields.entityKind,
    entityid: fields.entityId,
    eventversion: fields.eventVersion,
  });
  return `${head.slice(0, -1)},"data":${fields.dataJson}}`;
}

/** The data object text with `"_test":true` as its first member (test-fires; the signature covers it). */
export function withTestFlag(dataJson: string): string {
  const rest = requireObjectText(dataJson).slice(1).trimStart();
  return rest.startsWith("}") ? `{${TEST_FLAG}}` : `{${TEST_FLAG},${rest}`;
}

/** The text trimmed, when it is a JSON object's; the caller's mistake otherwise. */
function requireObjectText(json: string): string {
  const trimmed = json.trim();
  if (!trimmed.startsWith("{") || !trimmed.endsWith("}")) throw new Error("event data must be a JSON object");
  return trimmed;
}
