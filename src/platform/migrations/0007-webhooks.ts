import type { MigrationInterface, QueryRunner } from "typeorm";
import { Table } from "typeorm/schema-builder/table/Table.js";
import { columnsFor } from "./columns.js";

type Columns = Awaited<ReturnType<typeof columnsFor>>;

function subscriptions(c: Columns): Table {
  return new Table({
    name: "webhook_subscriptions",
    columns: [
      c.id(),
      c.uuid("provider_id"),
      c.string("url", 2048),
      // JSON arrays and the filter object, as the API takes them.
      c.text("event_types"),
      c.text("filter"),
      c.text("callback_scopes"),
      // The client that last set the callback scopes: callback tokens are issued in its name.
      c.code("callback_client_id", 64),
      c.int("state"),
      c.string("description", 1024),
      c.code("timestamp_format", 16),
      // Sealed with the key-encryption key, as signing keys are: HMAC needs the secret itself.
      c.text("secret"),
      c.text("previous_secret"),
      c.datetime("previous_secret_expires_at", true),
      // The delivery of the challenge that can activate the subscription.
      c.uuid("challenge_delivery_id", true),
      // The first failed attempt since the last success.
      c.datetime("failing_since", true),
      // Deleted subscriptions are kept (their delivery audit stays readable) but no longer answered.
      c.datetime("deleted_at", true),
      c.datetime("created_at"),
      c.datetime("updated_at"),
    ],
    indices: [
      { name: "ix_webhook_subscriptions_provider", columnNames: ["provider_id", "created_at"] },
      { name: "ix_webhook_subscriptions_failing", columnNames: ["state", "failing_since"] },
    ],
  });
}

/** The outbox: one row per event, written in the transaction of the change that caused it. */
function events(c: Columns): Table {
  return new Table({
    name: "webhook_events",
    columns: [
      c.id(),
      c.uuid("provider_id"),
      c.code("type", 128),
      c.code("entity_kind", 32),
      c.code("entity_id", 64),
      // The envelope, exactly as every delivery sends it.
      c.text("payload"),
      c.boolean("is_test"),
      // Challenges and test-fires go to one subscription; other events to every matching one.
      c.uuid("target_subscription_id", true),
      c.datetime("fanned_out_at", true),
      c.datetime("created_at"),
    ],
    indices: [{ name: "ix_webhook_events_unfanned", columnNames: ["fanned_out_at", "created_at"] }],
  });
}

function deliveries(c: Columns): Table {
  return new Table({
    name: "webhook_deliveries",
    columns: [
      c.id(),
      c.uuid("provider_id"),
      c.uuid("subscription_id"),
      c.uuid("event_id"),
      c.code("event_type", 128),
      c.boolean("is_test"),
      c.int("status"),
      c.int("attempt_count"),
      // Position in the retry schedule; a requeue starts it again while attempt_count goes on.
      c.int("schedule_step"),
      // NULL while pending = waiting for the subscription to be Active again.
      c.datetime("next_attempt_at", true),
      // The claim of the worker attempting it; its result is written only while the claim is still its own.
      c.code("claim_id", 36, true),
      c.datetime("last_attempt_at", true),
      c.int("last_status_code"),
      c.string("last_error", 1000),
      c.datetime("created_at"),
      c.datetime("completed_at", true),
    ],
    uniques: [{ name: "uq_webhook_deliveries_event_subscription", columnNames: ["event_id", "subscription_id"] }],
    indices: [
      { name: "ix_webhook_deliveries_due", columnNames: ["status", "next_attempt_at"] },
      { name: "ix_webhook_deliveries_subscription", columnNames: ["subscription_id", "status", "created_at"] },
      { name: "ix_webhook_deliveries_completed", columnNames: ["status", "completed_at"] },
    ],
  });
}

function attempts(c: Columns): Table {
  return new Table({
    name: "webhook_delivery_attempts",
    columns: [
      c.id(),
      c.uuid("delivery_id"),
      c.int("attempt"),
      c.datetime("started_at"),
      c.int("duration_ms"),
      c.int("status_code"),
      c.string("error", 1000),
      // The first 4,096 bytes of the response body.
      c.text("response_body"),
      c.boolean("response_truncated"),
    ],
    indices: [{ name: "ix_webhook_attempts_delivery", columnNames: ["delivery_id", "attempt"] }],
    foreignKeys: [
      {
        name: "fk_webhook_attempts_delivery",
        columnNames: ["delivery_id"],
        referencedTableName: "webhook_deliveries",
        referencedColumnNames: ["id"],
        onDelete: "CASCADE",
      },
    ],
  });
}

/** Time-driven work runs on the one instance holding its lease. */
function schedulerLeases(c: Columns): Table {
  return new Table({
    name: "scheduler_leases",
    columns: [
      { ...c.code("name", 64), isPrimary: true },
      c.code("holder", 64),
      c.datetime("expires_at"),
      c.datetime("acquired_at"),
    ],
  });
}

export class Webhooks1764259200000 implements MigrationInterface {
  name = "Webhooks1764259200000";

  async up(queryRunner: QueryRunner): Promise<void> {
    const c = await columnsFor(queryRunner);
    for (const table of [subscriptions(c), events(c), deliveries(c), attempts(c), schedulerLeases(c)]) {
      await queryRunner.createTable(table);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const name of [
      "scheduler_leases",
      "webhook_delivery_attempts",
      "webhook_deliveries",
      "webhook_events",
      "webhook_subscriptions",
    ]) {
      await queryRunner.dropTable(name);
    }
  }
}
