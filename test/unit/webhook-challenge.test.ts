import { randomBytes } from "node:crypto";
import test from "ava";
import { type ChallengeReply, checkChallengeReply, newChallenge } from "../../src/webhooks/challenge.js";
import { signatureHeader } from "../../src/webhooks/signing.js";

const REQUEST_ID = "0b9c4f5e-2d7a-4c1e-9f3b-6a8d2e1f0c4b";
const REQUEST_TIMESTAMP = "2026-03-01T12:00:00Z";
const CURRENT = randomBytes(32);
const PREVIOUS = randomBytes(32);
const CHALLENGE = newChallenge();

/** A reply to the challenge: `body` signed with `signingKeys` over the request's id and timestamp. */
function reply(body: string, signingKeys: Buffer[] = [CURRENT], signedBody = body): ChallengeReply {
  const signature = signingKeys.length
    ? signatureHeader(signingKeys, REQUEST_ID, REQUEST_TIMESTAMP, Buffer.from(signedBody))
    : undefined;
  return {
    requestId: REQUEST_ID,
    requestTimestamp: REQUEST_TIMESTAMP,
    responseBody: Buffer.from(body),
    responseSignature: signature,
    keys: [CURRENT, PREVIOUS],
    challenge: CHALLENGE,
  };
}

const echo = JSON.stringify({ challenge: CHALLENGE });

test("a challenge is 32 random bytes in base64url", (t) => {
  const challenges = new Set(Array.from({ length: 20 }, newChallenge));
  t.is(challenges.size, 20);
  for (const challenge of challenges) {
    t.regex(challenge, /^[A-Za-z0-9_-]{43}$/);
    t.is(Buffer.from(challenge, "base64url").length, 32);
  }
});

test("an exact echo signed with the current or the previous key is accepted", (t) => {
  t.deepEqual(checkChallengeReply(reply(echo)), { ok: true });
  t.deepEqual(checkChallengeReply(reply(echo, [PREVIOUS])), { ok: true });
  t.deepEqual(checkChallengeReply(reply(`\n { "challenge" : "${CHALLENGE}" }\n`)), { ok: true });
});

const refusals: Array<[string, ChallengeReply, RegExp]> = [
  ["wrong echo", reply(JSON.stringify({ challenge: newChallenge() })), /^challenge not echoed: the value differs/],
  ["echo as a number", reply('{"challenge":1}'), /^challenge not echoed: the value differs/],
  ["extra member", reply(JSON.stringify({ challenge: CHALLENGE, ok: true })), /^challenge not echoed: .*one member/],
  ["other member", reply(JSON.stringify({ Challenge: CHALLENGE })), /^challenge not echoed: .*one member/],
  ["array", reply(JSON.stringify([CHALLENGE])), /^challenge not echoed: .*one member/],
  ["bare string", reply(JSON.stringify(CHALLENGE)), /^challenge not echoed: .*one member/],
  ["not JSON", reply(`challenge=${CHALLENGE}`), /^challenge not echoed: the body is not JSON/],
  ["empty body", reply(""), /^challenge not echoed: the body is not JSON/],
  ["unsigned", reply(echo, []), /^bad response signature: no webhook-signature header/],
  ["signed with another key", reply(echo, [randomBytes(32)]), /^bad response signature$/],
  ["signed over another body", reply(echo, [CURRENT], `${echo} `), /^bad response signature$/],
  [
    "signature in another version",
    { ...reply(echo), responseSignature: reply(echo).responseSignature?.replace("v1,", "v2,") },
    /^bad response signature$/,
  ],
];

for (const [name, candidate, error] of refusals) {
  test(`a challenge reply is refused: ${name}`, (t) => {
    const verdict = checkChallengeReply(candidate);
    t.false(verdict.ok);
    if (!verdict.ok) t.regex(verdict.error, error);
  });
}

test("the reply must be signed over the request's own id and timestamp", (t) => {
  const signature = signatureHeader([CURRENT], REQUEST_ID, "2026-03-01T12:00:01Z", Buffer.from(echo));
  t.false(checkChallengeReply({ ...reply(echo), responseSignature: signature }).ok);
  const otherId = signatureHeader([CURRENT], "another-id", REQUEST_TIMESTAMP, Buffer.from(echo));
  t.false(checkChallengeReply({ ...reply(echo), responseSignature: otherId }).ok);
});
