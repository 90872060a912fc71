import { create, type DescMessage, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import test from "ava";
import { ImportProductsRequestSchema, type ProductSchema } from "../../gen/provision/v1/catalog_pb.js";
import { RecordUsageTransactionsRequestSchema } from "../../gen/provision/v1/usage_pb.js";
import { CreateSubscriptionRequestSchema } from "../../gen/provision/v1/webhook_pb.js";
import { checkMessageLimits, MAX_DECODED_MESSAGES, tooManyMessages } from "../../src/server/request-limits.js";
import { checkWireLimits } from "../../src/server/wire-limits.js";

/** The wire check of a message's encoding, beside the check of the decoded message. */
function bothChecks<S extends DescMessage>(schema: S, init: MessageInitShape<S>) {
  const message = create(schema, init);
  return { wire: checkWireLimits(schema, toBinary(schema, message)), decoded: checkMessageLimits(schema, message) };
}

const empties = (count: number) => Array.from({ length: count }, () => ({}));

test("the wire check names what the decoded check names, for lists, nested lists and maps", (t) => {
  const products: MessageInitShape<typeof ProductSchema>[] = [
    { expirationDate: timestampFromDate(new Date()) },
    { monitoredAssets: [{ meteredUsage: { usageTiers: empties(51) } }] },
    { propertyValues: { 'k"ey': { metadata: empties(51) }, fine: { metadata: empties(2) } } },
    { features: empties(1001) },
  ];
  const { wire, decoded } = bothChecks(ImportProductsRequestSchema, { products });
  t.deepEqual(
    decoded.map((violation) => violation.field),
    [
      "products[1].monitoredAssets[0].meteredUsage.usageTiers",
      'products[2].propertyValues["k\\"ey"].metadata',
      "products[3].features",
    ],
  );
  t.deepEqual(wire, decoded);
  t.deepEqual(bothChecks(ImportProductsRequestSchema, { products: empties(1001) }).wire, [
    { field: "products", message: "holds 1001 items; at most 1000 are allowed" },
  ]);
  const within = bothChecks(ImportProductsRequestSchema, { products: empties(1000) });
  t.deepEqual(within, { wire: [], decoded: [] });
});

test("the wire check counts a batch of session events as the decoded one does", (t) => {
  const events = empties(1001).map((_, index) => ({ transactionId: BigInt(index), eventName: "m", eventData: "1" }));
  const { wire, decoded } = bothChecks(RecordUsageTransactionsRequestSchema, { sessionId: "s", events });
  t.is(wire.length, 1);
  t.deepEqual(wire, decoded);
});

test("a request holding more messages than the bound is refused, though each list is within its cap", (t) => {
  // 101 products of 1,000 empty features: every cap met, 101,101 messages in all.
  const products = empties(101).map(() => ({ features: empties(1000) }));
  const { wire, decoded } = bothChecks(ImportProductsRequestSchema, { products });
  t.deepEqual(decoded, [], "the caps alone let it through");
  t.true(101 * 1001 > MAX_DECODED_MESSAGES);
  t.deepEqual(wire, [tooManyMessages()]);
});

test("bytes that stop reading as protobuf are checked up to there; what holds nothing over is left to the decoder", (t) => {
  const products = new Uint8Array(2 * 1001 + 2);
  for (let at = 0; at < 2 * 1001; at += 2) products[at] = 0x0a;
  products.set([0x0a, 0x05], 2 * 1001); // a record longer than what is left
  t.deepEqual(checkWireLimits(ImportProductsRequestSchema, products), [
    { field: "products", message: "holds 1001 items; at most 1000 are allowed" },
  ]);

  t.deepEqual(checkWireLimits(ImportProductsRequestSchema, Uint8Array.of(0x0a, 0x05, 0x00)), [], "a truncated record");
  t.deepEqual(checkWireLimits(ImportProductsRequestSchema, Uint8Array.of(0x0c)), [], "an end-group out of place");
  t.deepEqual(checkWireLimits(ImportProductsRequestSchema, new Uint8Array()), []);
});

test("varints past 2^53 (negative numbers, unknown fields) do not end the check early", (t) => {
  // Field 15, varint 2^63 (ten bytes), then 1,001 empty products.
  const unknown = Uint8Array.of(0x78, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01);
  const products = new Uint8Array(2 * 1001);
  for (let at = 0; at < products.length; at += 2) products[at] = 0x0a;
  t.deepEqual(checkWireLimits(ImportProductsRequestSchema, new Uint8Array([...unknown, ...products])), [
    { field: "products", message: "holds 1001 items; at most 1000 are allowed" },
  ]);
  const before1970 = bothChecks(ImportProductsRequestSchema, {
    products: [{ expirationDate: { seconds: -86_400n } }, { features: empties(1001) }],
  });
  t.deepEqual(before1970.wire, before1970.decoded);
  t.is(before1970.wire.length, 1);
});

test("packed enums are counted as the decoded check counts them", (t) => {
  const filter = { severities: Array.from({ length: 11 }, () => 2) };
  const { wire, decoded } = bothChecks(CreateSubscriptionRequestSchema, { url: "https://x.example", filter });
  t.is(decoded.length, 1);
  t.deepEqual(wire, decoded);
});

test("groups nested past the decoder's recursion limit are left to the decoder, without overflowing the stack", (t) => {
  const depth = 10_000;
  const nested = new Uint8Array(depth); // field 15, start group, again and again
  nested.fill(0x7b);
  t.deepEqual(checkWireLimits(ImportProductsRequestSchema, nested), []);
});
