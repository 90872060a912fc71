import { accessToken } from "../test/support/auth.js";
import { PRODUCTS } from "../test/support/rest.js";

/** What the benchmark reads: one product with 3 features and 2 monitored assets among 60 others. */
export interface Fixture {
  authorization: string;
  productId: string;
}

const LISTED_PRODUCTS = 60;

const meteredAsset = {
  metricName: "api-calls",
  name: "API calls",
  unit: "call",
  metricType: 1,
  allowedBackDatingTolerance: "P1DT2H",
  meteredUsage: {
    consumptionPeriod: "P1M",
    usageTiers: [
      { name: "included", startUsage: 0, endUsage: 1000, quotaUsageLevel: 1, quotaUsagePolicy: 1 },
      { name: "overage", startUsage: 1000, baseCredits: 12.5, creditsPerUnitOfConsumption: 0.1, quotaUsageLevel: 4 },
    ],
  },
};

const balanceAsset = {
  metricName: "credits",
  name: "Render credits",
  metricType: 2,
  allowedBackDatingTolerance: "3600s",
  balanceUsage: { name: "render", unit: "credit", totalCredits: 500, initialCreditAmount: 500 },
};

export async function seedCatalog(baseUrl: string, admin: { clientId: string; clientSecret: string }) {
  const authorization = `Bearer ${await accessToken(baseUrl, admin.clientId, admin.clientSecret)}`;
  const send = (method: string, path: string, body: unknown) => call(baseUrl, authorization, method, path, body);
  const product = await send("POST", PRODUCTS, { productCode: "BENCH-READ", productVersion: "1", name: "Bench read" });
  for (const code of ["export", "print", "sync"]) {
    await send("POST", `${PRODUCTS}/${product.id}/features`, { featureCode: code, name: code, isEnabled: true });
  }
  for (const asset of [meteredAsset, balanceAsset]) {
    await send("POST", `${PRODUCTS}/${product.id}/monitored-resources`, asset);
  }
  for (let index = 0; index < LISTED_PRODUCTS; index++) {
    await send("POST", PRODUCTS, { productCode: `LIST-${index}`, productVersion: "1", name: `Bench list ${index}` });
  }
  return { authorization, productId: product.id as string } satisfies Fixture;
}

/** One JSON call, as the admin or anonymous (no `authorization`); throws on an answer other than 2xx. */
export async function call(
  baseUrl: string,
  authorization: string | undefined,
  method: string,
  path: string,
  body: unknown,
) {
  const response = await fetch(baseUrl + path, {
    method,
    headers: { ...(authorization ? { authorization } : {}), "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
  return JSON.parse(text);
}
