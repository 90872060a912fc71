import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import type { DataSource } from "typeorm";
import { openDatabase } from "../app.js";
import { toClient } from "../auth/client-admin-service.js";
import type { ClientRow } from "../auth/entities.js";
import { IdentityRepository } from "../auth/identity-repository.js";
import { KeyStore } from "../auth/key-store.js";
import { isValidScope, parseScopeList } from "../auth/scopes.js";
import { generateClientSecret, hashSecret } from "../auth/secrets.js";
import { systemClock } from "../platform/clock.js";
import { type Config, ConfigError, loadConfig } from "../platform/config.js";
import { migrate } from "../platform/database.js";
import { isUuid } from "../platform/validation.js";

const USAGE = `usage: npm run cli -- <command>
  providers create --name NAME
  providers list
  clients create --name NAME --scopes "catalog:*,entitlements:read" [--provider ID]
  clients list [--provider ID]
  clients rotate-secret CLIENT_ID
  clients disable CLIENT_ID
  clients enable CLIENT_ID
  keys rotate
Every command uses DATABASE_URL (as the server does) and prints JSON.`;

class UsageError extends Error {}

type Command = (context: { identity: IdentityRepository; config: Config; args: string[] }) => Promise<unknown>;

const COMMANDS: Record<string, Command> = {
  "providers create": async ({ identity, args }) => {
    const name = option(args, "name");
    const row = { id: randomUUID(), name, createdAt: systemClock.now() };
    await identity.insertProvider(row);
    return { providerId: row.id, name: row.name, createdAt: row.createdAt.toISOString() };
  },

  "providers list": async ({ identity }) =>
    (await identity.listProviders()).map((row) => ({
      providerId: row.id,
      name: row.name,
      createdAt: row.createdAt.toISOString(),
    })),

  "clients create": async ({ identity, args }) => {
    const name = option(args, "name");
    const scopes = parseScopeList(option(args, "scopes"));
    const invalid = scopes.filter((scope) => !isValidScope(scope));
    if (scopes.length === 0 || invalid.length > 0) {
      throw new UsageError(
        `--scopes must list scopes of the catalog; not valid: ${invalid.join(" ") || "(none given)"}`,
      );
    }
    const providerId = await providerFor(identity, optionalOption(args, "provider"));
    const clientSecret = generateClientSecret();
    const row: ClientRow = {
      clientId: randomUUID(),
      providerId,
      name,
      scopes: scopes.join(" "),
      secretHash: await hashSecret(clientSecret),
      disabled: false,
      createdAt: systemClock.now(),
      lastUsedAt: null,
    };
    await identity.insertClient(row);
    return { ...clientJson(row), clientSecret };
  },

  "clients list": async ({ identity, args }) => {
    const providerId = optionalOption(args, "provider");
    const { rows } = await identity.listClients(providerId, 0, 10_000);
    return rows.map(clientJson);
  },

  "clients rotate-secret": async ({ identity, args }) => {
    const row = await existingClient(identity, args);
    const clientSecret = generateClientSecret();
    await identity.updateClient(row.clientId, { secretHash: await hashSecret(clientSecret) });
    return { ...clientJson(row), clientSecret };
  },

  "clients disable": async ({ identity, args }) => {
    const row = await existingClient(identity, args);
    await identity.updateClient(row.clientId, { disabled: true });
    return clientJson({ ...row, disabled: true });
  },

  "clients enable": async ({ identity, args }) => {
    const row = await existingClient(identity, args);
    await identity.updateClient(row.clientId, { disabled: false });
    return clientJson({ ...row, disabled: false });
  },

  "keys rotate": async ({ identity, config }) => {
    const keys = new KeyStore(identity, systemClock, config.auth.keyEncryptionKey, config.auth.accessTokenTtlSeconds);
    await keys.initialize();
    const kid = await keys.rotate();
    return { kid, note: "new tokens are signed with this key; tokens signed before stay valid until they expire" };
  },
};

function clientJson(row: ClientRow) {
  const client = toClient(row);
  return {
    clientId: client.clientId,
    providerId: client.providerId,
    name: client.name,
    scopes: client.scopes,
    disabled: client.disabled,
    createdAt: row.createdAt.toISOString(),
    lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
  };
}

async function providerFor(identity: IdentityRepository, providerId: string | undefined): Promise<string> {
  if (providerId) {
    if (!isUuid(providerId) || !(await identity.findProvider(providerId.toLowerCase()))) {
      throw new UsageError(`no provider ${providerId}`);
    }
    return providerId.toLowerCase();
  }
  const providers = await identity.listProviders();
  if (providers.length !== 1) throw new UsageError("there are several providers: name one with --provider ID");
  return providers[0].id;
}

async function existingClient(identity: IdentityRepository, args: string[]): Promise<ClientRow> {
  const clientId = args[0];
  if (!clientId) throw new UsageError("name the client: CLIENT_ID");
  const row = await identity.findClient(clientId);
  if (!row) throw new UsageError(`no client ${clientId}`);
  return row;
}

function option(args: string[], name: string): string {
  const value = optionalOption(args, name);
  if (!value) throw new UsageError(`--${name} is required`);
  return value;
}

function optionalOption(args: string[], name: string): string | undefined {
  const { values } = parseArgs({
    args,
    options: { name: { type: "string" }, scopes: { type: "string" }, provider: { type: "string" } },
    allowPositionals: true,
    strict: true,
  });
  const value = values[name as keyof typeof values];
  return typeof value === "string" && value.trim() ? value.trim() : undefined;
}

async function run(argv: string[]): Promise<number> {
  const [group, action, ...args] = argv;
  const command = COMMANDS[`${group} ${action}`];
  if (!command) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  let dataSource: DataSource | undefined;
  try {
    const config = loadConfig();
    dataSource = openDatabase(config);
    await dataSource.initialize();
    await migrate(dataSource);
    const result = await command({ identity: new IdentityRepository(dataSource), config, args });
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (error) {
    const usage = error instanceof UsageError || error instanceof ConfigError || error instanceof TypeError;
    process.stderr.write(`${(error as Error).message}\n`);
    return usage ? 2 : 1;
  } finally {
    await dataSource?.destroy();
  }
}

process.exitCode = await run(process.argv.slice(2));
