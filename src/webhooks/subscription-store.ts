import type { DataSource, EntityManager } from "typeorm";
import { placeholders, SqlTable } from "../catalog/sql-table.js";
import { runBatch, type Statement } from "../platform/statement-batch.js";
import { WebhookSubscriptionEntity, type WebhookSubscriptionRow } from "./entities.js";
import { RECEIVING_CONDITION } from "./subscription-states.js";

/** Which of these providers have a live subscription that receives broadcast events: one row each, for a batch. */
export function receivingProvidersStatement(providerIds: string[]): Statement {
  return {
    sql: `SELECT DISTINCT provider_id FROM webhook_subscriptions WHERE provider_id IN (${placeholders(providerIds.length)}) AND ${RECEIVING_CONDITION.sql}`,
    parameters: [...providerIds, ...RECEIVING_CONDITION.parameters],
  };
}

/** The SQL of webhook subscriptions; every read is by provider, and deleted subscriptions are not found. */
export class SubscriptionStore {
  readonly table: SqlTable<WebhookSubscriptionRow>;

  constructor(private readonly dataSource: DataSource) {
    this.table = new SqlTable(dataSource, WebhookSubscriptionEntity);
  }

  async insert(manager: EntityManager, row: WebhookSubscriptionRow): Promise<void> {
    await this.table.insert(manager, [row]);
  }

  async update(manager: EntityManager, row: WebhookSubscriptionRow): Promise<void> {
    await this.table.update(manager, row);
  }

  /** The provider's live subscription; `lock` takes its row until the transaction ends. */
  async find(
    manager: EntityManager,
    providerId: string,
    id: string,
    lock = false,
  ): Promise<WebhookSubscriptionRow | null> {
    const locking = lock && manager.connection.options.type === "mysql" ? " FOR UPDATE" : "";
    const [row] = await this.table.select(manager, `id = ? AND provider_id = ? AND deleted_at IS NULL${locking}`, [
      id,
      providerId,
    ]);
    return row ?? null;
  }

  /** A subscription by id alone, deleted or not, its row locked until the transaction ends. */
  async lockAny(manager: EntityManager, id: string): Promise<WebhookSubscriptionRow | null> {
    const locking = manager.connection.options.type === "mysql" ? " FOR UPDATE" : "";
    const [row] = await this.table.select(manager, `id = ?${locking}`, [id]);
    return row ?? null;
  }

  /** Writes what deliveries change of a subscription, and nothing else (an administrator may change the rest). */
  async setStanding(
    manager: EntityManager,
    row: Pick<
      WebhookSubscriptionRow,
      "id" | "state" | "failingSince" | "challengeDeliveryId" | "verifiedAt" | "updatedAt"
    >,
  ): Promise<void> {
    const date = (value: Date | null) =>
      value &&
      this.dataSource.driver.preparePersistentValue(
        value,
        this.table.columns.find((column) => column.propertyName === "updatedAt") as never,
      );
    await manager.query(
      "UPDATE webhook_subscriptions SET state = ?, failing_since = ?, challenge_delivery_id = ?, verified_at = ?, updated_at = ? WHERE id = ?",
      [row.state, date(row.failingSince), row.challengeDeliveryId, date(row.verifiedAt), date(row.updatedAt), row.id],
    );
  }

  /** A subscription by id alone, deleted or not (deliveries read theirs). */
  async findAny(manager: EntityManager, id: string): Promise<WebhookSubscriptionRow | null> {
    const [row] = await this.table.select(manager, "id = ?", [id]);
    return row ?? null;
  }

  /** Subscriptions by id, deleted or not (a claimed batch of deliveries reads theirs at once). */
  async findAnyOf(manager: EntityManager, ids: string[]): Promise<Map<string, WebhookSubscriptionRow>> {
    const [rows] = await runBatch(manager, this.findAnyOfStatement(ids));
    return this.subscriptionsFrom(rows);
  }

  /** findAnyOf's statement, for a batch (none for no ids); `subscriptionsFrom` reads the result. */
  findAnyOfStatement(ids: string[]): Statement[] {
    const unique = [...new Set(ids)];
    if (unique.length === 0) return [];
    return [this.table.selectStatement(`id IN (${unique.map(() => "?").join(", ")})`, unique)];
  }

  subscriptionsFrom(result: unknown): Map<string, WebhookSubscriptionRow> {
    return new Map(this.table.hydrateAll(result ?? []).map((row) => [row.id, row]));
  }

  page(manager: EntityManager, providerId: string, offset: number, limit: number) {
    return this.table.page(manager, {
      where: "provider_id = ? AND deleted_at IS NULL",
      parameters: [providerId],
      order: "created_at DESC, id",
      offset,
      limit,
    });
  }

  /**
   * The live subscriptions of these providers that receive broadcast events (RECEIVING_CONDITION), for a batch
   * (none for no providers); `rowsFrom` reads the result.
   */
  receivingOfStatements(providerIds: string[]): Statement[] {
    if (providerIds.length === 0) return [];
    const providers = providerIds.map(() => "?").join(", ");
    return [
      this.table.selectStatement(`provider_id IN (${providers}) AND ${RECEIVING_CONDITION.sql}`, [
        ...providerIds,
        ...RECEIVING_CONDITION.parameters,
      ]),
    ];
  }

  rowsFrom(result: unknown): WebhookSubscriptionRow[] {
    return this.table.hydrateAll(result ?? []);
  }
}
