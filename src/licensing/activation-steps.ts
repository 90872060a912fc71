import { DomainError } from "../platform/errors.js";
import type { BatchedTransaction } from "../platform/statement-batch.js";
import type { ActivationDependencies } from "./activation.js";
import {
  type ActivationAsk,
  type CodeFacts,
  type EntitlementFacts,
  isTrialActivation,
  type Lease,
} from "./activation-rules.js";
import { type EntitlementRow, type LicenseSessionRow, SESSION_STATE } from "./entities.js";
import { productsReadOrKept } from "./entitlement-product-cache.js";
import { trialAwaitsFirstActivation, trialPeriodEnd } from "./license-ends.js";
import { entitlementFacts } from "./license-facts.js";

// What the single activation (activation.ts) and the grouped one (group-activation.ts) both do.

/**
 * The entitlement's facts, with its products as read in the first batch or else their kept ids; their codes are
 * read now when the policy's product-code rule needs them and the first batch did not. Only the products that
 * take new activations are licensed (the activation rules refuse it when none does).
 */
export async function factsWithProducts(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  entitlement: EntitlementRow,
  products: { productRows: unknown; keptProductIds: string[] | undefined },
): Promise<EntitlementFacts> {
  const facts = await factsOfEveryProduct(deps, transaction, entitlement, products);
  return deps.productStatuses.licensable(entitlement.providerId, facts, "activate", transaction);
}

/** The entitlement's facts as factsWithProducts reads them, naming every product, whatever its status. */
export async function factsOfEveryProduct(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  entitlement: EntitlementRow,
  products: { productRows: unknown; keptProductIds: string[] | undefined },
): Promise<EntitlementFacts> {
  const { store, entitlementProducts } = deps;
  const read = products.keptProductIds ? undefined : store.productsOf(products.productRows);
  const facts = entitlementFacts(entitlement, productsReadOrKept(read, products.keptProductIds), null);
  const codesWanted = facts.policy?.requireProductCode ?? false;
  if (codesWanted && facts.products === null) {
    const [rows] = await transaction.run([store.licensedProductsStatement(entitlement.id)]);
    facts.products = store.productsOf(rows).current;
  }
  entitlementProducts.remember(entitlement.id, facts.productIds, codesWanted);
  return facts;
}

/** What a new session is made of, besides its id and the caller's address. */
export interface SessionParts {
  entitlement: EntitlementRow;
  codeId: string;
  ask: ActivationAsk;
  hash: string;
  trial: boolean;
  lease: Lease;
  now: Date;
  floating: boolean;
}

/** The row of the session an activation starts, holding a floating seat when the policy's seats float. */
export function newSession(
  deps: ActivationDependencies,
  parts: SessionParts,
  clientAddress: string,
): LicenseSessionRow {
  const { entitlement, ask, lease, now, floating } = parts;
  return {
    id: deps.newId(),
    providerId: entitlement.providerId,
    entitlementId: entitlement.id,
    activationCodeId: parts.codeId,
    fingerprint: ask.fingerprint,
    fingerprintHash: parts.hash,
    state: SESSION_STATE.live,
    isFloating: floating,
    holdsFloatingSeat: floating,
    isTrial: parts.trial,
    activatedAt: now,
    leaseExpiresAt: lease.leaseExpiresAt,
    graceEndsAt: lease.graceEndsAt,
    lastCheckInAt: now,
    softwareVersion: ask.targetSoftwareVersion,
    clientAddress: clientAddress.slice(0, 64),
    endedAt: null,
  };
}

/** The features an activation read under its entitlement's lock, kept for that revision. */
export function readFeatures(deps: ActivationDependencies, entitlement: EntitlementRow, result: unknown) {
  const features = deps.store.featuresOf(result);
  deps.entitlementFeatures.remember(entitlement.id, entitlement.revision, features);
  return features;
}

/**
 * The end to record as the policy's trialEndsAt when this activation starts a trial counted from the first
 * activation (its trialPeriod from that first activation, which may be another code's); null when it starts none.
 */
export function trialStartEnd(
  facts: EntitlementFacts,
  code: CodeFacts,
  firstActivationAt: Date | null,
  now: Date,
): Date | null {
  const trial = facts.policy?.trialActivationPolicy;
  if (!trial || !trialAwaitsFirstActivation(trial) || !isTrialActivation(facts, code)) return null;
  return trialPeriodEnd(trial, facts.createdAt, firstActivationAt ?? now);
}

export function codeNotFound(): DomainError {
  return new DomainError("not-found", "no activation code matches", { slug: "code-not-found" });
}
