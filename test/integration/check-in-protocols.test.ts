import { create, fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import anyTest, { type TestFn } from "ava";
import {
  ActivationService,
  type CheckInSessionResponse,
  CheckInSessionResponseSchema,
} from "../../gen/provision/v1/activation_pb.js";
import { grpcClient } from "../support/grpc-client.js";
import { activate, entitlementWithCode, sessionCall, sessionIdOf } from "../support/licensing.js";
import { type BothDatabases, startOnBothDatabases } from "../support/test-server.js";

const test = anyTest as TestFn<BothDatabases>;

test.before(async (t) => {
  Object.assign(t.context, await startOnBothDatabases());
});

test.after.always(async (t) => {
  await t.context.close?.();
});

/** The answer without the server's clock, which moves between calls. */
function standing(answer: CheckInSessionResponse) {
  return { ...(toJson(CheckInSessionResponseSchema, answer) as Record<string, unknown>), serverTime: undefined };
}

for (const mode of ["MySQL", "SQLite"] as const) {
  test(`${mode}: check-in answers the same over REST, Connect and gRPC`, async (t) => {
    const { baseUrl } = t.context.servers[mode];
    const { code } = await entitlementWithCode(
      baseUrl,
      { claimBasedActivation: { numberOfSeats: 2, isFloatingLicense: true } },
      { useEntitlementMaxActivations: true },
      { expirationDateTime: "2099-01-02T03:04:05.678Z" },
    );
    const activated = await activate(baseUrl, { activationCode: code, fingerprint: "protocols" });
    t.is(activated.status, 200);
    const token = activated.body.licenseToken as string;
    const sessionId = sessionIdOf(token);

    const rest = await sessionCall(baseUrl, token, "check-in");
    t.is(rest.status, 200);
    const overRest = fromJson(CheckInSessionResponseSchema, rest.body);
    t.is(overRest.sessionId, sessionId);
    t.is(overRest.expirationDateTime?.nanos, 678_000_000);

    const connect = await fetch(`${baseUrl}/provision.v1.ActivationService/CheckInSession`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ sessionId }),
    });
    t.is(connect.status, 200);
    const overConnect = fromJson(CheckInSessionResponseSchema, (await connect.json()) as JsonValue);

    const grpcAddress = new URL(baseUrl).host;
    const client = grpcClient(ActivationService, grpcAddress);
    t.teardown(() => client.close());
    const metadata = new grpc.Metadata();
    metadata.set("authorization", `Bearer ${token}`);
    const overGrpc = await client.call<CheckInSessionResponse>(
      "checkInSession",
      create(ActivationService.method.checkInSession.input, { sessionId }),
      metadata,
    );

    t.deepEqual(standing(overConnect), standing(overRest));
    t.deepEqual(standing(overGrpc), standing(overRest));
    t.true(overGrpc.serverTime !== undefined && overGrpc.leaseExpiresAt !== undefined);
  });
}
