import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import mysql from "mysql2/promise";
import { type App, type AppOptions, createApp } from "../../src/app.js";
import type { Clock } from "../../src/platform/clock.js";
import { loadConfig } from "../../src/platform/config.js";
import { createLogger } from "../../src/platform/logger.js";
import { type ListenOptions, listen, type RunningServer } from "../../src/server/http-server.js";
import { mintAccessToken } from "./credentials.js";
import { defaultAuthorization } from "./rest.js";

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? "mysql://root@127.0.0.1:3306/test";
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export interface TestServer {
  baseUrl: string;
  /** The bootstrap client of this server (all scopes, default provider). */
  admin: { clientId: string; clientSecret: string };
  /** `Bearer <token>` of the bootstrap client, sent by `rest()` unless a test sends its own. */
  adminAuthorization: string;
  port: number;
  app: App;
  /** Every log line the server wrote, as JSON text. */
  logs: string[];
  close(): Promise<void>;
}

export interface TestServerOptions {
  /** SQLite file and in-process coordinator instead of MySQL and Redis. */
  embedded?: { file: string };
  env?: Record<string, string>;
  /** A MySQL database shared with other servers (from `createTestDatabase()`); the caller drops it. */
  databaseUrl?: string;
  clock?: Clock;
  /** Serve HTTPS (HTTP/1.1 and HTTP/2 by ALPN) with these PEM files; `baseUrl` is then `https://localhost:<port>`. */
  tls?: { certFile: string; keyFile: string };
  /** Shorter HTTP/1.1 header and request timeouts than Node's, for tests of them. */
  httpTimeouts?: ListenOptions["timeouts"];
  /** Adjusts the RPC handler's options (see AppOptions). */
  rpc?: AppOptions["rpc"];
  /** Adjusts the implementations (see AppOptions). */
  services?: AppOptions["services"];
  /** Webhook host-name resolution and retry jitter (see AppOptions). */
  webhooks?: AppOptions["webhooks"];
}

/** A throwaway MySQL database for one test file; dropped by the returned function. */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const base = new URL(TEST_DATABASE_URL);
  const name = `provision_test_${randomBytes(6).toString("hex")}`;
  const admin = await mysql.createConnection({ uri: TEST_DATABASE_URL });
  await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const connection = await mysql.createConnection({ uri: TEST_DATABASE_URL });
      await connection.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await connection.end();
    },
  };
}

/** Where the MySQL server of `databaseUrl` listens: what a proxy in front of it connects to. */
export function mysqlAddressOf(databaseUrl: string): { host: string; port: number } {
  const url = new URL(databaseUrl);
  return { host: url.hostname, port: Number(url.port || 3306) };
}

/** The same database, reached through a proxy listening on `port` of the same host. */
export function throughProxy(databaseUrl: string, port: number): string {
  const url = new URL(databaseUrl);
  url.port = String(port);
  return url.toString();
}

/**
 * The real server on a fresh MySQL database that it reaches through a proxy `startProxy` makes (one that cuts,
 * refuses or stalls what it passes); `close` stops all three.
 */
export async function startBehindProxy<Proxy extends { port: number; close(): Promise<void> }>(
  startProxy: (target: { host: string; port: number }) => Promise<Proxy>,
  options: Omit<TestServerOptions, "databaseUrl"> = {},
): Promise<{ server: TestServer; proxy: Proxy; close(): Promise<void> }> {
  const database = await createTestDatabase();
  const proxy = await startProxy(mysqlAddressOf(database.url));
  const server = await startTestServer({ ...options, databaseUrl: throughProxy(database.url, proxy.port) });
  return {
    server,
    proxy,
    async close() {
      await server.close();
      await proxy.close();
      await database.drop();
    },
  };
}

/** The real app and HTTP server on an ephemeral port, on a fresh MySQL database and the local Redis. */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const database = options.embedded || options.databaseUrl ? undefined : await createTestDatabase();
  const admin = {
    clientId: `test-admin-${randomBytes(6).toString("hex")}`,
    clientSecret: randomBytes(32).toString("base64url"),
  };
  const env = {
    LOG_LEVEL: "info",
    PROVISION_BOOTSTRAP_CLIENT_ID: admin.clientId,
    PROVISION_BOOTSTRAP_CLIENT_SECRET: admin.clientSecret,
    TOKEN_RATE_LIMIT_PER_ADDRESS: "100000",
    // Every test file shares one Redis and 127.0.0.1: one file's wrong codes must not use up another's limit.
    ACTIVATION_RATE_LIMIT_PER_ADDRESS: "100000",
    ...(options.embedded
      ? { DATABASE_URL: `sqlite:${options.embedded.file}` }
      : { DATABASE_URL: options.databaseUrl ?? database?.url, REDIS_URL: TEST_REDIS_URL }),
    ...options.env,
  };
  const config = loadConfig(env as NodeJS.ProcessEnv);
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      logs.push(...String(chunk).split("\n").filter(Boolean));
      callback();
    },
  });
  const logger = createLogger(config.logLevel, sink);
  let app: App;
  try {
    app = await createApp(config, logger, {
      clock: options.clock,
      rpc: options.rpc,
      webhooks: options.webhooks,
      services: options.services,
    });
  } catch (error) {
    await database?.drop();
    throw error;
  }
  let server: RunningServer;
  try {
    server = await listen(app.handler, {
      host: "127.0.0.1",
      port: 0,
      tls: options.tls,
      trustedProxies: config.trustedProxies,
      timeouts: options.httpTimeouts,
      logger,
    });
  } catch (error) {
    await app.close();
    throw error;
  }
  const baseUrl = options.tls ? `https://localhost:${server.port}` : `http://127.0.0.1:${server.port}`;
  const adminToken = await mintAccessToken(app, admin.clientId, ["*"]);
  const adminAuthorization = `Bearer ${adminToken}`;
  defaultAuthorization.set(baseUrl, adminAuthorization);
  return {
    baseUrl,
    admin,
    adminAuthorization,
    port: server.port,
    app,
    logs,
    async close() {
      await server.close(1000);
      await app.close();
      await database?.drop();
    },
  };
}

/** One test server on MySQL and Redis, one embedded on a SQLite file of its own: the same tests run on both. */
export interface BothDatabases {
  servers: { MySQL: TestServer; SQLite: TestServer };
  /** Closes both servers and removes the SQLite file's folder. */
  close(): Promise<void>;
}

export async function startOnBothDatabases(options: Omit<TestServerOptions, "embedded"> = {}): Promise<BothDatabases> {
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "provision-test-"));
  const started: TestServer[] = [];
  const close = async () => {
    for (const server of started) await server.close();
    fs.rmSync(folder, { recursive: true, force: true });
  };
  try {
    started.push(await startTestServer(options));
    started.push(await startTestServer({ ...options, embedded: { file: path.join(folder, "provision.sqlite") } }));
  } catch (error) {
    await close();
    throw error;
  }
  return { servers: { MySQL: started[0], SQLite: started[1] }, close };
}
