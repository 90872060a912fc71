import net from "node:net";
import path from "node:path";
import proxyaddr from "proxy-addr";
import { type AllowedOrigins, parseAllowedOrigins } from "./allowed-origins.js";
import { type WebhookConfig, webhookConfig } from "./webhook-config.js";

export type DatabaseConfig =
  | {
      kind: "mysql";
      url: string;
      poolSize?: number;
      /** Seconds a statement may wait with nothing received before its connection is closed; unset: derived. */
      statementStallSeconds?: number;
    }
  | { kind: "sqlite"; file: string };

/**
 * MySQL connections of an instance. Transactions waiting for rows other transactions hold (see EntitlementTurns,
 * the activation and pre-allocation lanes, usage batches on a held period) take ten at most: the rest serve
 * everything else meanwhile.
 */
export const DATABASE_POOL = { fallback: 16, min: 12, max: 500 };

/** Whether the hop `address`, `hop` steps from the server, is a proxy trusted to name the next one. */
export type ProxyTrust = (address: string, hop: number) => boolean;

export type CoordinatorConfig = { kind: "redis"; url: string } | { kind: "memory" };

export interface TlsConfig {
  certFile: string;
  keyFile: string;
}

export interface AuthConfig {
  /** Issuer of access tokens and base of the discovery document's URLs. */
  issuer: string;
  accessTokenTtlSeconds: number;
  /** AES-256 key that encrypts signing keys at rest, when given. */
  keyEncryptionKey?: Buffer;
  bootstrapClient?: { clientId: string; clientSecret: string };
  /** Failed authentications allowed per client id from one address, each minute. */
  tokenRateLimitPerClient: number;
  /** Token requests allowed per source address, each minute. */
  tokenRateLimitPerAddress: number;
}

/** The one issuer whose tokens sign interactive users in for activation (useInteractiveUser). */
export interface UserTokenConfig {
  /** The tokens' `iss`, exactly. */
  issuer: string;
  /** Where the issuer publishes its public keys (JWKS), http(s). */
  jwksUrl: string;
  /** The tokens' `aud` must name this. */
  audience: string;
}

export interface Config {
  host: string;
  port: number;
  database: DatabaseConfig;
  coordinator: CoordinatorConfig;
  tls?: TlsConfig;
  bodyLimitBytes: number;
  logLevel: string;
  shutdownGraceMs: number;
  /** Peers (load balancers, ingress) trusted to name the client in X-Forwarded-For; none by default. */
  trustedProxies?: ProxyTrust;
  auth: AuthConfig;
  /** Unset: interactive-user activation is refused (403 interactive-user-not-configured). */
  userTokens?: UserTokenConfig;
  /** Activations with a wrong code (or invitation email) allowed per source address, each minute. */
  activationGuessesPerAddress: number;
  webhooks: WebhookConfig;
  /** Origins whose browser scripts may call the service (CORS); unset = none beyond the service's own. */
  corsOrigins?: AllowedOrigins;
}

/** The URL the service's tokens and discovery name: http(s), a host, a path at most (paths are appended to it). */
function checkPublicBaseUrl(issuer: string): void {
  const refuse = () =>
    new ConfigError("PUBLIC_BASE_URL", "must be an http(s) URL with no spaces, query or fragment: https://host[/path]");
  if (!/^https?:\/\/[^/]+(\/.*)?$/.test(issuer) || /[\s?#]/.test(issuer)) throw refuse();
  let parsed: URL;
  try {
    parsed = new URL(issuer);
  } catch {
    throw refuse();
  }
  if (parsed.username || parsed.password) throw refuse();
}

/** A configuration value that cannot be used; `main` prints it as one line and exits. */
export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`invalid configuration: ${variable} ${problem}`);
    this.name = "ConfigError";
  }
}

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const certFile = optional(env, "TLS_CERT_FILE");
  const keyFile = optional(env, "TLS_KEY_FILE");
  if (Boolean(certFile) !== Boolean(keyFile)) {
    throw new ConfigError(certFile ? "TLS_KEY_FILE" : "TLS_CERT_FILE", "must be set together with the other TLS file");
  }
  const logLevel = optional(env, "LOG_LEVEL") ?? "info";
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError("LOG_LEVEL", `must be one of ${LOG_LEVELS.join(", ")}`);
  return {
    host: optional(env, "HOST") ?? "0.0.0.0",
    port: integer(env, "PORT", 8080, 0, 65535),
    database: databaseConfig(env),
    coordinator: coordinatorConfig(env),
    tls: certFile && keyFile ? { certFile, keyFile } : undefined,
    bodyLimitBytes: integer(env, "BODY_LIMIT_BYTES", 1024 * 1024, 1024, 64 * 1024 * 1024),
    logLevel,
    shutdownGraceMs: integer(env, "SHUTDOWN_GRACE_MS", 8000, 0, 60000),
    trustedProxies: trustedProxies(env),
    auth: authConfig(env),
    userTokens: userTokenConfig(env),
    activationGuessesPerAddress: integer(env, "ACTIVATION_RATE_LIMIT_PER_ADDRESS", 60, 1, 100000),
    webhooks: webhookConfig(env),
    corsOrigins: corsOrigins(env),
  };
}

function corsOrigins(env: NodeJS.ProcessEnv): AllowedOrigins | undefined {
  try {
    return parseAllowedOrigins(optional(env, "CORS_ALLOWED_ORIGINS"));
  } catch (error) {
    throw new ConfigError("CORS_ALLOWED_ORIGINS", (error as Error).message);
  }
}

const USER_TOKEN_VARIABLES = ["USER_TOKEN_ISSUER", "USER_TOKEN_JWKS_URL", "USER_TOKEN_AUDIENCE"] as const;

function userTokenConfig(env: NodeJS.ProcessEnv): UserTokenConfig | undefined {
  const [issuer, jwksUrl, audience] = USER_TOKEN_VARIABLES.map((name) => optional(env, name));
  if (!issuer && !jwksUrl && !audience) return undefined;
  const missing = USER_TOKEN_VARIABLES.find((name) => !optional(env, name));
  if (missing || !issuer || !jwksUrl || !audience) {
    throw new ConfigError(
      missing ?? "USER_TOKEN_ISSUER",
      `must be set together with ${USER_TOKEN_VARIABLES.join(", ")}`,
    );
  }
  if (!isHttpUrl(jwksUrl)) throw new ConfigError("USER_TOKEN_JWKS_URL", "must be an http(s) URL");
  return { issuer, jwksUrl, audience };
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "";
  } catch {
    return false;
  }
}

const CLIENT_ID = /^[A-Za-z0-9._~-]{1,64}$/;

/**
 * The key encryption key's 32 bytes, from base64 or base64url, padded or not, with surrounding white space; null
 * for anything else. Node's base64 decoder skips what is not base64, so the value must be the key's own encoding.
 */
function decodedKey(encoded: string): Buffer | null {
  const urlSafe = encoded.trim().replace(/=$/, "").replaceAll("+", "-").replaceAll("/", "_");
  if (!/^[A-Za-z0-9_-]{43}$/.test(urlSafe)) return null;
  const key = Buffer.from(urlSafe, "base64url");
  return key.toString("base64url") === urlSafe ? key : null;
}

function authConfig(env: NodeJS.ProcessEnv): AuthConfig {
  const port = optional(env, "PORT") ?? "8080";
  const issuer = optional(env, "PUBLIC_BASE_URL") ?? `http://localhost:${port}`;
  checkPublicBaseUrl(issuer);
  const encodedKey = optional(env, "PROVISION_KEY_ENCRYPTION_KEY");
  const keyEncryptionKey = encodedKey === undefined ? undefined : decodedKey(encodedKey);
  if (keyEncryptionKey === null) {
    throw new ConfigError("PROVISION_KEY_ENCRYPTION_KEY", "must be 32 bytes in base64 (openssl rand -base64 32)");
  }
  const clientId = optional(env, "PROVISION_BOOTSTRAP_CLIENT_ID");
  const clientSecret = optional(env, "PROVISION_BOOTSTRAP_CLIENT_SECRET");
  if (Boolean(clientId) !== Boolean(clientSecret)) {
    throw new ConfigError(
      clientId ? "PROVISION_BOOTSTRAP_CLIENT_SECRET" : "PROVISION_BOOTSTRAP_CLIENT_ID",
      "must be set together with the other bootstrap variable",
    );
  }
  if (clientId && !CLIENT_ID.test(clientId)) {
    throw new ConfigError("PROVISION_BOOTSTRAP_CLIENT_ID", "must be 1-64 of A-Z a-z 0-9 . _ ~ -");
  }
  if (clientSecret && clientSecret.length < 32) {
    throw new ConfigError("PROVISION_BOOTSTRAP_CLIENT_SECRET", "must be at least 32 characters");
  }
  return {
    issuer: issuer.replace(/\/$/, ""),
    accessTokenTtlSeconds: integer(env, "ACCESS_TOKEN_TTL_SECONDS", 600, 60, 86400),
    keyEncryptionKey,
    bootstrapClient: clientId && clientSecret ? { clientId, clientSecret } : undefined,
    tokenRateLimitPerClient: integer(env, "TOKEN_RATE_LIMIT_PER_CLIENT", 20, 1, 100000),
    tokenRateLimitPerAddress: integer(env, "TOKEN_RATE_LIMIT_PER_ADDRESS", 120, 1, 100000),
  };
}

function trustedProxies(env: NodeJS.ProcessEnv): ProxyTrust | undefined {
  const entries = optional(env, "TRUSTED_PROXIES")
    ?.split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
  if (!entries?.length) return undefined;
  for (const entry of entries) {
    if (!isAddressOrNetwork(entry)) {
      throw new ConfigError("TRUSTED_PROXIES", `has ${JSON.stringify(entry)}, not an IP address or CIDR network`);
    }
  }
  return proxyaddr.compile(entries);
}

/**
 * An address, or one with a prefix length of 1 to 32 (IPv4) or 128 (IPv6). Stricter than proxy-addr, which
 * also takes netmasks, the short and hex forms of IPv4 (`127.1`) and named ranges.
 */
function isAddressOrNetwork(entry: string): boolean {
  const [address, prefix, extra] = entry.split("/");
  if (!net.isIP(address) || extra !== undefined || (prefix !== undefined && !/^\d{1,3}$/.test(prefix))) return false;
  try {
    proxyaddr.compile(entry);
    return true;
  } catch {
    return false;
  }
}

function databaseConfig(env: NodeJS.ProcessEnv): DatabaseConfig {
  const url = optional(env, "DATABASE_URL");
  // Checked whichever database is configured: a bad value is reported before it comes to matter.
  const mysqlSettings = mysqlSettingsOf(env);
  if (!url) {
    const dataDir = optional(env, "PROVISION_DATA_DIR") ?? "./data";
    return { kind: "sqlite", file: path.resolve(dataDir, "provision.sqlite") };
  }
  if (url.startsWith("sqlite:")) {
    const file = url.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (!file) throw new ConfigError("DATABASE_URL", "must name a file: sqlite:/path/to/file.sqlite");
    return { kind: "sqlite", file: path.resolve(file) };
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError("DATABASE_URL", "is not a URL (expected mysql://user:pass@host:port/db or sqlite:/path)");
  }
  if (parsed.protocol !== "mysql:" && parsed.protocol !== "mariadb:") {
    throw new ConfigError("DATABASE_URL", `has unsupported scheme ${parsed.protocol} (use mysql:// or sqlite:)`);
  }
  if (parsed.pathname.length <= 1) throw new ConfigError("DATABASE_URL", "must name a database: mysql://host/db");
  try {
    for (const part of [parsed.username, parsed.password, parsed.pathname]) decodeURIComponent(part);
  } catch {
    throw new ConfigError("DATABASE_URL", "has a malformed percent-escape (write % as %25)");
  }
  return { kind: "mysql", url, ...mysqlSettings };
}

function mysqlSettingsOf(env: NodeJS.ProcessEnv): { poolSize: number; statementStallSeconds?: number } {
  const { fallback, min, max } = DATABASE_POOL;
  const poolSize = integer(env, "DATABASE_POOL_SIZE", fallback, min, max);
  if (optional(env, "DATABASE_STALL_SECONDS") === undefined) return { poolSize };
  return { poolSize, statementStallSeconds: integer(env, "DATABASE_STALL_SECONDS", 0, 1, 86_400) };
}

function coordinatorConfig(env: NodeJS.ProcessEnv): CoordinatorConfig {
  const url = optional(env, "REDIS_URL");
  if (!url) return { kind: "memory" };
  if (!/^rediss?:\/\/[^/]/.test(url)) throw new ConfigError("REDIS_URL", "must be a redis:// or rediss:// URL");
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError("REDIS_URL", "is not a URL (expected redis://[user:pass@]host:6379[/db])");
  }
  if (!/^(\/\d*)?$/.test(parsed.pathname)) {
    throw new ConfigError("REDIS_URL", "may name a database by its number only: redis://host:6379/2");
  }
  return { kind: "redis", url };
}

export function optional(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

export function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = optional(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got ${JSON.stringify(raw)}`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}
