import { randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import anyTest, { type TestFn } from "ava";
import { ActivationCodeDeviceEntity, EntitlementEntity, type EntitlementRow } from "../../src/licensing/entities.js";
import { DEFAULT_PROVIDER_ID } from "../../src/server/tenant.js";
import { accessToken } from "../support/auth.js";
import { steppingClock } from "../support/manual-clock.js";
import { createProviderWithClient } from "../support/providers.js";
import { rest } from "../support/rest.js";
import { startTestServer, type TestServer } from "../support/test-server.js";

interface Setup {
  server: TestServer;
  /** Authorization of a second provider's client (all scopes). */
  other: { providerId: string; authorization: string };
}

const test = anyTest as TestFn<Record<string, Setup>>;

const ENTITLEMENTS = "/api/v1/provision/admin/entitlements";
const GENERATED = /^[0-9A-HJKMNP-TV-Z]{5}(-[0-9A-HJKMNP-TV-Z]{5}){3}$/;
const INVITATION_FIELDS = [
  "id",
  "userId",
  "email",
  "activationRequiresValidDeviceId",
  "organizationGroupId",
  "activationCode",
  "fingerprint",
  "registeredFingerprints",
  "maxDeviceActivations",
  "userConsent",
  "requiresUserConsent",
  "sendUserNotification",
  "entitlementId",
  "activationTimeStamp",
  "expirationTimeStamp",
  "createdAt",
  "verificationCodeUseCount",
  "maxVerificationCodeUseCount",
  "activationCodeUseCount",
  "maxActivationCodeUseCount",
  "isTrialActivation",
  "useEntitlementMaxActivations",
  "isDeleted",
  "requiredAuthenticationLevel",
];

const issuePath = (entitlementId: string) =>
  `/api/v1/provision/operational/entitlement/${entitlementId}/activation-codes`;
const listPath = (entitlementId: string) => `${ENTITLEMENTS}/${entitlementId}/activation-codes`;

test.before(async (t) => {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-activation-codes-"));
  const servers = {
    MySQL: await startTestServer({ clock: steppingClock() }),
    SQLite: await startTestServer({
      clock: steppingClock(),
      embedded: { file: path.join(folder, "provision.sqlite") },
    }),
  };
  for (const [name, server] of Object.entries(servers)) {
    const other = await createProviderWithClient(server);
    const token = await accessToken(server.baseUrl, other.clientId, other.clientSecret);
    t.context[name] = { server, other: { providerId: other.providerId, authorization: `Bearer ${token}` } };
  }
});

test.after.always(async (t) => {
  for (const setup of Object.values(t.context)) await setup.server.close();
});

/**
 * An entitlement row written straight to the database: CreateEntitlement is another part of the service, built
 * at the same time, so these tests do not depend on it.
 */
async function insertEntitlement(
  server: TestServer,
  providerId = DEFAULT_PROVIDER_ID,
  overrides: Partial<EntitlementRow> = {},
): Promise<string> {
  const now = new Date();
  const row: EntitlementRow = {
    id: randomUUID(),
    providerId,
    name: "Gold",
    description: null,
    version: "1",
    legalNoticeHtml: null,
    customerContactEmail: "buyer@example.com",
    customerContactName: "Buyer",
    customerId: randomUUID(),
    allowLicenseActivation: true,
    licenseKey: null,
    expirationDateTime: null,
    isEntitlementTrial: false,
    isRevoked: false,
    isTemplate: false,
    templateName: null,
    templateVersion: null,
    orderId: "",
    reference: "",
    activationPolicy: null,
    revision: 1,
    createdAt: now,
    updatedAt: now,
    ...overrides,
  };
  await server.app.dataSource.manager.insert(EntitlementEntity, row);
  return row.id;
}

function uniqueCode(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

for (const database of ["MySQL", "SQLite"]) {
  test(`${database}: an empty body issues a generated code with every field of the invitation record`, async (t) => {
    const { server } = t.context[database];
    const entitlementId = await insertEntitlement(server);
    const { status, body } = await rest(server.baseUrl, "POST", issuePath(entitlementId), {});
    t.is(status, 200, JSON.stringify(body));
    t.deepEqual(Object.keys(body).sort(), [...INVITATION_FIELDS].sort());
    t.regex(body.activationCode, GENERATED);
    t.regex(body.id, /^[0-9a-f-]{36}$/);
    t.like(body, {
      entitlementId,
      isDeleted: false,
      activationRequiresValidDeviceId: false,
      registeredFingerprints: [],
      requiredAuthenticationLevel: 1,
      maxDeviceActivations: 0,
      activationCodeUseCount: 0,
      maxActivationCodeUseCount: 0,
      userConsent: false,
      activationTimeStamp: null,
      expirationTimeStamp: null,
    });
    t.regex(body.createdAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);

    const again = await rest(server.baseUrl, "POST", issuePath(entitlementId), {});
    t.not(again.body.activationCode, body.activationCode);
    const listed = await rest(server.baseUrl, "GET", listPath(entitlementId));
    t.deepEqual(
      listed.body.items.map((item: { activationCode: string }) => item.activationCode),
      [again.body.activationCode, body.activationCode],
    );
    t.deepEqual(listed.body.items[1], body);
  });

  test(`${database}: a vendor-chosen code is stored as given, with its invitation's settings`, async (t) => {
    const { server } = t.context[database];
    const entitlementId = await insertEntitlement(server);
    const code = uniqueCode("Acme Gold_2026");
    const userId = randomUUID();
    const parameters = {
      activationCode: `  ${code} `,
      requiredAuthenticationLevel: 2,
      email: "invitee@example.com",
      preAuthorizedDevices: ["device-a", "device-b", "device-a"],
      maxDeviceActivations: 3,
      maxActivationCodeUseCount: 12,
      fingerprint: "device-a",
      isTrialActivation: true,
      useEntitlementMaxActivations: true,
      requiresUserConsent: true,
      sendUserNotification: true,
      userId,
      organizationGroupId: randomUUID(),
      expirationTimeStamp: "2030-06-01T12:00:00Z",
    };
    const { status, body } = await rest(server.baseUrl, "POST", issuePath(entitlementId), parameters);
    t.is(status, 200, JSON.stringify(body));
    t.like(body, {
      activationCode: code,
      requiredAuthenticationLevel: 2,
      email: "invitee@example.com",
      registeredFingerprints: ["device-a", "device-b"],
      activationRequiresValidDeviceId: true,
      maxDeviceActivations: 3,
      maxActivationCodeUseCount: 12,
      fingerprint: "device-a",
      isTrialActivation: true,
      useEntitlementMaxActivations: true,
      requiresUserConsent: true,
      sendUserNotification: true,
      userId,
      organizationGroupId: parameters.organizationGroupId,
    });
    t.is(Date.parse(body.expirationTimeStamp), Date.parse("2030-06-01T12:00:00Z"));
    const listed = await rest(server.baseUrl, "GET", listPath(entitlementId));
    t.deepEqual(listed.body.items, [body]);
    const bound = await rest(server.baseUrl, "POST", issuePath(entitlementId), { fingerprint: "only-this-one" });
    t.true(bound.body.activationRequiresValidDeviceId, "a code bound to one device also admits no other");
  });

  test(`${database}: a code's key is unique across providers, whatever its case, separators or lookalikes`, async (t) => {
    const { server, other } = t.context[database];
    const ours = await insertEntitlement(server);
    const theirs = await insertEntitlement(server, other.providerId);
    const code = uniqueCode("Gold-Room");
    t.is((await rest(server.baseUrl, "POST", issuePath(ours), { activationCode: code })).status, 200);

    const variants = [
      code.toLowerCase(),
      code.toUpperCase().replaceAll("-", " "),
      code.replaceAll("-", "_").replaceAll("o", "0"),
      code.replaceAll("-", ""),
    ];
    for (const variant of variants) {
      const taken = await rest(
        server.baseUrl,
        "POST",
        issuePath(theirs),
        { activationCode: variant },
        { authorization: other.authorization },
      );
      t.is(taken.status, 409, variant);
      t.is(taken.body.type, "urn:provision:problem:activation-code-taken");
      t.false(JSON.stringify(taken.body).includes(ours), "the answer names the other provider's entitlement");
      const sameProvider = await rest(server.baseUrl, "POST", issuePath(ours), { activationCode: variant });
      t.is(sameProvider.status, 409, variant);
    }
    const listed = await rest(server.baseUrl, "GET", listPath(theirs), undefined, {
      authorization: other.authorization,
    });
    t.deepEqual(listed.body.items, []);
    const distinct = await rest(
      server.baseUrl,
      "POST",
      issuePath(theirs),
      { activationCode: `${code}-2` },
      {
        authorization: other.authorization,
      },
    );
    t.is(distinct.status, 200);
  });

  test(`${database}: invalid invitations answer 400 naming each field`, async (t) => {
    const { server } = t.context[database];
    const entitlementId = await insertEntitlement(server);
    const cases: [Record<string, unknown>, string][] = [
      [{ requiredAuthenticationLevel: 4 }, "requiredAuthenticationLevel"],
      [{ requiredAuthenticationLevel: 2 }, "email"],
      [{ sendUserNotification: true }, "email"],
      [{ email: "not-an-address" }, "email"],
      [{ email: "two@@example.com" }, "email"],
      [{ maxDeviceActivations: -1 }, "maxDeviceActivations"],
      [{ maxActivationCodeUseCount: -1 }, "maxActivationCodeUseCount"],
      [{ userId: "not-a-uuid" }, "userId"],
      [{ organizationGroupId: "123" }, "organizationGroupId"],
      [{ activationCode: "abc" }, "activationCode"],
      [{ activationCode: "   " }, "activationCode"],
      [{ activationCode: "ACME/2026" }, "activationCode"],
      [{ activationCode: "X".repeat(65) }, "activationCode"],
      [{ fingerprint: "f".repeat(513) }, "fingerprint"],
      [{ preAuthorizedDevices: ["ok", ""] }, "preAuthorizedDevices[1]"],
      [{ preAuthorizedDevices: ["   "] }, "preAuthorizedDevices[0]"],
      [{ preAuthorizedDevices: ["d".repeat(513)] }, "preAuthorizedDevices[0]"],
      [{ preAuthorizedDevices: Array.from({ length: 1001 }, (_, index) => `d${index}`) }, "preAuthorizedDevices"],
      [{ expirationTimeStamp: "2020-01-01T00:00:00Z" }, "expirationTimeStamp"],
    ];
    for (const [body, field] of cases) {
      const response = await rest(server.baseUrl, "POST", issuePath(entitlementId), body);
      t.is(response.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(response.body)}`);
      t.true(
        response.body.errors?.some((error: { field: string }) => error.field === field),
        `${field}: ${JSON.stringify(response.body.errors)}`,
      );
    }
    const several = await rest(server.baseUrl, "POST", issuePath(entitlementId), {
      email: "nope",
      userId: "nope",
      maxDeviceActivations: -2,
    });
    t.deepEqual(several.body.errors.map((error: { field: string }) => error.field).sort(), [
      "email",
      "maxDeviceActivations",
      "userId",
    ]);
    const blank = await rest(server.baseUrl, "POST", issuePath(entitlementId), { activationCode: "   " });
    t.regex(blank.body.errors[0].message, /is blank/);
    t.is((await rest(server.baseUrl, "POST", issuePath("not-a-uuid"), {})).status, 400);
    const listed = await rest(server.baseUrl, "GET", listPath(entitlementId));
    t.is(listed.body.totalCount, 0, "no invalid invitation was stored");
  });

  test(`${database}: a code for an entitlement whose policy asks for the email level must name the email`, async (t) => {
    const { server } = t.context[database];
    const entitlementId = await insertEntitlement(server, DEFAULT_PROVIDER_ID, {
      activationPolicy: JSON.stringify({ requiredAuthenticationLevel: 2 }),
    });
    const refused = await rest(server.baseUrl, "POST", issuePath(entitlementId), {});
    t.is(refused.status, 400, "it could never activate: every activation would answer email-mismatch");
    t.deepEqual(
      refused.body.errors.map((error: { field: string }) => error.field),
      ["email"],
    );
    const named = await rest(server.baseUrl, "POST", issuePath(entitlementId), { email: "invitee@example.com" });
    t.is(named.status, 200, JSON.stringify(named.body));
    const stricter = await rest(server.baseUrl, "POST", issuePath(entitlementId), { requiredAuthenticationLevel: 3 });
    t.is(stricter.status, 200, "the interactive-user level needs no email");
  });

  test(`${database}: codes only for an existing entitlement that is not a template`, async (t) => {
    const { server } = t.context[database];
    const unknown = await rest(server.baseUrl, "POST", issuePath(randomUUID()), {});
    t.is(unknown.status, 404);
    t.is(unknown.body.type, "urn:provision:problem:not-found");
    const template = await insertEntitlement(server, DEFAULT_PROVIDER_ID, {
      isTemplate: true,
      templateName: uniqueCode("template"),
      templateVersion: "1",
    });
    const refused = await rest(server.baseUrl, "POST", issuePath(template), {});
    t.is(refused.status, 409);
    t.is(refused.body.type, "urn:provision:problem:template-not-activatable");
    t.is((await rest(server.baseUrl, "GET", listPath(randomUUID()))).status, 404);
  });

  test(`${database}: the list pages newest first and includes deleted codes, marked`, async (t) => {
    const { server } = t.context[database];
    const entitlementId = await insertEntitlement(server);
    const elsewhere = await insertEntitlement(server);
    await rest(server.baseUrl, "POST", issuePath(elsewhere), {});
    const issued: { id: string; activationCode: string }[] = [];
    for (let index = 0; index < 5; index++) {
      issued.push((await rest(server.baseUrl, "POST", issuePath(entitlementId), {})).body);
    }
    const deleted = await rest(server.baseUrl, "DELETE", `${listPath(entitlementId)}/${issued[1].id}`);
    t.is(deleted.status, 200);

    const pages = [];
    for (const pageNumber of [1, 2, 3, 4]) {
      pages.push(
        (await rest(server.baseUrl, "GET", `${listPath(entitlementId)}?pageNumber=${pageNumber}&pageSize=2`)).body,
      );
    }
    t.like(pages[0], {
      currentPage: 1,
      pageSize: 2,
      totalCount: 5,
      totalPages: 3,
      from: 1,
      to: 2,
      hasPreviousPage: false,
      hasNextPage: true,
    });
    t.like(pages[2], { currentPage: 3, totalCount: 5, from: 5, to: 5, hasNextPage: false });
    t.like(pages[3], { currentPage: 4, totalCount: 5, from: 0, to: 0, items: [] });
    const ids = pages.flatMap((page) => page.items.map((item: { id: string }) => item.id));
    t.deepEqual(ids, issued.map((code) => code.id).reverse());
    const flags = pages.flatMap((page) => page.items.map((item: { isDeleted: boolean }) => item.isDeleted));
    t.deepEqual(flags, [false, false, false, true, false]);

    const tooBig = await rest(server.baseUrl, "GET", `${listPath(entitlementId)}?pageSize=101`);
    t.is(tooBig.status, 400);
  });

  test(`${database}: registeredFingerprints lists the pre-authorized devices, then those activated`, async (t) => {
    const { server } = t.context[database];
    const entitlementId = await insertEntitlement(server);
    const issued = await rest(server.baseUrl, "POST", issuePath(entitlementId), {
      preAuthorizedDevices: ["pc-1", "pc-2"],
    });
    const manager = server.app.dataSource.manager;
    for (const [fingerprint, second] of [
      ["pc-2", 1],
      ["laptop", 2],
    ] as const) {
      await manager.insert(ActivationCodeDeviceEntity, {
        activationCodeId: issued.body.id,
        fingerprintHash: fingerprint.padEnd(64, "0"),
        fingerprint,
        createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, second)),
      });
    }
    const listed = await rest(server.baseUrl, "GET", listPath(entitlementId));
    t.deepEqual(listed.body.items[0].registeredFingerprints, ["pc-1", "pc-2", "laptop"]);
    t.true(listed.body.items[0].activationRequiresValidDeviceId);
  });

  test(`${database}: delete is a soft delete, answers the same success again, and keeps the code taken`, async (t) => {
    const { server } = t.context[database];
    const entitlementId = await insertEntitlement(server);
    const code = uniqueCode("delete-me");
    const issued = await rest(server.baseUrl, "POST", issuePath(entitlementId), { activationCode: code });
    const target = `${listPath(entitlementId)}/${issued.body.id}`;
    const first = await rest(server.baseUrl, "DELETE", target);
    t.is(first.status, 200);
    const second = await rest(server.baseUrl, "DELETE", target);
    t.deepEqual([second.status, second.body], [first.status, first.body]);
    const listed = await rest(server.baseUrl, "GET", listPath(entitlementId));
    t.deepEqual(listed.body.items, [{ ...issued.body, isDeleted: true }]);
    const reissued = await rest(server.baseUrl, "POST", issuePath(entitlementId), { activationCode: code });
    t.is(reissued.status, 409);

    t.is((await rest(server.baseUrl, "DELETE", `${listPath(entitlementId)}/${randomUUID()}`)).status, 404);
    const otherEntitlement = await insertEntitlement(server);
    const wrongParent = await rest(server.baseUrl, "DELETE", `${listPath(otherEntitlement)}/${issued.body.id}`);
    t.is(wrongParent.status, 404);
    t.is((await rest(server.baseUrl, "DELETE", `${listPath(entitlementId)}/not-a-uuid`)).status, 400);
  });

  test(`${database}: another provider's entitlement and codes answer 404 and stay unchanged`, async (t) => {
    const { server, other } = t.context[database];
    const entitlementId = await insertEntitlement(server);
    const code = uniqueCode("secret-code");
    const issued = await rest(server.baseUrl, "POST", issuePath(entitlementId), { activationCode: code });
    const asOther = { authorization: other.authorization };
    const calls: [string, string, unknown?][] = [
      ["POST", issuePath(entitlementId), {}],
      ["GET", listPath(entitlementId)],
      ["DELETE", `${listPath(entitlementId)}/${issued.body.id}`],
    ];
    for (const [method, target, body] of calls) {
      const response = await rest(server.baseUrl, method, target, body, asOther);
      t.is(response.status, 404, `${method} ${target}`);
      t.false(JSON.stringify(response.body).includes(code));
    }
    const theirs = await insertEntitlement(server, other.providerId);
    const crossed = await rest(server.baseUrl, "DELETE", `${listPath(theirs)}/${issued.body.id}`, undefined, asOther);
    t.is(crossed.status, 404);
    const listed = await rest(server.baseUrl, "GET", listPath(entitlementId));
    t.deepEqual(listed.body.items, [issued.body]);
  });

  test(`${database}: 20 concurrent issues of one vendor-chosen code: exactly one succeeds`, async (t) => {
    const { server, other } = t.context[database];
    const ours = await insertEntitlement(server);
    const theirs = await insertEntitlement(server, other.providerId);
    const code = uniqueCode("race");
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        index % 2 === 0
          ? rest(server.baseUrl, "POST", issuePath(ours), { activationCode: code })
          : rest(
              server.baseUrl,
              "POST",
              issuePath(theirs),
              { activationCode: code.toLowerCase() },
              {
                authorization: other.authorization,
              },
            ),
      ),
    );
    const statuses = responses.map((response) => response.status).sort();
    t.deepEqual(statuses, [200, ...Array(19).fill(409)], JSON.stringify(responses.map((response) => response.body)));
    t.true(
      responses
        .filter((response) => response.status === 409)
        .every((response) => response.body.type === "urn:provision:problem:activation-code-taken"),
    );
    const ourList = await rest(server.baseUrl, "GET", listPath(ours));
    const theirList = await rest(server.baseUrl, "GET", listPath(theirs), undefined, {
      authorization: other.authorization,
    });
    t.is(ourList.body.totalCount + theirList.body.totalCount, 1);
  });
}
