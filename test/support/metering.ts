import { randomUUID } from "node:crypto";
import { activate, codesPath, ENTITLEMENTS, sessionIdOf } from "./licensing.js";
import type { LicensedSession } from "./observability.js";
import { PRODUCTS, rest } from "./rest.js";
import type { TestServer } from "./test-server.js";

const P = "/api/v1/provision";
export const usagePath = (sessionId: string) => `${P}/usage/sessions/${sessionId}/transactions`;
export const preallocatePath = (sessionId: string, metric: string, amount: number | string) =>
  `${P}/usage/try-preallocate/${sessionId}/${metric}?amount=${amount}`;
export const entitlementUsagePath = (entitlementId: string) => `${ENTITLEMENTS}/${entitlementId}/usage`;
export const creditsPath = (entitlementId: string, metric: string) =>
  `${P}/operational/entitlement/entitlements/${entitlementId}/assets/${metric}/credits`;

/** Metered API calls: 0–100 Normal (Allow), 100–120 Warning (AllowWithWarning), above 120 OverUsage (Block). */
export const API_CALLS = {
  metricName: "api-calls",
  name: "API calls",
  unit: "call",
  metricType: 1,
  meteredUsage: {
    consumptionPeriod: "P1M",
    usageTiers: [
      { name: "Included", startUsage: 0, endUsage: 100, quotaUsageLevel: 1, quotaUsagePolicy: 1 },
      { name: "Overage", startUsage: 100, endUsage: 120, quotaUsageLevel: 2, quotaUsagePolicy: 2 },
      { name: "Hard limit", startUsage: 120, endUsage: 0, quotaUsageLevel: 4, quotaUsagePolicy: 3 },
    ],
  },
};

/** 50 prepaid credits: Low from 80 % used, Depleted when all are used. */
export const CREDITS = {
  metricName: "credits",
  name: "Credits",
  unit: "credit",
  metricType: 2,
  balanceUsage: {
    initialCreditAmount: 50,
    usageQuota: [
      { name: "Low", endUsage: 80, quotaUsageLevel: 2 },
      { name: "Empty", endUsage: 100, quotaUsageLevel: 3 },
    ],
  },
};

export interface MeteredEntitlement {
  productId: string;
  entitlementId: string;
  code: string;
}

/** A product with these monitored assets, an entitlement to it with plenty of seats, and an activation code. */
export async function meteredEntitlement(
  baseUrl: string,
  assets: Record<string, unknown>[],
  claimBasedActivation: Record<string, unknown> = {},
): Promise<MeteredEntitlement> {
  const suffix = Math.random().toString(36).slice(2, 10);
  const product = await rest(baseUrl, "POST", PRODUCTS, {
    productCode: `MTR-${suffix}`,
    productVersion: "1",
    name: "M",
  });
  if (product.status !== 200) throw new Error(`product: ${JSON.stringify(product.body)}`);
  for (const asset of assets) {
    const added = await rest(baseUrl, "POST", `${PRODUCTS}/${product.body.id}/monitored-resources`, asset);
    if (added.status !== 200) throw new Error(`asset: ${JSON.stringify(added.body)}`);
  }
  const created = await rest(baseUrl, "POST", ENTITLEMENTS, {
    name: `Metered ${suffix}`,
    customerId: randomUUID(),
    productIds: [product.body.id],
    activationPolicy: {
      claimBasedActivation: { numberOfSeats: 1000, isFloatingLicense: true, ...claimBasedActivation },
    },
  });
  if (created.status !== 200) throw new Error(`entitlement: ${JSON.stringify(created.body)}`);
  const issued = await rest(baseUrl, "POST", codesPath(created.body.id), { useEntitlementMaxActivations: true });
  if (issued.status !== 200) throw new Error(`code: ${JSON.stringify(issued.body)}`);
  return { productId: product.body.id, entitlementId: created.body.id, code: issued.body.activationCode };
}

/** A live session of the entitlement on a device of its own. */
export async function meteredSession(
  baseUrl: string,
  entitlement: MeteredEntitlement,
  fingerprint = `device-${Math.random().toString(36).slice(2, 10)}`,
): Promise<LicensedSession> {
  const answer = await activate(baseUrl, { activationCode: entitlement.code, fingerprint });
  if (answer.status !== 200) throw new Error(`activation: ${JSON.stringify(answer.body)}`);
  const token = answer.body.licenseToken as string;
  return {
    productId: entitlement.productId,
    entitlementId: entitlement.entitlementId,
    sessionId: sessionIdOf(token),
    authorization: `Bearer ${token}`,
  };
}

/** One asset's usage as GetEntitlementUsage reports it. */
export async function assetUsageOf(baseUrl: string, entitlementId: string, metric: string) {
  const answer = await rest(baseUrl, "GET", entitlementUsagePath(entitlementId));
  if (answer.status !== 200) throw new Error(JSON.stringify(answer.body));
  return answer.body.assets.find((asset: { metricName: string }) => asset.metricName === metric);
}

export function sendUsage(baseUrl: string, session: LicensedSession, items: unknown[]) {
  return rest(baseUrl, "POST", usagePath(session.sessionId), items, { authorization: session.authorization });
}

export function preallocate(baseUrl: string, session: LicensedSession, metric: string, amount: number | string) {
  return rest(baseUrl, "POST", preallocatePath(session.sessionId, metric, amount), undefined, {
    authorization: session.authorization,
  });
}

/** Usage items with transaction ids from `firstId` on, each of `amount` of `metric`. */
export function usageItems(metric: string, amounts: number[], firstId = 1) {
  return amounts.map((amount, index) => ({
    transactionId: firstId + index,
    eventName: metric,
    eventData: String(amount),
  }));
}

/** The usage events an entitlement's assets wrote to the outbox (one metric's when given), oldest first. */
export async function usageEventsOf(server: Pick<TestServer, "app">, entitlementId: string, metric?: string) {
  const rows = (await server.app.dataSource.query(
    `SELECT e.type, e.payload FROM webhook_events e JOIN monitored_assets a ON a.id = e.entity_id
     WHERE a.entitlement_id = ?${metric ? " AND a.metric_name = ?" : ""} ORDER BY e.created_at, e.id`,
    metric ? [entitlementId, metric] : [entitlementId],
  )) as { type: string; payload: string }[];
  return rows.map((row) => ({ type: row.type, data: JSON.parse(row.payload).data }));
}
