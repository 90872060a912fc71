import { randomUUID } from "node:crypto";
import type { DescMessage, Message } from "@bufbuild/protobuf";
import type { DataSource, EntityManager } from "typeorm";
import { SqlTable } from "../catalog/sql-table.js";
import type { Statement } from "../platform/statement-batch.js";
import { encodeResponseText } from "../server/rest/json-encoder.js";
import { WebhookEventEntity, type WebhookEventRow } from "./entities.js";
import { envelopeText, withTestFlag } from "./envelope.js";
import { RECEIVING_CONDITION } from "./subscription-states.js";

/** Events per INSERT. */
const APPEND_CHUNK = 100;

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
 * if it commits. A broadcast event is written only if its provider has a subscription that receives events
 * when its INSERT runs (the fan-out would match it to nothing otherwise): providers without webhooks pay
 * nothing for their events. `committed` wakes this instance's delivery worker once the transaction has.
 */
export class Outbox {
  private readonly events: SqlTable<WebhookEventRow>;
  private readonly listeners = new Set<() => void>();

  constructor(dataSource: DataSource) {
    this.events = new SqlTable(dataSource, WebhookEventEntity);
  }

  /** Appends the events; answers their ids (the envelope `id` and `webhook-id`). */
  async append(manager: EntityManager, drafts: EventDraft[]): Promise<string[]> {
    const rows = drafts.map(rowOf);
    for (let start = 0; start < rows.length; start += APPEND_CHUNK) {
      for (const { sql, parameters } of this.insertsOf(rows.slice(start, start + APPEND_CHUNK))) {
        await manager.query(sql, parameters);
      }
    }
    return rows.map((row) => row.id);
  }

  /** The INSERTs appending a few events (at most 100), for a batch of the causing transaction. */
  appendStatements(drafts: EventDraft[]): Statement[] {
    return this.insertsOf(drafts.map(rowOf));
  }

  /** Targeted events as they are; broadcast ones by provider, each on the condition that it receives events. */
  private insertsOf(rows: WebhookEventRow[]): Statement[] {
    const targeted = rows.filter((row) => row.targetSubscriptionId !== null);
    const statements = targeted.length > 0 ? [this.events.insertStatement(targeted)] : [];
    const broadcast = new Map<string, WebhookEventRow[]>();
    for (const row of rows.filter((row) => row.targetSubscriptionId === null)) {
      const ofProvider = broadcast.get(row.providerId);
      if (ofProvider) ofProvider.push(row);
      else broadcast.set(row.providerId, [row]);
    }
    for (const [providerId, ofProvider] of broadcast) {
      statements.push(this.events.insertWhereStatement(ofProvider, receivingSubscriptionOf(providerId)));
    }
    return statements;
  }

  committed(): void {
    for (const listener of this.listeners) listener();
  }

  onCommitted(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

function receivingSubscriptionOf(providerId: string): Statement {
  return {
    sql: `EXISTS (SELECT 1 FROM webhook_subscriptions WHERE provider_id = ? AND ${RECEIVING_CONDITION.sql})`,
    parameters: [providerId, ...RECEIVING_CONDITION.parameters],
  };
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
