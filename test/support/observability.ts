import { activate, entitlementWithCode, sessionIdOf } from "./licensing.js";
import { rest } from "./rest.js";

const P = "/api/v1/provision";
export const RATING = `${P}/user-feedback/rating`;
export const RATINGS = `${P}/admin/ratings`;
export const recordPath = (sessionId: string, kind: "log" | "metrics") =>
  `${P}/observability/sessions/${sessionId}/observability/${kind}`;
export const sessionRecordsPath = (sessionId: string, kind: "logs" | "metrics") =>
  `${P}/admin/sessions/${sessionId}/${kind}`;

export interface LicensedSession {
  productId: string;
  entitlementId: string;
  sessionId: string;
  /** `Bearer <licenseToken>`. */
  authorization: string;
}

/** A live session of a new entitlement to one new product (with the feature `export`). */
export async function licensedSession(baseUrl: string, fingerprint = "device-1"): Promise<LicensedSession> {
  const { productId, entitlementId, code } = await entitlementWithCode(baseUrl, {});
  const answer = await activate(baseUrl, { activationCode: code, fingerprint });
  if (answer.status !== 200) throw new Error(`activation: ${JSON.stringify(answer.body)}`);
  const token = answer.body.licenseToken as string;
  return { productId, entitlementId, sessionId: sessionIdOf(token), authorization: `Bearer ${token}` };
}

/** POSTs items as the session's application (to its own path unless `sessionId` names another). */
export function sendRecords(
  baseUrl: string,
  session: LicensedSession,
  kind: "log" | "metrics",
  items: unknown[],
  sessionId = session.sessionId,
) {
  return rest(baseUrl, "POST", recordPath(sessionId, kind), items, { authorization: session.authorization });
}
