import { clone, create } from "@bufbuild/protobuf";
import { type Duration, durationMs, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import type { DataSource } from "typeorm";
import { type License, LicenseSchema } from "../../gen/provision/v1/activation_pb.js";
import { ActivationPolicySchema } from "../../gen/provision/v1/entitlement_pb.js";
import type { Clock } from "../platform/clock.js";
import { invalidField } from "../platform/errors.js";
import { forgettingOnDoubt } from "../platform/lost-connections.js";
import { type BatchedTransaction, inBatchedTransaction, type Statement } from "../platform/statement-batch.js";
import { MAX_EMAIL_LENGTH, Violations } from "../platform/validation.js";
import { clientAddressKey } from "../server/client-address.js";
import type { Outbox } from "../webhooks/outbox.js";
import { presentedCodeKey } from "./activation-code-format.js";
import { activationCodeByKeyStatement, activationCodeOf } from "./activation-code-store.js";
import { MAX_FINGERPRINT_LENGTH } from "./activation-code-validation.js";
import { type ActivationGroups, activateInGroup, groupable } from "./activation-groups.js";
import type { ActivationGuesses } from "./activation-guesses.js";
import {
  checkHost,
  checkSignedIn,
  invitedCodeKey,
  type Preparation,
  signIn,
  withPreparation,
  workflowRequired,
} from "./activation-preparation.js";
import {
  type ActivationAsk,
  checkActivation,
  type EntitlementFacts,
  firstActivationOf,
  isTrialActivation,
  leaseFor,
} from "./activation-rules.js";
import { codeNotFound, factsWithProducts, newSession, readFeatures, trialStartEnd } from "./activation-steps.js";
import type { ClientHostNames } from "./client-host-names.js";
import type { EntitlementFeatureRow, EntitlementRow, LicenseSessionRow } from "./entities.js";
import { activatedEvent } from "./entitlement-events.js";
import type { EntitlementFeatureCache } from "./entitlement-feature-cache.js";
import { policyText } from "./entitlement-mapper.js";
import type { EntitlementProductCache } from "./entitlement-product-cache.js";
import type { EntitlementTurns } from "./entitlement-turns.js";
import { fingerprintHash } from "./license-claims.js";
import { endsAfterFirstActivation } from "./license-ends.js";
import { codeFacts, licenseClaimsFor } from "./license-facts.js";
import type { LicenseKeys } from "./license-keys.js";
import type { LicenseTokens } from "./license-tokens.js";
import type { ProductStatuses } from "./product-lifecycle.js";
import type { ProviderNoticesCache } from "./provider-notices-cache.js";
import { seatCheck } from "./seat-allocation.js";
import { type SeatPlan, type SeatPlans, sameStatements } from "./seat-plans.js";
import type { SessionStore } from "./session-store.js";
import type { InteractiveUser, UserTokens } from "./user-tokens.js";

export interface ActivationDependencies {
  dataSource: DataSource;
  /** Webhook events, written in the activation's transaction. */
  events: Outbox;
  store: SessionStore;
  keys: LicenseKeys;
  tokens: LicenseTokens;
  clock: Clock;
  newId: () => string;
  sessionsChanged: (...sessionIds: string[]) => Promise<void>;
  entitlementChanged: (entitlementId: string) => Promise<void>;
  /** Verifies interactive users' bearer tokens; null when no user-token issuer is configured. */
  userTokens: UserTokens | null;
  /** Callers' reverse-DNS names, for requireAclHostNameMember. */
  hostNames: ClientHostNames;
  /** Counts activations presenting a code, per source address, refusing past the wrong guesses allowed. */
  guesses: ActivationGuesses;
  /** What each code's activations read for their seat, sent with the locking reads of the next one. */
  seatPlans: SeatPlans;
  /** The features each entitlement's last activation read, by revision: not read again while it holds. */
  entitlementFeatures: EntitlementFeatureCache;
  /** Each entitlement's product ids (fixed at its creation): not read again once known. */
  entitlementProducts: EntitlementProductCache;
  /** Products' lifecycle statuses: a license names only the products that take the activation or renewal. */
  productStatuses: ProductStatuses;
  /** Activations arriving together (of any entitlements), written in one transaction. */
  activationGroups: ActivationGroups;
  entitlementTurns: EntitlementTurns;
  /** What each provider's licenses say of it (copyright, URL, email). */
  providerNotices: ProviderNoticesCache;
}

/** The fields ActivateLicense and ActivateJwt share. */
export interface ActivationRequest {
  activationCode: string;
  fingerprint: string;
  email: string;
  requestedLeaseDuration?: Duration;
  targetSoftwareVersion: string;
  useInteractiveUser: boolean;
  acceptLicenseTerms: boolean;
}

const MAX_SOFTWARE_VERSION = 255;

export interface Activated {
  session: LicenseSessionRow;
  entitlement: EntitlementRow;
  facts: EntitlementFacts;
  features: EntitlementFeatureRow[];
  trial: boolean;
  replaced: string[];
  trialStarted: boolean;
  /** Whether it wrote an event (its provider has a subscription that receives events). */
  eventWritten: boolean;
}

/**
 * Activation code + device fingerprint → a session on a seat and its signed license. One transaction: the
 * entitlement's row is locked first, so the rules and the seat counts it reads hold until it commits. A code
 * whose seat plan this instance knows joins the next group of activations (`activateInGroup`), which runs alone
 * what a group does not decide. With useInteractiveUser the user's token is verified first, and the code may be
 * left out when the user's invitations name exactly one entitlement.
 */
export async function activate(
  deps: ActivationDependencies,
  request: ActivationRequest,
  context: HandlerContext,
): Promise<License> {
  const presented = checkRequest(request);
  const now = deps.clock.now();
  const prepared: Preparation = {
    headers: context.requestHeader,
    user: null,
    userChecked: false,
    hostNames: undefined,
  };
  if (request.useInteractiveUser) {
    prepared.user = await signIn(deps, prepared.headers);
    prepared.userChecked = true;
  }
  const key = presented ?? (await invitedCodeKey(deps, prepared.user as InteractiveUser, now));
  const ask: Omit<ActivationAsk, "user"> = {
    fingerprint: request.fingerprint,
    email: request.email,
    targetSoftwareVersion: request.targetSoftwareVersion,
    requestedLeaseMs: requestedLeaseMs(request.requestedLeaseDuration),
    acceptLicenseTerms: request.acceptLicenseTerms,
    asSignedInUser: request.useInteractiveUser,
  };
  const clientAddress = context.values.get(clientAddressKey);
  const input = { key, now, clientAddress, prepared, presented };
  const attempt = (plan: SeatPlan | undefined) =>
    withPreparation(deps, prepared, clientAddress, async () => {
      const owner = await deps.store.entitlementOfCode(deps.dataSource.manager, key);
      if (!owner) throw codeNotFound();
      return deps.entitlementTurns.run(owner.entitlementId, (lockWait) =>
        inBatchedTransaction(
          deps.dataSource,
          // The user as prepared so far: a run again after signing in sees them.
          (transaction) =>
            activateInTransaction(deps, transaction, { ...input, plan, ask: { ...ask, user: prepared.user } }),
          lockWait,
        ),
      );
    });
  const alone = () =>
    attempt(deps.seatPlans.get(key)).catch((error: unknown) => {
      if (error instanceof StaleSeatPlan) return attempt(undefined);
      throw error;
    });
  const grouped = presented !== null && !request.useInteractiveUser;
  const run = () => {
    const plan = deps.seatPlans.get(key);
    if (!grouped || !groupable(plan)) return alone();
    const hash = fingerprintHash(request.fingerprint);
    return activateInGroup(deps, { key, ask: { ...ask, user: null }, hash, now, clientAddress, prepared, plan }, alone);
  };
  const activated = presented === null ? await run() : await deps.guesses.attempt(clientAddress, run);
  if (activated.eventWritten) deps.events.committed();
  if (activated.replaced.length > 0) await deps.sessionsChanged(...activated.replaced);
  if (activated.trialStarted) await deps.entitlementChanged(activated.session.entitlementId);
  return licenseOf(deps, activated, now);
}

/** The presented code's lookup key; null when left out with useInteractiveUser. */
function checkRequest(request: ActivationRequest): string | null {
  const violations = new Violations()
    .required("fingerprint", request.fingerprint)
    .maxLength("fingerprint", request.fingerprint, MAX_FINGERPRINT_LENGTH)
    .maxLength("email", request.email, MAX_EMAIL_LENGTH)
    .maxLength("targetSoftwareVersion", request.targetSoftwareVersion, MAX_SOFTWARE_VERSION);
  const leftOut = !request.activationCode.trim();
  if (!request.useInteractiveUser) violations.required("activationCode", request.activationCode);
  violations.throwIfAny();
  if (leftOut) return null;
  const key = presentedCodeKey(request.activationCode);
  if (key === null) throw invalidField("activationCode", "is not a valid activation code");
  return key;
}

/** A requested lease in milliseconds; null when not sent (the policy's lease then). */
export function requestedLeaseMs(duration: Duration | undefined): number | null {
  return duration ? durationMs(duration) : null;
}

interface TransactionInput {
  key: string;
  ask: ActivationAsk;
  now: Date;
  clientAddress: string;
  prepared: Preparation;
  presented: string | null;
  /** The seat reads to send with the locking reads; undefined sends them in a batch of their own. */
  plan: SeatPlan | undefined;
}

/** The rows an activation locked do not give the seat plan it read with them: it runs again without a plan. */
class StaleSeatPlan extends Error {}

/**
 * Two batches of statements after the code's entitlement is known (on MySQL one round trip each, the first
 * starting the transaction and the last committing it): the rows the rules read, locked in the order every write
 * takes them (entitlement, code, the device's live sessions, the floating seat count), and the seat's reads as
 * the code's last activation planned them; then the writes (the device's earlier sessions ended among them),
 * with the features the license names. With no plan, or none that holds, the seat's reads are a batch of their
 * own between the two; so is the look for lapsed floating seats, when the count says one may have lapsed.
 */
async function activateInTransaction(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  input: TransactionInput,
): Promise<Activated> {
  const { store } = deps;
  const { ask, now } = input;
  const hash = fingerprintHash(ask.fingerprint);
  const { entitlement, facts, code, replaced, planned, receiving } = await lockedRows(deps, transaction, input, hash);
  const claim = facts.policy?.claimBasedActivation;
  deps.seatPlans.remember(input.key, { claim, code, readsFirstActivation: endsAfterFirstActivation(facts.policy) });
  const codeFact = codeFacts(code);
  checkSignedIn(deps, input.prepared, () => checkActivation(facts, codeFact, ask, now));
  if (input.presented === null && facts.policy?.requireActivationWorkflow) throw workflowRequired();
  checkHost(deps, facts.policy, input.clientAddress, input.prepared);

  const trial = isTrialActivation(facts, codeFact);
  const lease = leaseFor(facts, codeFact, ask.requestedLeaseMs, now, firstActivationOf(facts, codeFact));
  const seat = seatCheck(store, { ...seatRequestOf(entitlement.id, ask.fingerprint, hash, now), claim, code });
  const seatRows = await seat.decide(await seatResults(transaction, seat.reads, planned), {
    run: (statements) => transaction.run(statements),
    graceEndsAt: lease.graceEndsAt,
    endingSeats: replaced.holdingSeats,
  });
  const trialEndsAt = trialStartEnd(facts, codeFact, firstActivationOf(facts, codeFact), now);
  const trialStart = trialStartStatement(store, facts, entitlement.id, trialEndsAt, now);
  const floating = claim?.isFloatingLicense ?? false;
  const parts = { entitlement, codeId: code.id, ask, hash, trial, lease, now, floating };
  const session = newSession(deps, parts, input.clientAddress);
  const event =
    entitlement.isTemplate || !receiving
      ? []
      : [deps.events.appendStatement([activatedEvent(entitlement, session, replaced.ids)])];
  const kept = deps.entitlementFeatures.get(entitlement.id, entitlement.revision);
  const written = await transaction
    .commitWith([
      ...(replaced.ids.length > 0 ? [store.endSessionsStatement(replaced.ids, now)] : []),
      ...seatRows,
      ...trialStart,
      store.recordCodeUseStatement(code.id, ask.acceptLicenseTerms, now),
      store.insertSessionStatement(session),
      ...event,
      ...(kept ? [] : [store.entitlementFeaturesStatement(entitlement.id)]),
    ])
    .catch((error: unknown) =>
      // It may have ended the device's earlier sessions and started the trial: the instances' caches look again.
      forgettingOnDoubt(deps.dataSource, error, async () => {
        if (replaced.ids.length > 0) await deps.sessionsChanged(...replaced.ids);
        if (trialStart.length > 0) await deps.entitlementChanged(entitlement.id);
      }),
    );
  const features = kept ?? readFeatures(deps, entitlement, written[written.length - 1]);
  return {
    session,
    entitlement,
    facts,
    features,
    trial,
    replaced: replaced.ids,
    trialStarted: trialStart.length > 0,
    eventWritten: event.length > 0,
  };
}

interface PlannedReads {
  seatReads: Statement[];
  /** Results of the first activation's read, then of the seat's reads. */
  results: unknown[];
  readsFirstActivation: boolean;
}

/**
 * The code's entitlement and the code, locked, with what the rules read; the device's live sessions there,
 * locked; whether the provider has a subscription that receives its Entitlement.Activated event; and the reads
 * the seat plan names, if there is one.
 */
async function lockedRows(
  deps: ActivationDependencies,
  transaction: BatchedTransaction,
  input: TransactionInput,
  hash: string,
) {
  const { store, dataSource } = deps;
  const { key, plan, now } = input;
  const owner = await store.entitlementOfCode(dataSource.manager, key);
  if (!owner) throw codeNotFound();
  const { entitlementId } = owner;
  const seatRequest = seatRequestOf(entitlementId, input.ask.fingerprint, hash, now);
  const seatReads = plan ? seatCheck(store, { ...seatRequest, claim: plan.claim, code: plan.code }).reads : [];
  const firstRead = plan?.readsFirstActivation ? [store.firstActivationStatement(entitlementId)] : [];
  const keptProductIds = deps.entitlementProducts.keptIds(entitlementId, true);
  const productRead = keptProductIds ? [] : [store.licensedProductsStatement(entitlementId)];
  const [entitlementRows, codeRows, sessionRows, receiverRows, ...results] = await transaction.run([
    store.entitlementStatement(entitlementId, true),
    activationCodeByKeyStatement(dataSource.manager, key, true),
    store.liveSessionsOfDeviceStatement(entitlementId, hash),
    deps.events.receiversStatement([owner.providerId]),
    ...productRead,
    ...firstRead,
    ...seatReads,
  ]);
  const entitlement = store.entitlementOf(entitlementRows);
  const code = activationCodeOf(dataSource.manager, codeRows);
  if (!entitlement || !code || code.entitlementId !== entitlementId) throw codeNotFound();
  const [productRows] = results.splice(0, productRead.length);
  const facts = await factsWithProducts(deps, transaction, entitlement, { productRows, keptProductIds });
  if (endsAfterFirstActivation(facts.policy)) {
    const [first] =
      firstRead.length > 0 ? results : await transaction.run([store.firstActivationStatement(entitlementId)]);
    facts.firstActivationAt = store.firstActivationOf(first);
  }
  const planned: PlannedReads | undefined = plan && { seatReads, results, readsFirstActivation: firstRead.length > 0 };
  const receiving = deps.events.receivingOf(receiverRows).has(owner.providerId);
  return { entitlement, facts, code, replaced: store.deviceSessionsOf(sessionRows), planned, receiving };
}

function seatRequestOf(entitlementId: string, fingerprint: string, fingerprintHash: string, now: Date) {
  return { entitlementId, fingerprint, fingerprintHash, now };
}

/**
 * The results of the seat's reads: those sent with the locking reads when the plan asked for these very reads.
 * A plan that did not is stale (a policy or code changed since), and what it sent may have written a device row
 * the right reads would count: the activation runs again.
 */
async function seatResults(transaction: BatchedTransaction, reads: Statement[], planned: PlannedReads | undefined) {
  if (!planned) return transaction.run(reads);
  if (!sameStatements(planned.seatReads, reads)) throw new StaleSeatPlan();
  return planned.results.slice(planned.readsFirstActivation ? 1 : 0);
}

/**
 * A trial counted from the first activation starts now (`trialEndsAt`, see trialStartEnd): its end is recorded on
 * the policy, in the facts the license is built from and in the stored policy. Only the trial period's end: the
 * trial's notValidAfterTimestamp stays the vendor's to move.
 */
function trialStartStatement(
  store: SessionStore,
  facts: EntitlementFacts,
  entitlementId: string,
  trialEndsAt: Date | null,
  now: Date,
): Statement[] {
  if (!facts.policy || !trialEndsAt) return [];
  const policy = clone(ActivationPolicySchema, facts.policy);
  if (policy.trialActivationPolicy) policy.trialActivationPolicy.trialEndsAt = timestampFromDate(trialEndsAt);
  facts.policy = policy;
  return [store.storeActivationPolicyStatement(entitlementId, policyText(policy) as string, now)];
}

async function licenseOf(deps: ActivationDependencies, activated: Activated, now: Date): Promise<License> {
  const { session, entitlement, facts } = activated;
  const claims = licenseClaimsFor({
    entitlement,
    facts,
    sessionId: session.id,
    fingerprint: session.fingerprint,
    lease: session,
    features: activated.features,
    trial: activated.trial,
    now,
  });
  const [licenseToken, tokenPublicKeyBase64, notices] = await Promise.all([
    deps.tokens.sign(claims),
    deps.keys.publicKeyBase64(entitlement.providerId),
    deps.providerNotices.of(entitlement.providerId),
  ]);
  return create(LicenseSchema, {
    licenseToken,
    tokenPublicKeyBase64,
    version: 1,
    legalNotice: entitlement.legalNoticeHtml ?? "",
    copyright: notices.copyright ?? "",
    providerUrl: notices.url ?? "",
    providerEmail: notices.email ?? "",
    description: entitlement.description ?? "",
    licensedProducts: claims.productIds,
  });
}
