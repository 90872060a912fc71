/**
 * What MariaDB alone makes of an activation's transaction, with no service in the way:
 *   node --import tsx bench/activation-replay.ts [with-receivers|without-receivers,...] [seconds] [rounds]
 * seeds the licensing fixture through the compiled service (then stops it), and replays the statements one
 * activation on MySQL sends (as the general log shows them: the two batches of a code's activation with a seat
 * plan, over the fixture's 16 entitlements in turn, a fresh device each) from a raw mysql2 pool of 32
 * connections, as fast as they go. Prints, per variant and round, transactions per second and the CPU
 * microseconds MariaDB and this client used per transaction, as JSON lines. `without-receivers` leaves out the
 * check for a provider's webhook receivers, to show what one statement costs.
 */
import { randomUUID } from "node:crypto";
import mysql from "mysql2/promise";
import { codeKey } from "../src/licensing/activation-code-format.js";
import { ensureCompiled } from "../test/support/compiled-build.js";
import { seedCatalog } from "./catalog-fixture.js";
import { seedLicensing } from "./licensing-fixture.js";
import { cpuSecondsOf, mariadbPid } from "./processes.js";
import { onFreshStorage, type Storage, startProvision } from "./provision-server.js";

const [variantList = "with-receivers,without-receivers", seconds = "4", rounds = "2"] = process.argv.slice(2);
const CONNECTIONS = 32;

interface Code {
  id: string;
  entitlement_id: string;
  code_key: string;
  provider_id: string;
}

const ENTITLEMENT = `SELECT id, provider_id, name, description, version, legal_notice_html, customer_contact_email,
  customer_contact_name, customer_id, allow_license_activation, license_key, expiration_date_time,
  is_entitlement_trial, is_revoked, is_template, template_name, template_version, order_id, reference,
  activation_policy, revision, created_at, updated_at FROM entitlements WHERE id = ? FOR UPDATE`;
const CODE = `SELECT id, provider_id, entitlement_id, code, code_key, required_authentication_level, email, user_id,
  organization_group_id, fingerprint, pre_authorized_devices, max_device_activations, activation_code_use_count,
  max_activation_code_use_count, verification_code_use_count, max_verification_code_use_count, user_consent,
  requires_user_consent, send_user_notification, is_trial_activation, use_entitlement_max_activations, is_deleted,
  activation_time_stamp, expiration_time_stamp, created_at FROM activation_codes WHERE code_key = ? FOR UPDATE`;
const DEVICE_SESSIONS =
  "SELECT id, holds_floating_seat FROM license_sessions WHERE entitlement_id = ? AND fingerprint_hash = ? AND state = 1 FOR UPDATE";
const RECEIVERS = `SELECT 1 AS receiving FROM webhook_subscriptions WHERE provider_id = ?
  AND (state IN (2, 4) OR (state = 1 AND verified_at IS NOT NULL)) AND deleted_at IS NULL LIMIT 1`;
const CODE_DEVICE = `INSERT INTO activation_code_devices (activation_code_id, fingerprint_hash, fingerprint, created_at)
  VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE fingerprint_hash = fingerprint_hash`;
const SEATS = "SELECT held, earliest_end FROM floating_seat_counts WHERE entitlement_id = ? FOR UPDATE";
const TAKE_SEAT = "UPDATE floating_seat_counts SET held = held + 1, earliest_end = ? WHERE entitlement_id = ?";
const CODE_USE = `UPDATE activation_codes SET activation_code_use_count = activation_code_use_count + 1,
  activation_time_stamp = COALESCE(activation_time_stamp, ?), user_consent = (user_consent OR false) WHERE id = ?`;
const SESSION = `INSERT INTO license_sessions (id, provider_id, entitlement_id, activation_code_id, fingerprint,
  fingerprint_hash, state, is_floating, holds_floating_seat, is_trial, activated_at, lease_expires_at, grace_ends_at,
  last_check_in_at, software_version, client_address, ended_at)
  VALUES (?, ?, ?, ?, ?, ?, 1, true, true, false, ?, ?, ?, ?, '', '127.0.0.1', NULL)`;

/** The two batches of one activation of `code` by `device`, as multi-statement texts. */
function batchesOf(code: Code, device: string, withReceivers: boolean): [string, string] {
  const now = new Date();
  const first = [
    "START TRANSACTION",
    mysql.format(ENTITLEMENT, [code.entitlement_id]),
    mysql.format(CODE, [code.code_key]),
    mysql.format(DEVICE_SESSIONS, [code.entitlement_id, device]),
    ...(withReceivers ? [mysql.format(RECEIVERS, [code.provider_id])] : []),
    mysql.format(CODE_DEVICE, [code.id, device, device, now]),
    mysql.format(SEATS, [code.entitlement_id]),
  ];
  const second = [
    mysql.format(TAKE_SEAT, [now, code.entitlement_id]),
    mysql.format(CODE_USE, [now, code.id]),
    mysql.format(SESSION, [
      randomUUID(),
      code.provider_id,
      code.entitlement_id,
      code.id,
      device,
      device,
      now,
      now,
      now,
      now,
    ]),
    "COMMIT",
  ];
  return [first.join(";\n"), second.join(";\n")];
}

async function replay(pool: mysql.Pool, codes: Code[], variant: string) {
  const withReceivers = variant === "with-receivers";
  const until = Date.now() + Number(seconds) * 1000;
  let transactions = 0;
  const mariadb = mariadbPid();
  const before = { mariadb: cpuSecondsOf(mariadb), client: process.cpuUsage() };
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const connection = await pool.getConnection();
      try {
        while (Date.now() < until) {
          const [first, second] = batchesOf(codes[transactions % codes.length], randomUUID(), withReceivers);
          transactions++;
          await connection.query(first);
          await connection.query(second);
        }
      } finally {
        connection.release();
      }
    }),
  );
  const client = process.cpuUsage(before.client);
  return {
    variant,
    transactionsPerSecond: Math.round(transactions / Number(seconds)),
    mariadbMicroseconds: Math.round(((cpuSecondsOf(mariadb) - before.mariadb) * 1e6) / transactions),
    clientMicroseconds: Math.round((client.user + client.system) / transactions),
  };
}

async function measure(storage: Storage) {
  const provision = await startProvision(storage, "info");
  const fixture = await seedCatalog(provision.baseUrl, provision.admin);
  const seeded = await seedLicensing(provision.baseUrl, fixture.authorization, fixture.productId);
  await provision.stop();
  const pool = mysql.createPool({ uri: storage.databaseUrl, connectionLimit: CONNECTIONS, multipleStatements: true });
  pool.on("connection", (connection) => {
    connection.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
  });
  try {
    const [rows] = await pool.query("SELECT id, entitlement_id, code_key, provider_id FROM activation_codes");
    const customerKeys = new Set(seeded.customerCodes.map(codeKey));
    const codes = (rows as Code[]).filter((code) => customerKeys.has(code.code_key));
    if (codes.length !== seeded.customerCodes.length) throw new Error("the fixture's codes were not all found");
    await replay(pool, codes, "with-receivers");
    for (let round = 0; round < Number(rounds); round++) {
      for (const variant of variantList.split(",")) console.log(JSON.stringify(await replay(pool, codes, variant)));
    }
  } finally {
    await pool.end();
  }
}

ensureCompiled();
await onFreshStorage("mysql", measure);
