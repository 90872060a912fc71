import { ACTIVATE, codesPath, ENTITLEMENTS, sessionIdOf, sessionPath } from "../test/support/licensing.js";
import { call } from "./catalog-fixture.js";
import type { HttpTarget } from "./http-load.js";
import type { Reply } from "./replies.js";

/** Live sessions the session calls go round: more than the connections, so no two renewals of one overlap. */
export const SESSIONS = 64;
/**
 * Customers the second activation row spreads its devices over: activations of one entitlement queue for its
 * row lock, those of different entitlements do not.
 */
export const CUSTOMERS = 16;

/** Floating seats nobody runs out of, leases that outlast the run: every call answers 200 from start to end. */
const POLICY = {
  claimBasedActivation: {
    numberOfSeats: 1_000_000,
    isFloatingLicense: true,
    leaseTime: "1.00:00:00",
    gracePeriod: "01:00:00",
    allowOffLineUse: true,
  },
};

export interface LicenseSession {
  sessionId: string;
  authorization: string;
}

export interface LicensingFixture {
  activationCode: string;
  sessions: LicenseSession[];
  /** One code for each of `CUSTOMERS` further entitlements. */
  customerCodes: string[];
}

/**
 * An entitlement to the benchmark's product with a floating policy and an activation code using its seats,
 * activated `SESSIONS` times from distinct devices; and `CUSTOMERS` more such entitlements with a code each.
 */
export async function seedLicensing(
  baseUrl: string,
  authorization: string,
  productId: string,
): Promise<LicensingFixture> {
  const activationCode = await entitlementCode(baseUrl, authorization, productId, "Bench customer");
  const sessions: LicenseSession[] = [];
  for (let index = 0; index < SESSIONS; index++) {
    const fingerprint = `bench-seed-${index}`;
    const license = await call(baseUrl, undefined, "POST", ACTIVATE, { activationCode, fingerprint });
    const token = license.licenseToken as string;
    sessions.push({ sessionId: sessionIdOf(token), authorization: `Bearer ${token}` });
  }
  const customerCodes: string[] = [];
  for (let index = 0; index < CUSTOMERS; index++) {
    customerCodes.push(await entitlementCode(baseUrl, authorization, productId, `Bench customer ${index}`));
  }
  return { activationCode, sessions, customerCodes };
}

/** A new entitlement to `productId` under POLICY, and an activation code using its seats. */
async function entitlementCode(baseUrl: string, authorization: string, productId: string, name: string) {
  const entitlement = await call(baseUrl, authorization, "POST", ENTITLEMENTS, {
    name,
    productIds: [productId],
    activationPolicy: POLICY,
  });
  const issued = await call(baseUrl, authorization, "POST", codesPath(entitlement.id), {
    useEntitlementMaxActivations: true,
  });
  return issued.activationCode as string;
}

/**
 * Activation, renew and check-in as the load sends them: a fresh device per activation (of one entitlement, or
 * of the customers' in turn), sessions round-robin.
 */
export function licensingTargets({ activationCode, sessions, customerCodes }: LicensingFixture) {
  let devices = 0;
  const activation = (name: string, codeOf: (device: number) => string): HttpTarget => ({
    name,
    method: "POST",
    path: ACTIVATE,
    headers: { "content-type": "application/json" },
    body: () => {
      devices++;
      return JSON.stringify({ activationCode: codeOf(devices), fingerprint: `bench-${process.pid}-${devices}` });
    },
  });
  return {
    activate: activation("activation, one entitlement (fresh device each)", () => activationCode),
    activateCustomers: activation(
      `activation, ${customerCodes.length} entitlements in turn (fresh device each)`,
      (device) => customerCodes[device % customerCodes.length],
    ),
    renew: sessionTarget("renew", sessions),
    checkIn: sessionTarget("check-in", sessions),
  };
}

/** A session call over every session: its path and its license token. */
export interface SessionTarget extends HttpTarget {
  /** Every session's path, for the bare server's table. */
  paths: string[];
}

/**
 * Renew goes round the sessions over all connections, so no two renewals of one session (which lock its row)
 * run at once. Check-in only reads memory: each connection goes round them itself, with requests built once,
 * so the load generator keeps up with the bare server.
 */
function sessionTarget(call: "renew" | "check-in", sessions: LicenseSession[]): SessionTarget {
  const parts = sessions.map(({ sessionId, authorization }) => ({
    path: sessionPath(sessionId, call),
    headers: { authorization, "content-type": "application/json" },
    body: "{}",
  }));
  const common = { method: "POST" as const, ...parts[0], paths: parts.map((part) => part.path) };
  if (call === "check-in") {
    return { name: `check-in (${sessions.length} sessions, in turn)`, ...common, variants: parts };
  }
  let turn = 0;
  return {
    name: `renew (${sessions.length} sessions round-robin)`,
    ...common,
    next: () => parts[turn++ % parts.length],
  };
}

/** The bare server's table for a session call: `reply` (recorded from one session) on every session's path. */
export function onEverySession(target: SessionTarget, reply: Reply): Record<string, Reply> {
  return Object.fromEntries(target.paths.map((path) => [`${target.method} ${path}`, reply]));
}
