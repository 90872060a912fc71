import path from "node:path";
import test from "ava";
import { ConfigError, loadConfig } from "../../src/platform/config.js";

test("an empty environment gives the documented defaults", (t) => {
  const { webhooks, ...config } = loadConfig({});
  t.deepEqual(config, {
    host: "0.0.0.0",
    port: 8080,
    database: { kind: "sqlite", file: path.resolve("data", "provision.sqlite") },
    coordinator: { kind: "memory" },
    tls: undefined,
    bodyLimitBytes: 1024 * 1024,
    logLevel: "info",
    shutdownGraceMs: 8000,
    trustedProxies: undefined,
    auth: {
      issuer: "http://localhost:8080",
      accessTokenTtlSeconds: 600,
      keyEncryptionKey: undefined,
      bootstrapClient: undefined,
      tokenRateLimitPerClient: 20,
      tokenRateLimitPerAddress: 120,
    },
    userTokens: undefined,
    activationGuessesPerAddress: 60,
    corsOrigins: undefined,
  });
  t.true(config.database.kind === "sqlite" && path.isAbsolute(config.database.file));
  const { trustedTargets, ...webhookDefaults } = webhooks;
  t.deepEqual(webhookDefaults, {
    retrySchedule: [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
    timeoutMs: 15_000,
    retentionDays: 30,
    concurrency: 64,
    pollIntervalMs: 1000,
    callbackTokenTtlSeconds: 300,
    suspendAfterMs: 5 * 86_400_000,
    expiringNoticeMs: 7 * 86_400_000,
    trialExpiringNoticeMs: 3 * 86_400_000,
    schedulerIntervalMs: 60_000,
  });
  t.true(trustedTargets.isEmpty);
});

for (const [variable, value] of [
  ["WEBHOOK_RETRY_SCHEDULE", "0s,,1s"],
  ["WEBHOOK_RETRY_SCHEDULE", "8d"],
  ["WEBHOOK_TIMEOUT_MS", "50"],
  ["WEBHOOK_TRUSTED_TARGETS", "10.0.0.0/0"],
  ["WEBHOOK_TRUSTED_TARGETS", "127.1"],
  ["WEBHOOK_CONCURRENCY", "0"],
  ["WEBHOOK_SUSPEND_AFTER", "5 days"],
  ["SCHEDULER_INTERVAL_MS", "10"],
  ["CORS_ALLOWED_ORIGINS", "https://console.example.com/app"],
  ["CORS_ALLOWED_ORIGINS", "console.example.com"],
  ["CORS_ALLOWED_ORIGINS", "*,https://a.example"],
  ["CORS_ALLOWED_ORIGINS", "ftp://files.example"],
]) {
  test(`${variable}=${value} is refused with a ConfigError naming ${variable}`, (t) => {
    const error = t.throws(() => loadConfig({ [variable]: value }));
    t.is(error?.name, "ConfigError");
    t.true(error?.message.startsWith(`invalid configuration: ${variable} `), error?.message);
  });
}

test("blank values count as unset", (t) => {
  const config = loadConfig({ PORT: "  ", DATABASE_URL: "", REDIS_URL: " ", LOG_LEVEL: "" });
  t.is(config.port, 8080);
  t.is(config.database.kind, "sqlite");
  t.deepEqual(config.coordinator, { kind: "memory" });
  t.is(config.logLevel, "info");
});

test("PROVISION_DATA_DIR moves the default SQLite file", (t) => {
  const config = loadConfig({ PROVISION_DATA_DIR: "var/state" });
  t.deepEqual(config.database, { kind: "sqlite", file: path.resolve("var/state/provision.sqlite") });
});

test("a mysql:// or mariadb:// DATABASE_URL selects MySQL and is kept as given", (t) => {
  const url = "mysql://app:p%40ss@db.internal:3306/provision?ssl=true";
  t.deepEqual(loadConfig({ DATABASE_URL: url }).database, { kind: "mysql", url, poolSize: 16 });
  t.deepEqual(loadConfig({ DATABASE_URL: "mariadb://db/provision" }).database, {
    kind: "mysql",
    url: "mariadb://db/provision",
    poolSize: 16,
  });
});

test("DATABASE_POOL_SIZE sets the MySQL pool, leaving room beside waits on held rows", (t) => {
  const url = "mysql://db/provision";
  t.deepEqual(loadConfig({ DATABASE_URL: url, DATABASE_POOL_SIZE: "40" }).database, {
    kind: "mysql",
    url,
    poolSize: 40,
  });
  for (const refused of ["11", "501", "ten", "-16"]) {
    const error = t.throws(() => loadConfig({ DATABASE_URL: url, DATABASE_POOL_SIZE: refused }));
    t.regex(error?.message ?? "", /DATABASE_POOL_SIZE/);
  }
});

test("DATABASE_STALL_SECONDS bounds a statement's silence; unset, it is left to the server's lock-wait timeout", (t) => {
  const url = "mysql://db/provision";
  t.deepEqual(loadConfig({ DATABASE_URL: url, DATABASE_STALL_SECONDS: "30" }).database, {
    kind: "mysql",
    url,
    poolSize: 16,
    statementStallSeconds: 30,
  });
  t.false("statementStallSeconds" in loadConfig({ DATABASE_URL: url }).database);
  for (const refused of ["0", "86401", "1.5", "soon"]) {
    const error = t.throws(() => loadConfig({ DATABASE_URL: url, DATABASE_STALL_SECONDS: refused }));
    t.regex(error?.message ?? "", /DATABASE_STALL_SECONDS/);
  }
});

test("a sqlite: DATABASE_URL names a file, resolved to an absolute path", (t) => {
  t.deepEqual(loadConfig({ DATABASE_URL: "sqlite:/var/lib/provision/p.sqlite" }).database, {
    kind: "sqlite",
    file: "/var/lib/provision/p.sqlite",
  });
  t.deepEqual(loadConfig({ DATABASE_URL: "sqlite:///var/lib/provision/p.sqlite" }).database, {
    kind: "sqlite",
    file: "/var/lib/provision/p.sqlite",
  });
  t.deepEqual(loadConfig({ DATABASE_URL: "sqlite:relative/p.sqlite" }).database, {
    kind: "sqlite",
    file: path.resolve("relative/p.sqlite"),
  });
});

test("REDIS_URL selects the Redis coordinator", (t) => {
  t.deepEqual(loadConfig({ REDIS_URL: "redis://127.0.0.1:6379" }).coordinator, {
    kind: "redis",
    url: "redis://127.0.0.1:6379",
  });
  t.deepEqual(loadConfig({ REDIS_URL: "rediss://user:pw@cache:6380/2" }).coordinator, {
    kind: "redis",
    url: "rediss://user:pw@cache:6380/2",
  });
});

test("the other variables are read as given", (t) => {
  const config = loadConfig({
    HOST: "127.0.0.1",
    PORT: "0",
    TLS_CERT_FILE: "/etc/provision/cert.pem",
    TLS_KEY_FILE: "/etc/provision/key.pem",
    BODY_LIMIT_BYTES: "1024",
    LOG_LEVEL: "debug",
    SHUTDOWN_GRACE_MS: "0",
  });
  t.like(config, {
    host: "127.0.0.1",
    port: 0,
    tls: { certFile: "/etc/provision/cert.pem", keyFile: "/etc/provision/key.pem" },
    bodyLimitBytes: 1024,
    logLevel: "debug",
    shutdownGraceMs: 0,
  });
});

test("the key encryption key is read from base64 or base64url, padded or not", (t) => {
  const key = Buffer.from(Array.from({ length: 32 }, (_, index) => 250 - index * 3));
  const encodings = [
    key.toString("base64"),
    key.toString("base64").replace(/=$/, ""),
    key.toString("base64url"),
    `${key.toString("base64url")}=`,
    `${key.toString("base64")}\n`,
  ];
  t.true(/[+/]/.test(encodings[0]) && /[-_]/.test(encodings[2]), "the key's encodings differ in their alphabets");
  for (const encoded of encodings) {
    t.deepEqual(loadConfig({ PROVISION_KEY_ENCRYPTION_KEY: encoded }).auth.keyEncryptionKey, key, encoded);
  }
});

test("the auth variables are read as given", (t) => {
  const key = Buffer.alloc(32, 7);
  const secret = "s".repeat(32);
  const config = loadConfig({
    PORT: "9000",
    PUBLIC_BASE_URL: "https://licensing.example.com/",
    ACCESS_TOKEN_TTL_SECONDS: "300",
    PROVISION_KEY_ENCRYPTION_KEY: key.toString("base64"),
    PROVISION_BOOTSTRAP_CLIENT_ID: "ops-admin",
    PROVISION_BOOTSTRAP_CLIENT_SECRET: secret,
    TOKEN_RATE_LIMIT_PER_CLIENT: "5",
    TOKEN_RATE_LIMIT_PER_ADDRESS: "50",
  });
  t.deepEqual(config.auth, {
    issuer: "https://licensing.example.com",
    accessTokenTtlSeconds: 300,
    keyEncryptionKey: key,
    bootstrapClient: { clientId: "ops-admin", clientSecret: secret },
    tokenRateLimitPerClient: 5,
    tokenRateLimitPerAddress: 50,
  });
});

test("ACTIVATION_RATE_LIMIT_PER_ADDRESS: 60 wrong activation codes a minute unless set", (t) => {
  t.is(loadConfig({}).activationGuessesPerAddress, 60);
  t.is(loadConfig({ ACTIVATION_RATE_LIMIT_PER_ADDRESS: "5" }).activationGuessesPerAddress, 5);
});

test("without PUBLIC_BASE_URL the issuer follows PORT", (t) => {
  t.is(loadConfig({ PORT: "9000" }).auth.issuer, "http://localhost:9000");
});

const BOOTSTRAP_SECRET = "b".repeat(32);

const INVALID: [env: Record<string, string>, variable: string][] = [
  [{ PORT: "abc" }, "PORT"],
  [{ PORT: "70000" }, "PORT"],
  [{ PORT: "-1" }, "PORT"],
  [{ PORT: "80.5" }, "PORT"],
  [{ DATABASE_URL: "postgres://x/y" }, "DATABASE_URL"],
  [{ DATABASE_URL: "mysql://host" }, "DATABASE_URL"],
  [{ DATABASE_URL: "mysql://host/" }, "DATABASE_URL"],
  [{ DATABASE_URL: "not a url" }, "DATABASE_URL"],
  [{ DATABASE_URL: "sqlite:" }, "DATABASE_URL"],
  [{ REDIS_URL: "http://x" }, "REDIS_URL"],
  [{ REDIS_URL: "redis://" }, "REDIS_URL"],
  [{ REDIS_URL: "redis://127.0.0.1:6379/abc" }, "REDIS_URL"],
  [{ WEBHOOK_SUSPEND_AFTER: "0s" }, "WEBHOOK_SUSPEND_AFTER"],
  [{ WEBHOOK_EXPIRING_NOTICE: "100000d" }, "WEBHOOK_EXPIRING_NOTICE"],
  [{ DATABASE_URL: "mysql://root:S3C%ZZ@db/provision" }, "DATABASE_URL"],
  [{ DATABASE_POOL_SIZE: "abc" }, "DATABASE_POOL_SIZE"],
  [{ DATABASE_STALL_SECONDS: "-5", DATABASE_URL: "sqlite:/tmp/p.sqlite" }, "DATABASE_STALL_SECONDS"],
  [{ PUBLIC_BASE_URL: "http://exa mple.com" }, "PUBLIC_BASE_URL"],
  [{ PUBLIC_BASE_URL: "https://licensing.example.com/?x=1" }, "PUBLIC_BASE_URL"],
  [{ PUBLIC_BASE_URL: "https://licensing.example.com/#frag" }, "PUBLIC_BASE_URL"],
  [{ PUBLIC_BASE_URL: "https://user:pw@licensing.example.com" }, "PUBLIC_BASE_URL"],
  [{ PROVISION_KEY_ENCRYPTION_KEY: `!!${Buffer.alloc(32, 1).toString("base64")}` }, "PROVISION_KEY_ENCRYPTION_KEY"],
  [{ LOG_LEVEL: "loud" }, "LOG_LEVEL"],
  [{ TLS_CERT_FILE: "/etc/provision/cert.pem" }, "TLS_KEY_FILE"],
  [{ TLS_KEY_FILE: "/etc/provision/key.pem" }, "TLS_CERT_FILE"],
  [{ BODY_LIMIT_BYTES: "1" }, "BODY_LIMIT_BYTES"],
  [{ BODY_LIMIT_BYTES: "1MB" }, "BODY_LIMIT_BYTES"],
  [{ SHUTDOWN_GRACE_MS: "600000" }, "SHUTDOWN_GRACE_MS"],
  [{ ACTIVATION_RATE_LIMIT_PER_ADDRESS: "0" }, "ACTIVATION_RATE_LIMIT_PER_ADDRESS"],
  [{ ACTIVATION_RATE_LIMIT_PER_ADDRESS: "ten" }, "ACTIVATION_RATE_LIMIT_PER_ADDRESS"],
  [{ PUBLIC_BASE_URL: "licensing.example.com" }, "PUBLIC_BASE_URL"],
  [{ PUBLIC_BASE_URL: "ftp://licensing.example.com" }, "PUBLIC_BASE_URL"],
  [{ PUBLIC_BASE_URL: "https://" }, "PUBLIC_BASE_URL"],
  [{ ACCESS_TOKEN_TTL_SECONDS: "10" }, "ACCESS_TOKEN_TTL_SECONDS"],
  [{ ACCESS_TOKEN_TTL_SECONDS: "100000" }, "ACCESS_TOKEN_TTL_SECONDS"],
  [{ ACCESS_TOKEN_TTL_SECONDS: "10m" }, "ACCESS_TOKEN_TTL_SECONDS"],
  [{ PROVISION_KEY_ENCRYPTION_KEY: Buffer.alloc(16, 1).toString("base64") }, "PROVISION_KEY_ENCRYPTION_KEY"],
  [{ PROVISION_KEY_ENCRYPTION_KEY: Buffer.alloc(33, 1).toString("base64") }, "PROVISION_KEY_ENCRYPTION_KEY"],
  [{ PROVISION_KEY_ENCRYPTION_KEY: "not-base64-at-all" }, "PROVISION_KEY_ENCRYPTION_KEY"],
  [{ PROVISION_KEY_ENCRYPTION_KEY: `${Buffer.alloc(32, 1).toString("base64")}=` }, "PROVISION_KEY_ENCRYPTION_KEY"],
  [{ PROVISION_KEY_ENCRYPTION_KEY: `${"A".repeat(42)}B` }, "PROVISION_KEY_ENCRYPTION_KEY"],
  [{ PROVISION_BOOTSTRAP_CLIENT_ID: "ops-admin" }, "PROVISION_BOOTSTRAP_CLIENT_SECRET"],
  [{ PROVISION_BOOTSTRAP_CLIENT_SECRET: BOOTSTRAP_SECRET }, "PROVISION_BOOTSTRAP_CLIENT_ID"],
  [
    { PROVISION_BOOTSTRAP_CLIENT_ID: "ops-admin", PROVISION_BOOTSTRAP_CLIENT_SECRET: "b".repeat(31) },
    "PROVISION_BOOTSTRAP_CLIENT_SECRET",
  ],
  [
    { PROVISION_BOOTSTRAP_CLIENT_ID: "ops admin", PROVISION_BOOTSTRAP_CLIENT_SECRET: BOOTSTRAP_SECRET },
    "PROVISION_BOOTSTRAP_CLIENT_ID",
  ],
  [{ TOKEN_RATE_LIMIT_PER_CLIENT: "0" }, "TOKEN_RATE_LIMIT_PER_CLIENT"],
  [{ TOKEN_RATE_LIMIT_PER_ADDRESS: "many" }, "TOKEN_RATE_LIMIT_PER_ADDRESS"],
];

for (const [env, variable] of INVALID) {
  test(`${Object.entries(env)
    .map(([name, value]) => `${name}=${value}`)
    .join(" ")} is refused with a ConfigError naming ${variable}`, (t) => {
    const error = t.throws(() => loadConfig(env), { instanceOf: ConfigError });
    t.regex(error?.message ?? "", new RegExp(`\\b${variable}\\b`));
    t.false(error?.message.includes("\n"), "main prints it as one line");
  });
}

test("errors about the bootstrap client never repeat its secret", (t) => {
  const secret = "short-s3cr3t";
  for (const env of [
    { PROVISION_BOOTSTRAP_CLIENT_ID: "ops-admin", PROVISION_BOOTSTRAP_CLIENT_SECRET: secret },
    { PROVISION_BOOTSTRAP_CLIENT_SECRET: secret },
  ]) {
    const error = t.throws(() => loadConfig(env), { instanceOf: ConfigError });
    t.false(error?.message.includes(secret), error?.message);
  }
});

test("errors about a URL never repeat the password in it", (t) => {
  for (const env of [
    { DATABASE_URL: "postgres://app:s3cr3t-pw@db/provision" },
    { DATABASE_URL: "mysql://app:s3cr3t-pw@db" },
    { REDIS_URL: "http://app:s3cr3t-pw@cache" },
  ]) {
    const error = t.throws(() => loadConfig(env), { instanceOf: ConfigError });
    t.false(error?.message.includes("s3cr3t-pw"), error?.message);
  }
});

const USER_TOKENS = {
  USER_TOKEN_ISSUER: "https://login.example.com/realms/customers",
  USER_TOKEN_JWKS_URL: "https://login.example.com/realms/customers/protocol/openid-connect/certs",
  USER_TOKEN_AUDIENCE: "provision",
};

test("the three USER_TOKEN variables configure the trusted user-token issuer", (t) => {
  t.deepEqual(loadConfig(USER_TOKENS).userTokens, {
    issuer: "https://login.example.com/realms/customers",
    jwksUrl: "https://login.example.com/realms/customers/protocol/openid-connect/certs",
    audience: "provision",
  });
  t.deepEqual(
    loadConfig({ ...USER_TOKENS, USER_TOKEN_JWKS_URL: "http://127.0.0.1:9000/jwks" }).userTokens?.jwksUrl,
    "http://127.0.0.1:9000/jwks",
  );
});

test("the USER_TOKEN variables are set all three or none, and the one missing is named", (t) => {
  for (const missing of Object.keys(USER_TOKENS)) {
    const env: Record<string, string> = { ...USER_TOKENS, [missing]: " " };
    const error = t.throws(() => loadConfig(env), { instanceOf: ConfigError });
    t.regex(error?.message ?? "", new RegExp(`^invalid configuration: ${missing} must be set together with`));
  }
  t.throws(() => loadConfig({ USER_TOKEN_AUDIENCE: "provision" }), {
    message: /USER_TOKEN_ISSUER must be set together/,
  });
});

test("USER_TOKEN_JWKS_URL must be an http(s) URL", (t) => {
  for (const url of ["file:///etc/jwks.json", "ftp://login.example.com/jwks", "login.example.com/jwks", "https://"]) {
    t.throws(() => loadConfig({ ...USER_TOKENS, USER_TOKEN_JWKS_URL: url }), {
      instanceOf: ConfigError,
      message: "invalid configuration: USER_TOKEN_JWKS_URL must be an http(s) URL",
    });
  }
});

test("CORS_ALLOWED_ORIGINS: origins as browsers send them, or *; unset, none", (t) => {
  t.is(loadConfig({}).corsOrigins, undefined);
  t.is(loadConfig({ CORS_ALLOWED_ORIGINS: "*" }).corsOrigins, "*");
  const origins = loadConfig({
    CORS_ALLOWED_ORIGINS: "https://Console.Example.com, http://localhost:3000/",
  }).corsOrigins;
  t.deepEqual(origins, new Set(["https://console.example.com", "http://localhost:3000"]));
});
