import { randomUUID } from "node:crypto";
import type { DataSource } from "typeorm";
import { AccessTokens } from "./auth/access-tokens.js";
import { authInterceptor, createAuthorizer } from "./auth/auth-interceptor.js";
import { type BootstrapOutcome, bootstrapIdentity, prepareBootstrap } from "./auth/bootstrap.js";
import { ClientStates } from "./auth/client-states.js";
import { createDiscoveryEndpoints } from "./auth/discovery.js";
import { identityEntities } from "./auth/entities.js";
import { IdentityRepository } from "./auth/identity-repository.js";
import { KeyStore } from "./auth/key-store.js";
import { createTokenEndpoint, TOKEN_PATH } from "./auth/token-endpoint.js";
import { CatalogRepository } from "./catalog/catalog-repository.js";
import { catalogEntities } from "./catalog/entities.js";
import { ProductCache } from "./catalog/product-cache.js";
import type { ActivationGroups } from "./licensing/activation-groups.js";
import { licensingEntities } from "./licensing/entities.js";
import { expiryNoticesJob } from "./licensing/expiry-notices.js";
import { createLicensing } from "./licensing/licensing-runtime.js";
import { subscriptionRenewalsJob } from "./licensing/subscription-renewals.js";
import { observabilityEntities } from "./observability/entities.js";
import { createObservability } from "./observability/observability-dependencies.js";
import { type Clock, systemClock } from "./platform/clock.js";
import type { Config } from "./platform/config.js";
import { connectAll } from "./platform/connect-all.js";
import type { Coordinator } from "./platform/coordinator.js";
import { connectDatabase, createDataSource, migrate, pingDatabase, statementStallMs } from "./platform/database.js";
import { type InvalidationBus, MemoryInvalidationBus } from "./platform/invalidation-bus.js";
import { LoggedInvalidationBus } from "./platform/invalidation-log.js";
import type { Logger } from "./platform/logger.js";
import { MemoryCoordinator } from "./platform/memory-coordinator.js";
import { migrations } from "./platform/migrations/index.js";
import { createScheduler, type Scheduler } from "./platform/scheduler.js";
import { guardSilentDatabase } from "./platform/silent-database.js";
import { watchStalledStatements } from "./platform/stalled-statements.js";
import { deadlineInterceptor } from "./server/deadline-interceptor.js";
import { errorInterceptor } from "./server/error-interceptor.js";
import type { RequestHandler } from "./server/http-server.js";
import { createInProcessInvoker, type ServiceImplementation } from "./server/in-process-rpc.js";
import { limitsInterceptor } from "./server/limits-interceptor.js";
import { answerUnknownRpc, createRequestHandler } from "./server/request-handler.js";
import { checkJsonLimits } from "./server/request-limits.js";
import { createRestHandler, type NodeResponse } from "./server/rest/rest-handler.js";
import { RouteTable, routesFromAnnotations } from "./server/rest/route-table.js";
import { createRpcHandler, type RpcHandlerOptions } from "./server/rpc-adapter.js";
import { ALL_SERVICES, implementServices, registerServices } from "./services.js";
import { fillLiveAssetUsage } from "./usage/live-asset-usage.js";
import { preallocationFastRoute } from "./usage/preallocation-fast-route.js";
import { createUsage } from "./usage/usage-runtime.js";
import { CallbackGrants } from "./webhooks/callback-grants.js";
import { webhookEntities } from "./webhooks/entities.js";
import type { Outbox } from "./webhooks/outbox.js";
import { createWebhooks, type WebhookRuntimeOptions } from "./webhooks/webhooks-runtime.js";

export interface App {
  handler: RequestHandler;
  dataSource: DataSource;
  coordinator: Coordinator;
  keys: KeyStore;
  tokens: AccessTokens;
  /** What start-up did to make sure a client exists; `first-client` carries a secret to show once. */
  bootstrap: BootstrapOutcome;
  /** The time-driven work (tests run a round with `tick()`). */
  scheduler: Scheduler;
  /** The webhook outbox (tests watch when it wakes the delivery worker). */
  outbox: Outbox;
  /** Activations written together (tests read how many entitlements a group held). */
  activationGroups: ActivationGroups;
  close(): Promise<void>;
}

export interface AppOptions {
  clock?: Clock;
  /** Tests: resolve webhook host names without DNS, and fix the retry jitter. */
  webhooks?: Pick<WebhookRuntimeOptions, "lookup" | "random">;
  /** Adjusts the implementations (tests: withhold one to see how an unimplemented RPC answers). */
  services?: (implementations: ServiceImplementation[]) => ServiceImplementation[];
  /** Adjusts the RPC handler's options (tests: spy on its in-process invoker, or leave it out). */
  rpc?: (options: RpcHandlerOptions) => RpcHandlerOptions;
}

export function openDatabase(config: Config): DataSource {
  return createDataSource(
    config.database,
    [...catalogEntities, ...identityEntities, ...licensingEntities, ...webhookEntities, ...observabilityEntities],
    migrations,
  );
}

/** Redis pub/sub when the coordinator is Redis; in-process otherwise. */
export async function connectInvalidationBus(config: Config, logger: Logger): Promise<InvalidationBus> {
  if (config.coordinator.kind !== "redis") return new MemoryInvalidationBus();
  // Loaded only when used: the embedded default never needs the Redis client's few hundred modules.
  const { RedisInvalidationBus } = await import("./platform/redis-invalidation-bus.js");
  return RedisInvalidationBus.connect(config.coordinator.url, logger);
}

export async function connectCoordinator(config: Config, logger: Logger): Promise<Coordinator> {
  if (config.coordinator.kind !== "redis") return new MemoryCoordinator();
  const { RedisCoordinator } = await import("./platform/redis-coordinator.js");
  return RedisCoordinator.connect(config.coordinator.url, logger);
}

/**
 * Connects the database, the coordinator and the invalidation bus first (all at once: start-up waits for the
 * slowest, not for their sum), then applies pending migrations, loads the keys and makes sure a client exists;
 * builds the handler. Nothing is created before every dependency answered: a first client (whose secret exists
 * only in the answer) is made last, after which nothing that can fail is left.
 */
export async function createApp(config: Config, logger: Logger, options: AppOptions = {}): Promise<App> {
  const clock = options.clock ?? systemClock;
  const dataSource = openDatabase(config);
  const [, coordinator, redisOrMemoryBus] = await connectAll<[DataSource, Coordinator, InvalidationBus]>([
    { connect: () => connectDatabase(dataSource), close: (connected) => connected.destroy() },
    { connect: () => connectCoordinator(config, logger), close: (connected) => connected.close() },
    { connect: () => connectInvalidationBus(config, logger), close: (connected) => connected.close() },
  ]);
  // On MySQL every instance reads the invalidation log: what one cannot publish on Redis goes through MySQL, and
  // so do the changes of an operator command run without Redis.
  const loggedBus =
    config.database.kind === "mysql" ? new LoggedInvalidationBus(redisOrMemoryBus, dataSource, logger) : undefined;
  const bus = loggedBus ?? redisOrMemoryBus;
  let clients: ClientStates | undefined;
  const identity = new IdentityRepository(dataSource, async (clientId) => {
    await clients?.changed(clientId).catch((error: Error) => {
      logger.warn({ err: { message: error.message }, clientId }, "could not tell other instances of a client change");
    });
  });
  const bootstrapPreparation = prepareBootstrap(identity, config.auth);
  const keys = new KeyStore(identity, clock, config.auth.keyEncryptionKey, config.auth.accessTokenTtlSeconds);
  let products: ProductCache;
  let stopStallWatch = () => {};
  let callbackGrants: CallbackGrants;
  try {
    clients = await ClientStates.create((clientId) => identity.findClient(clientId), bus, clock);
    callbackGrants = await CallbackGrants.create(dataSource, bus, clock, logger);
    products = await ProductCache.create(bus, clock, logger);
    const applied = await migrate(dataSource);
    if (applied.length > 0) logger.info({ migrations: applied }, "applied database migrations");
    await loggedBus?.start();
    await keys.initialize();
    // After the migrations: a migration (an ALTER of a large table) may run long with nothing to send.
    if (config.database.kind === "mysql") {
      const silence = guardSilentDatabase(dataSource, config.database.url, logger);
      const stopWatch = watchStalledStatements(
        dataSource,
        statementStallMs(dataSource, config.database.statementStallSeconds),
        logger,
        silence.suspect,
      );
      stopStallWatch = () => {
        stopWatch();
        silence.stop();
      };
    }
  } catch (error) {
    await bus.close().catch(() => undefined);
    await coordinator.close().catch(() => undefined);
    await dataSource.destroy();
    throw error;
  }

  const tokens = new AccessTokens(keys, clock, config.auth.issuer, config.auth.accessTokenTtlSeconds);
  const webhooks = createWebhooks({
    dataSource,
    clock,
    logger,
    keyEncryptionKey: config.auth.keyEncryptionKey,
    config: config.webhooks,
    tokens,
    clients,
    callbackGrants,
    ...options.webhooks,
  });
  const catalog = new CatalogRepository(dataSource);
  const licensing = await createLicensing({
    dataSource,
    catalog,
    clock,
    bus,
    logger,
    keyEncryptionKey: config.auth.keyEncryptionKey,
    userTokens: config.userTokens,
    events: webhooks.outbox,
    coordinator,
    activationGuessesPerAddress: config.activationGuessesPerAddress,
  });
  const observability = createObservability({ clock, newId: randomUUID, sessions: licensing.activation });
  const usage = await createUsage({
    dataSource,
    clock,
    logger,
    bus,
    coordinator,
    events: webhooks.outbox,
    sessions: licensing.activation,
  });
  const allImplemented = implementServices({
    repository: catalog,
    products,
    identity,
    clock,
    newId: randomUUID,
    licensing: {
      ...licensing.dependencies,
      liveAssetUsage: (entitlement) => fillLiveAssetUsage(usage.dependencies, entitlement),
    },
    activation: licensing.activation,
    webhooks: webhooks.dependencies,
    observability: observability.dependencies,
    usageAdmin: { ...usage.dependencies, observability: observability.reads },
    usage: usage.dependencies,
  });
  const implementations = options.services?.(allImplemented) ?? allImplemented;
  const authOptions = { tokens, clients, callbackGrants, licenseSessions: licensing.verifier };
  const interceptors = [
    errorInterceptor(logger),
    authInterceptor(authOptions),
    limitsInterceptor(),
    deadlineInterceptor(logger),
  ];
  const invoke = createInProcessInvoker(implementations, interceptors);
  const rpcOptions: RpcHandlerOptions = {
    logger,
    interceptors,
    invoke,
    readMaxBytes: config.bodyLimitBytes,
    jsonOptions: { alwaysEmitImplicit: true, enumAsInteger: true, ignoreUnknownFields: true },
    routes: registerServices(implementations),
    fallback: (request, response) => answerUnknownRpc(request, response as NodeResponse),
  };
  const rpc = createRpcHandler(options.rpc?.(rpcOptions) ?? rpcOptions);
  const rest = createRestHandler({
    routes: new RouteTable(routesFromAnnotations(ALL_SERVICES)),
    invoke,
    bodyLimitBytes: config.bodyLimitBytes,
    logger,
    authorize: createAuthorizer(authOptions),
    checkLimits: (method, json) => checkJsonLimits(method.input, json),
    fastRoutes: [...licensing.fastRoutes, preallocationFastRoute(usage.dependencies, licensing.activation.tokens)],
  });
  const readyCoordinator = coordinator;
  const readyBus = bus;
  const handler = createRequestHandler({
    logger,
    rpc,
    rest,
    corsOrigins: config.corsOrigins,
    endpoints: {
      [TOKEN_PATH]: createTokenEndpoint({
        repository: identity,
        tokens,
        coordinator: readyCoordinator,
        clock,
        logger,
        limits: { perClient: config.auth.tokenRateLimitPerClient, perAddress: config.auth.tokenRateLimitPerAddress },
      }),
      ...createDiscoveryEndpoints(config.auth.issuer, keys),
    },
    checkReadiness: async () => {
      await withTimeout(pingDatabase(dataSource), "database", logger);
      await withTimeout(readyCoordinator.ping(), "coordinator", logger);
      await keys.checkSigning();
    },
  });
  const scheduler = createScheduler({
    dataSource,
    clock,
    logger,
    intervalMs: config.webhooks.schedulerIntervalMs,
    jobs: [
      ...webhooks.jobs,
      ...usage.jobs,
      expiryNoticesJob(dataSource, webhooks.outbox, {
        expiringMs: config.webhooks.expiringNoticeMs,
        trialExpiringMs: config.webhooks.trialExpiringNoticeMs,
      }),
      subscriptionRenewalsJob({
        dataSource,
        events: webhooks.outbox,
        entitlementChanged: licensing.dependencies.entitlementChanged,
      }),
    ],
  });
  const close = async () => {
    await scheduler.close();
    await webhooks.close(config.shutdownGraceMs);
    await usage.close();
    await licensing.close();
    await readyBus.close();
    await readyCoordinator.close();
    stopStallWatch();
    await dataSource.destroy();
  };
  // Last, once every dependency answered and nothing else can fail: a first client's secret exists only here.
  let bootstrap: BootstrapOutcome;
  try {
    bootstrap = await bootstrapIdentity(identity, config.auth, clock, randomUUID, bootstrapPreparation);
  } catch (error) {
    await close();
    throw error;
  }
  if (bootstrap.kind === "configured-client" && bootstrap.disabled) {
    logger.warn(
      { clientId: bootstrap.clientId },
      "the bootstrap client is disabled and stays so; enable it with `npm run cli -- clients enable <id>`",
    );
  }
  webhooks.start();
  scheduler.start();
  const { outbox } = webhooks;
  const { activationGroups } = licensing.activation;
  return { handler, dataSource, coordinator, keys, tokens, bootstrap, scheduler, outbox, activationGroups, close };
}

/** Fails naming the dependency only: its own error goes to the log, not to whoever asks the probe. */
async function withTimeout(check: Promise<void>, what: string, logger: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check.catch((error: Error) => {
        logger.warn({ err: { message: error.message }, dependency: what }, "readiness check failed");
        throw new Error(`${what} is unreachable`);
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not answer within 2 s`)), 2000);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
