import { ConfigError, loadConfig } from "./platform/config.js";
import { checkStartup } from "./platform/startup-checks.js";

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
    await checkStartup(config);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  // Loaded once the configuration is known to be good: a bad variable is reported without loading the service.
  const [{ createApp }, { createLogger, stdoutDestination }, { listen }] = await Promise.all([
    import("./app.js"),
    import("./platform/logger.js"),
    import("./server/http-server.js"),
  ]);
  const logger = createLogger(config.logLevel, stdoutDestination());
  const app = await createApp(config, logger);
  if (app.bootstrap.kind === "first-client") {
    process.stdout.write(
      `${JSON.stringify({
        notice: "first start: created a client with all scopes; its secret is shown only now",
        clientId: app.bootstrap.clientId,
        clientSecret: app.bootstrap.clientSecret,
      })}\n`,
    );
  }
  const server = await listen(app.handler, {
    host: config.host,
    port: config.port,
    tls: config.tls,
    trustedProxies: config.trustedProxies,
    logger,
  });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "draining");
    const deadline = setTimeout(() => {
      logger.error("shutdown took too long; exiting");
      process.exit(1);
    }, config.shutdownGraceMs + 1500);
    deadline.unref();
    let failed = false;
    for (const [what, close] of [
      ["server", () => server.close(config.shutdownGraceMs)],
      ["database and coordinator", () => app.close()],
    ] as const) {
      try {
        await close();
      } catch (error) {
        failed = true;
        logger.error({ err: error }, `closing the ${what} failed`);
      }
    }
    logger.info("stopped");
    logger.flush();
    process.exit(failed ? 1 : 0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
  // Only now: whoever waits for this line may stop the service at once.
  logger.info(
    { port: server.port, tls: Boolean(config.tls), database: config.database.kind, coordinator: app.coordinator.kind },
    "provision is listening",
  );
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`provision failed to start: ${message}\n`);
  process.exit(1);
});
