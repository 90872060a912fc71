import { randomUUID } from "node:crypto";
import type { DescMessage, Message } from "@bufbuild/protobuf";
import type { DataSource, EntityManager } from "typeorm";
import { SqlTable } from "../catalog/sql-table.js";
import type { Statement } from "../platform/statement-batch.js";
import { encodeResponseText } from "../server/rest/json-encoder.js";
import { WebhookEventEntity, type WebhookEventRow } from "./entities.js";
import { envelopeText, withTestFlag } from "./envelope.js";
import { receivingProvidersStatement } from "./subscription-store.js";

/** An event to send, as the change that causes it describes it. */
export interface EventDraft {
  providerId: string;
  type: string;
  entityKind: string;
  entityId: string;
  subject: string;
  eventVersion: number;
  /** When the change happened. */
  time: Date;
  /** The event's data: a message of its type's data schema (webhook_events.proto). */
  dataSchema: DescMessage;
  data: Message;
  isTest?: boolean;
  /** Sent to this subscription only (challenges, test-fires) instead of every matching one. */
  targetSubscriptionId?: string;
}

/**
 * Writes events into the outbox in the transaction of the change that causes them: they are sent if and only
 * if it commits. A broadcast event is written only if its provider has a subscription that receives events, as
 * the transaction reads them (the fan-out would match it to nobody): providers without webhooks pay nothing for
 * their events, and a subscription receives the events of changes ordered after it began receiving.
 * `committed` wakes this instance's delivery worker once the transaction has.
 */
export class Outbox {
  private readonly events: SqlTable<WebhookEventRow>;
  private readonly listeners = new Set<() => void>();

  constructor(dataSource: DataSource) {
    this.events = new SqlTable(dataSource, WebhookEventEntity);
  }

  /**
   * Appends the events that have receivers (targeted ones, and broadcast ones of a provider with a receiving
   * subscription); answers the ids of those written (the envelope `id` and `webhook-id`).
   */
  async append(manager: EntityManager, drafts: EventDraft[]): Promise<string[]> {
    const rows = (await this.withReceivers(manager, drafts)).map(rowOf);
    if (rows.length > 0) await this.events.insert(manager, rows);
    return rows.map((row) => row.id);
  }

  /**
   * Reads which of these providers have a subscription that receives broadcast events, for a batch of the causing
   * transaction; `receivingOf` reads its result. Append a provider's broadcast events only when it does.
   */
  receiversStatement(providerIds: string[]): Statement {
    return receivingProvidersStatement(providerIds);
  }

  receivingOf(result: unknown): Set<string> {
    return new Set((result as { provider_id: string }[]).map((row) => row.provider_id));
  }

  /** The INSERT appending a few events (at most 100), for a batch of the causing transaction. */
  appendStatement(drafts: EventDraft[]): Statement {
    return this.events.insertStatement(drafts.map(rowOf));
  }

  committed(): void {
    for (const listener of this.listeners) listener();
  }

  /** Appends for one piece of work, whose `committed` wakes the worker only if something was written. */
  writes(): OutboxWrites {
    return new OutboxWrites(this);
  }

  onCommitted(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async withReceivers(manager: EntityManager, drafts: EventDraft[]): Promise<EventDraft[]> {
    const broadcasters = [...new Set(drafts.filter(isBroadcast).map((draft) => draft.providerId))];
    if (broadcasters.length === 0) return drafts;
    const { sql, parameters } = this.receiversStatement(broadcasters);
    const receiving = this.receivingOf(await manager.query(sql, parameters));
    return drafts.filter((draft) => !isBroadcast(draft) || receiving.has(draft.providerId));
  }
}

function isBroadcast(draft: EventDraft): boolean {
  return draft.targetSubscriptionId === undefined;
}

function rowOf(draft: EventDraft): WebhookEventRow {
  const id = randomUUID();
  const data = encodeResponseText(draft.dataSchema, draft.data);
  const payload = envelopeText({
    id,
    providerId: draft.providerId,
    type: draft.type,
    time: draft.time,
    subject: draft.subject,
    entityKind: draft.entityKind,
    entityId: draft.entityId,
    eventVersion: draft.eventVersion,
    dataJson: draft.isTest ? withTestFlag(data) : data,
  });
  return {
    id,
    providerId: draft.providerId,
    type: draft.type,
    entityKind: draft.entityKind,
    entityId: draft.entityId,
    payload,
    isTest: draft.isTest ?? false,
    targetSubscriptionId: draft.targetSubscriptionId ?? null,
    fannedOutAt: null,
    createdAt: draft.time,
  };
}

/**
 * The events one piece of work appends (in one transaction, or in a transaction run again after a deadlock):
 * after its commit the delivery worker is woken only if any was written, so that the changes of a provider
 * without webhooks do not set off a fan-out round each.
 */
export class OutboxWrites {
  private written = 0;

  constructor(private readonly outbox: Outbox) {}

  async append(manager: EntityManager, drafts: EventDraft[]): Promise<string[]> {
    const ids = await this.outbox.append(manager, drafts);
    this.written += ids.length;
    return ids;
  }

  committed(): void {
    if (this.written > 0) this.outbox.committed();
  }
}
