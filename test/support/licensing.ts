import { PRODUCTS, rest } from "./rest.js";

export const ENTITLEMENTS = "/api/v1/provision/admin/entitlements";
export const ACTIVATE = "/api/v1/activations/license";
export const sessionPath = (sessionId: string, call: "renew" | "check-in" | "release") =>
  `/api/v1/provision/activations/${sessionId}/${call}`;
export const codesPath = (entitlementId: string) =>
  `/api/v1/provision/operational/entitlement/${entitlementId}/activation-codes`;

/**
 * A product with one feature, an entitlement for it with `activationPolicy`, and one activation code; `headers`
 * go with each call (another provider's authorization, say).
 */
export async function entitlementWithCode(
  baseUrl: string,
  activationPolicy: Record<string, unknown>,
  code: Record<string, unknown> = { useEntitlementMaxActivations: true },
  entitlement: Record<string, unknown> = {},
  headers: Record<string, string> = {},
) {
  const suffix = Math.random().toString(36).slice(2, 10);
  const product = await rest(
    baseUrl,
    "POST",
    PRODUCTS,
    { productCode: `LIC-${suffix}`, productVersion: "1", name: "Lic" },
    headers,
  );
  if (product.status !== 200) throw new Error(`product: ${JSON.stringify(product.body)}`);
  const features = [{ featureCode: "export", name: "Export", value: "10", isEnabled: true }];
  await rest(baseUrl, "PUT", `${PRODUCTS}/${product.body.id}`, { features }, headers);
  const created = await rest(
    baseUrl,
    "POST",
    ENTITLEMENTS,
    { name: `Customer ${suffix}`, productIds: [product.body.id], activationPolicy, ...entitlement },
    headers,
  );
  if (created.status !== 200) throw new Error(`entitlement: ${JSON.stringify(created.body)}`);
  const issued = await rest(baseUrl, "POST", codesPath(created.body.id), code, headers);
  if (issued.status !== 200) throw new Error(`code: ${JSON.stringify(issued.body)}`);
  return {
    productId: product.body.id as string,
    entitlementId: created.body.id as string,
    code: issued.body.activationCode as string,
  };
}

/** An anonymous activation. */
export function activate(baseUrl: string, body: Record<string, unknown>) {
  return rest(baseUrl, "POST", ACTIVATE, body, { authorization: "" });
}

/** The claims of a license token (read without verifying: tests verify separately). */
export function licenseClaimsOf(token: string) {
  return JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString("utf8"));
}

/** The `sid` claim of a license token. */
export function sessionIdOf(token: string): string {
  return licenseClaimsOf(token).sid;
}

export function sessionCall(baseUrl: string, token: string, call: "renew" | "check-in" | "release", body = {}) {
  return rest(baseUrl, "POST", sessionPath(sessionIdOf(token), call), body, { authorization: `Bearer ${token}` });
}

/** Moves the product to `status` the one way there is: an import replacing it (UpdateProduct has no status). */
export async function setProductStatus(baseUrl: string, productId: string, status: number) {
  const { body: product } = await rest(baseUrl, "GET", `${PRODUCTS}/${productId}`);
  const { productCode, productVersion, name } = product;
  const imported = await rest(baseUrl, "POST", `${PRODUCTS}/import`, [{ productCode, productVersion, name, status }]);
  if (imported.status !== 200) throw new Error(`import: ${JSON.stringify(imported.body)}`);
  const after = await rest(baseUrl, "GET", `${PRODUCTS}/${productId}`);
  if (after.body.status !== status) throw new Error(`status: ${JSON.stringify(after.body)}`);
}
