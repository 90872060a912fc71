import test, { type ExecutionContext } from "ava";
import type { DatabaseConfig } from "../../src/platform/config.js";
import { createDataSource, migrate } from "../../src/platform/database.js";
import { PreAuthorizedDeviceLimits1765296000000 } from "../../src/platform/migrations/0019-pre-authorized-device-limits.js";
import { migrations } from "../../src/platform/migrations/index.js";
import { activate, ENTITLEMENTS, entitlementWithCode } from "../support/licensing.js";
import { freshDatabase } from "../support/migration-databases.js";
import { rest } from "../support/rest.js";

// Migration 0019 gives a code issued with pre-authorized devices and no device limit of its own (stored as 0, which
// meant one device) the number of its pre-authorized devices as its limit, as codes issued since are given.
const NODE_LOCKED = { claimBasedActivation: { numberOfSeats: 0, isFloatingLicense: false } };

/** Stores these codes' limits as a code issued before 2026-11-29 had them, then applies 0019 (and those after) again. */
async function storeAsBefore0019(t: ExecutionContext, config: DatabaseConfig, codes: string[]) {
  const dataSource = await createDataSource(config, [], migrations).initialize();
  t.teardown(() => (dataSource.isInitialized ? dataSource.destroy() : undefined));
  const since0019 = migrations.slice(migrations.indexOf(PreAuthorizedDeviceLimits1765296000000));
  for (const _ of since0019) await dataSource.undoLastMigration({ transaction: "each" });
  const marks = codes.map(() => "?").join(", ");
  await dataSource.query(`UPDATE activation_codes SET max_device_activations = 0 WHERE code IN (${marks})`, codes);
  t.deepEqual(
    await migrate(dataSource),
    since0019.map((migration) => migration.name),
  );
  await dataSource.destroy();
}

async function codeLimits(baseUrl: string, entitlementId: string): Promise<Record<string, number>> {
  const listed = await rest(baseUrl, "GET", `${ENTITLEMENTS}/${entitlementId}/activation-codes?pageSize=10`);
  return Object.fromEntries(
    (listed.body.items as { activationCode: string; maxDeviceActivations: number }[]).map((code) => [
      code.activationCode,
      code.maxDeviceActivations,
    ]),
  );
}

for (const mode of ["MySQL", "SQLite"] as const) {
  test(`${mode}: an earlier code's pre-authorized devices may each activate once 0019 has run`, async (t) => {
    const { config, serve } = await freshDatabase(t, mode);
    let server = await serve();
    const listed = await entitlementWithCode(server.baseUrl, NODE_LOCKED, {
      preAuthorizedDevices: ["lab-1", "lab-2", "lab-3"],
    });
    const codesPath = `/api/v1/provision/operational/entitlement/${listed.entitlementId}/activation-codes`;
    const unlisted = (await rest(server.baseUrl, "POST", codesPath, {})).body;
    const limited = (
      await rest(server.baseUrl, "POST", codesPath, { preAuthorizedDevices: ["x", "y"], maxDeviceActivations: 1 })
    ).body;
    await server.close();

    await storeAsBefore0019(t, config, [listed.code]);
    server = await serve();
    t.teardown(() => server.close());
    t.deepEqual(await codeLimits(server.baseUrl, listed.entitlementId), {
      [listed.code]: 3,
      [unlisted.activationCode]: 0,
      [limited.activationCode]: 1,
    });
    for (const fingerprint of ["lab-2", "lab-3", "lab-1"]) {
      t.is((await activate(server.baseUrl, { activationCode: listed.code, fingerprint })).status, 200, fingerprint);
    }
  });
}
