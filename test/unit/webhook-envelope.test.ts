import test from "ava";
import { type EnvelopeFields, envelopeText, eventSource, withTestFlag } from "../../src/webhooks/envelope.js";

const PROVIDER = "3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b";

function fields(dataJson: string): EnvelopeFields {
  return {
    id: "0b9c4f5e-2d7a-4c1e-9f3b-6a8d2e1f0c4b",
    providerId: PROVIDER,
    type: "Entitlement.Activated",
    time: new Date("2026-03-01T12:00:00.045Z"),
    subject: "entitlements/7d0c",
    entityKind: "entitlement",
    entityId: "7d0c",
    eventVersion: 1,
    dataJson,
  };
}

/** Odd but valid JSON: spacing, member order, a number beyond 2^53, escapes and a non-ASCII letter. */
const DATA =
  '{ "zeta" : 1, "alpha":[ ], "big":12345678901234567890, "text":"\\u00e9 \\"q\\" ✓", "nested":{"b":2,"a":1} }';

test("the envelope members come in the fixed order with CloudEvents values", (t) => {
  const envelope = JSON.parse(envelopeText(fields('{"a":1}')));
  t.deepEqual(Object.keys(envelope), [
    "specversion",
    "id",
    "source",
    "type",
    "time",
    "subject",
    "datacontenttype",
    "entitykind",
    "entityid",
    "eventversion",
    "data",
  ]);
  t.like(envelope, {
    specversion: "1.0",
    id: "0b9c4f5e-2d7a-4c1e-9f3b-6a8d2e1f0c4b",
    source: `urn:provision:provider:${PROVIDER}`,
    type: "Entitlement.Activated",
    time: "2026-03-01T12:00:00.045Z",
    subject: "entitlements/7d0c",
    datacontenttype: "application/json",
    entitykind: "entitlement",
    entityid: "7d0c",
    data: { a: 1 },
  });
  t.is(envelope.eventversion, 1);
  t.is(eventSource(PROVIDER), envelope.source);
});

test("the data text is inserted byte for byte", (t) => {
  const text = envelopeText(fields(DATA));
  const marker = ',"data":';
  t.is(text.indexOf(marker), text.lastIndexOf(marker));
  t.is(text.slice(text.indexOf(marker) + marker.length, -1), DATA);
  t.true(text.endsWith(`${DATA}}`));
  t.true(text.includes(`"big":12345678901234567890`));
});

test("the header members are JSON-escaped, so a value cannot inject members", (t) => {
  const text = envelopeText({ ...fields("{}"), subject: 'x","data":{"evil":true},"y":"' });
  const envelope = JSON.parse(text);
  t.is(envelope.subject, 'x","data":{"evil":true},"y":"');
  t.deepEqual(envelope.data, {});
});

test("the test flag becomes the first member of the data object", (t) => {
  t.is(withTestFlag("{}"), '{"_test":true}');
  t.is(withTestFlag("{ }"), '{"_test":true}');
  t.is(withTestFlag('{"a":1,"b":[2]}'), '{"_test":true,"a":1,"b":[2]}');
  const flagged = JSON.parse(withTestFlag(DATA));
  t.deepEqual(Object.keys(flagged), ["_test", "zeta", "alpha", "big", "text", "nested"]);
  t.is(flagged._test, true);
  const envelope = envelopeText(fields(withTestFlag('{"a":1}')));
  t.true(envelope.endsWith(',"data":{"_test":true,"a":1}}'));
});

test("data that is not a JSON object text is refused", (t) => {
  for (const data of ["", "[]", "null", '"text"', "1"]) {
    t.throws(() => envelopeText(fields(data)), { message: /JSON object/ }, data);
    t.throws(() => withTestFlag(data), { message: /JSON object/ }, data);
  }
});
