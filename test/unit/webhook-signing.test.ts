import { createHmac, randomBytes } from "node:crypto";
import test from "ava";
import { Webhook } from "standardwebhooks";
import { signatureHeader, verifySignatureHeader, webhookTimestamp } from "../../src/webhooks/signing.js";
import { generateWebhookSecret, webhookSecretKey, webhookSecretProblem } from "../../src/webhooks/webhook-secrets.js";

const ID = "0b9c4f5e-2d7a-4c1e-9f3b-6a8d2e1f0c4b";
const TIMESTAMP = "2026-03-01T12:00:00Z";
const BODY = Buffer.from('{"specversion":"1.0","data":{"name":"Zoë ✓"}}');

const secretOf = (bytes: Buffer) => `whsec_${bytes.toString("base64")}`;
const keyOf = (secret: string) => Buffer.from(secret.slice("whsec_".length), "base64");

test("the timestamp is RFC 3339 UTC in whole seconds, or Unix seconds", (t) => {
  const date = new Date("2026-03-01T12:00:00.999Z");
  t.is(webhookTimestamp(date, "rfc3339"), "2026-03-01T12:00:00Z");
  t.is(webhookTimestamp(date, "unix"), "1772366400");
  t.is(webhookTimestamp(new Date("1999-12-31T23:59:59.001Z"), "rfc3339"), "1999-12-31T23:59:59Z");
});

test("the signature is HMAC-SHA256 over `id.timestamp.body` keyed with the secret's decoded bytes", (t) => {
  const secret = generateWebhookSecret();
  const key = keyOf(secret);
  const literal = `${ID}.${TIMESTAMP}.{"specversion":"1.0","data":{"name":"Zoë ✓"}}`;
  const expected = `v1,${createHmac("sha256", key).update(literal, "utf8").digest("base64")}`;
  t.is(signatureHeader([webhookSecretKey(secret)], ID, TIMESTAMP, BODY), expected);
  const keyedWithText = createHmac("sha256", secret).update(literal, "utf8").digest("base64");
  t.not(signatureHeader([webhookSecretKey(secret)], ID, TIMESTAMP, BODY), `v1,${keyedWithText}`);
});

test("the Standard Webhooks specification's published test vector is reproduced", (t) => {
  const key = webhookSecretKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  const header = signatureHeader(
    [key],
    "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "1614265330",
    Buffer.from('{"test": 2432232314}'),
  );
  t.is(header, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
});

test("the body is signed byte for byte, bytes that are not UTF-8 included", (t) => {
  const key = randomBytes(32);
  const body = Buffer.from([0x7b, 0xff, 0xfe, 0x00, 0x7d]);
  const expected = createHmac("sha256", key)
    .update(Buffer.concat([Buffer.from(`${ID}.${TIMESTAMP}.`), body]))
    .digest("base64");
  t.is(signatureHeader([key], ID, TIMESTAMP, body), `v1,${expected}`);
  t.true(verifySignatureHeader(`v1,${expected}`, [key], ID, TIMESTAMP, body));
  t.false(verifySignatureHeader(`v1,${expected}`, [key], ID, TIMESTAMP, Buffer.from(body.toString("utf8"))));
});

test("during a rotation both signatures are sent, current first, and either secret verifies", (t) => {
  const current = randomBytes(32);
  const previous = randomBytes(32);
  const header = signatureHeader([current, previous], ID, TIMESTAMP, BODY);
  const entries = header.split(" ");
  t.deepEqual(entries, [
    signatureHeader([current], ID, TIMESTAMP, BODY),
    signatureHeader([previous], ID, TIMESTAMP, BODY),
  ]);
  t.true(verifySignatureHeader(header, [current], ID, TIMESTAMP, BODY));
  t.true(verifySignatureHeader(header, [previous], ID, TIMESTAMP, BODY));
  t.false(verifySignatureHeader(header, [randomBytes(32)], ID, TIMESTAMP, BODY));
});

test("a signature verifies only for its own id, timestamp, body and key", (t) => {
  const key = randomBytes(32);
  const header = signatureHeader([key], ID, TIMESTAMP, BODY);
  t.true(verifySignatureHeader(header, [key], ID, TIMESTAMP, BODY));
  t.true(verifySignatureHeader(header, [randomBytes(32), key], ID, TIMESTAMP, BODY));
  t.false(verifySignatureHeader(header, [key], `${ID}x`, TIMESTAMP, BODY));
  t.false(verifySignatureHeader(header, [key], ID, "2026-03-01T12:00:01Z", BODY));
  t.false(verifySignatureHeader(header, [key], ID, TIMESTAMP, Buffer.concat([BODY, Buffer.from(" ")])));
  t.false(verifySignatureHeader(header, [], ID, TIMESTAMP, BODY));
});

test("only v1 entries count, and a malformed entry is no match", (t) => {
  const key = randomBytes(32);
  const digest = signatureHeader([key], ID, TIMESTAMP, BODY).slice("v1,".length);
  t.true(verifySignatureHeader(`v1a,junk  v1,${digest}`, [key], ID, TIMESTAMP, BODY));
  for (const header of [`v2,${digest}`, digest, `v1,${digest.slice(0, -1)}`, `v1,${digest}=`, `v1, ${digest}`, ""]) {
    t.false(verifySignatureHeader(header, [key], ID, TIMESTAMP, BODY), header);
  }
});

test("a unix-timestamp signature is verified by the standardwebhooks package itself", (t) => {
  const secret = generateWebhookSecret();
  const previousSecret = generateWebhookSecret();
  const timestamp = webhookTimestamp(new Date(), "unix");
  const body = Buffer.from(JSON.stringify({ type: "Entitlement.Activated", data: { name: "Zoë" } }));
  const signature = signatureHeader([secret, previousSecret].map(webhookSecretKey), ID, timestamp, body);
  const headers = { "webhook-id": ID, "webhook-timestamp": timestamp, "webhook-signature": signature };
  t.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body.toString()));
  t.deepEqual(new Webhook(previousSecret).verify(body, headers), JSON.parse(body.toString()));
  t.throws(() => new Webhook(generateWebhookSecret()).verify(body, headers), { message: /No matching signature/ });
  t.throws(() => new Webhook(secret).verify(Buffer.from(`${body} `), headers), { message: /No matching signature/ });
});

test("our header for a unix timestamp equals the one standardwebhooks signs", (t) => {
  const secret = generateWebhookSecret();
  const date = new Date("2026-03-01T12:00:00.750Z");
  const ours = signatureHeader([webhookSecretKey(secret)], ID, webhookTimestamp(date, "unix"), BODY);
  t.is(ours, new Webhook(secret).sign(ID, date, BODY));
});

test("a generated secret is whsec_ and the standard base64 of 32 random bytes", (t) => {
  const secrets = new Set(Array.from({ length: 20 }, generateWebhookSecret));
  t.is(secrets.size, 20);
  for (const secret of secrets) {
    t.regex(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    t.is(webhookSecretProblem(secret), null);
    t.deepEqual(webhookSecretKey(secret), keyOf(secret));
    t.is(webhookSecretKey(secret).length, 32);
  }
});

const SIZE = /must encode 24 to 64 bytes/;
const ENCODING = /must be "whsec_" followed by standard base64/;
const PREFIX = /must start with "whsec_"/;
const secretCases: Array<[string, string, RegExp | null]> = [
  ["24 bytes", secretOf(randomBytes(24)), null],
  ["32 bytes with + and /", secretOf(Buffer.alloc(32, 0xfb)), null],
  ["64 bytes", secretOf(randomBytes(64)), null],
  ["23 bytes", secretOf(randomBytes(23)), SIZE],
  ["nothing after the prefix", "whsec_", SIZE],
  ["65 bytes", secretOf(randomBytes(65)), SIZE],
  ["URL-safe alphabet", `whsec_${Buffer.alloc(30, 0xfb).toString("base64url")}`, ENCODING],
  ["URL-safe alphabet, unpadded", `whsec_${Buffer.alloc(32, 0xff).toString("base64url")}`, ENCODING],
  ["missing prefix", Buffer.alloc(32, 1).toString("base64"), PREFIX],
  ["upper-case prefix", `WHSEC_${Buffer.alloc(32, 1).toString("base64")}`, PREFIX],
  ["padding missing", secretOf(Buffer.alloc(32, 1)).replace(/=+$/, ""), ENCODING],
  ["padding doubled", `${secretOf(Buffer.alloc(32, 1))}=`, ENCODING],
  [
    "padding inside",
    `whsec_${Buffer.alloc(16, 1).toString("base64")}${Buffer.alloc(16, 1).toString("base64")}`,
    ENCODING,
  ],
  ["unused bits set", secretOf(Buffer.alloc(32, 1)).replace(/E=$/, "F="), ENCODING],
  ["white space", ` ${secretOf(Buffer.alloc(32, 1))}`, PREFIX],
  ["line break inside", secretOf(Buffer.alloc(32, 1)).replace(/^(.{20})/, "$1\n"), ENCODING],
  ["junk character", secretOf(Buffer.alloc(32, 1)).replace(/^(.{20})./, "$1*"), ENCODING],
];

for (const [name, secret, problem] of secretCases) {
  test(`secret parsing: ${name}`, (t) => {
    if (problem === null) {
      t.is(webhookSecretProblem(secret), null);
      t.deepEqual(webhookSecretKey(secret), keyOf(secret));
      return;
    }
    t.regex(webhookSecretProblem(secret) ?? "accepted", problem);
    t.throws(() => webhookSecretKey(secret), { message: problem });
  });
}
