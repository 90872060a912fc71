import { randomUUID } from "node:crypto";
import type { DataSource } from "typeorm";
import type { CatalogRepository } from "../catalog/catalog-repository.js";
import type { Clock } from "../platform/clock.js";
import type { UserTokenConfig } from "../platform/config.js";
import type { Coordinator } from "../platform/coordinator.js";
import type { InvalidationBus } from "../platform/invalidation-bus.js";
import type { Logger } from "../platform/logger.js";
import type { Outbox } from "../webhooks/outbox.js";
import { ActivationGroups } from "./activation-groups.js";
import { ActivationGuesses } from "./activation-guesses.js";
import type { EntitlementFacts } from "./activation-rules.js";
import { checkInFastRoute } from "./check-in-fast-route.js";
import { CheckInWriter } from "./check-in-writer.js";
import { ClientHostNames } from "./client-host-names.js";
import { EntitlementFeatureCache } from "./entitlement-feature-cache.js";
import { EntitlementProductCache } from "./entitlement-product-cache.js";
import { EntitlementTurns } from "./entitlement-turns.js";
import { LicenseKeys } from "./license-keys.js";
import { licenseSessionVerifier } from "./license-session-verifier.js";
import { LicenseTokens } from "./license-tokens.js";
import { LicensingCaches } from "./licensing-caches.js";
import type { LicensingDependencies } from "./licensing-dependencies.js";
import { ProductStatuses } from "./product-lifecycle.js";
import { ProviderNoticesCache } from "./provider-notices-cache.js";
import { SeatPlans } from "./seat-plans.js";
import type { SessionCallDependencies } from "./session-calls.js";
import { SessionStore } from "./session-store.js";
import { UserTokens } from "./user-tokens.js";

/** How often each instance writes its sessions' check-ins (what ListSessions shows is at most this old). */
const CHECK_IN_WRITE_INTERVAL_MS = 1000;

/** The licensing services' parts, built once per instance. */
export async function createLicensing(options: {
  dataSource: DataSource;
  catalog: CatalogRepository;
  clock: Clock;
  bus: InvalidationBus;
  logger: Logger;
  keyEncryptionKey: Buffer | undefined;
  /** The trusted issuer of interactive users' tokens; unset = interactive-user activation is refused. */
  userTokens?: UserTokenConfig;
  /** The webhook outbox licensing changes write their events to. */
  events: Outbox;
  /** Counts wrong activation codes per address across instances. */
  coordinator: Coordinator;
  activationGuessesPerAddress: number;
}) {
  const { dataSource, clock, logger } = options;
  const caches = await LicensingCaches.create<EntitlementFacts>(options.bus, clock, logger);
  const store = new SessionStore(dataSource);
  const keys = new LicenseKeys(dataSource, clock, options.keyEncryptionKey);
  const tokens = new LicenseTokens(keys, clock);
  const checkIns = new CheckInWriter((batch) => store.recordCheckIns(batch), logger, CHECK_IN_WRITE_INTERVAL_MS);
  const dependencies: LicensingDependencies = {
    dataSource,
    catalog: options.catalog,
    clock,
    newId: randomUUID,
    entitlementChanged: (entitlementId) => caches.entitlementChanged(entitlementId),
    store,
    sessionsChanged: (...sessionIds) => caches.sessionsChanged(...sessionIds),
    events: options.events,
    entitlementTurns: new EntitlementTurns(),
  };
  const activation: SessionCallDependencies = {
    ...dependencies,
    keys,
    tokens,
    caches,
    checkIns,
    userTokens: options.userTokens ? new UserTokens(options.userTokens, clock, logger) : null,
    hostNames: new ClientHostNames(clock),
    guesses: new ActivationGuesses(options.coordinator, options.activationGuessesPerAddress, logger),
    seatPlans: new SeatPlans(),
    entitlementFeatures: new EntitlementFeatureCache(),
    entitlementProducts: new EntitlementProductCache(),
    productStatuses: await ProductStatuses.create(options.bus, clock),
    activationGroups: new ActivationGroups(),
    providerNotices: await ProviderNoticesCache.create({ dataSource, bus: options.bus, clock, logger }),
  };
  return {
    dependencies,
    activation,
    verifier: licenseSessionVerifier(tokens),
    fastRoutes: [checkInFastRoute(activation)],
    close: () => checkIns.close(),
  };
}
