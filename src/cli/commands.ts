import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import type { DataSource } from "typeorm";
import { connectInvalidationBus, openDatabase } from "../app.js";
import { toClient } from "../auth/client-admin-calls.js";
import { CLIENT_CHANGED_CHANNEL } from "../auth/client-states.js";
import type { ClientRow, ProviderRow } from "../auth/entities.js";
import { IdentityRepository } from "../auth/identity-repository.js";
import { isSealed } from "../auth/key-sealing.js";
import { addSigningKey, KEY_REFRESH_MS, PUBLISH_BEFORE_SIGNING_MS } from "../auth/key-store.js";
import { PROVIDER_CHANGED_CHANNEL, type ProviderNotices, providerNoticeProblem } from "../auth/provider-notices.js";
import { isValidScope, parseScopeList } from "../auth/scopes.js";
import { generateClientSecret, hashSecret, newTokenGeneration } from "../auth/secrets.js";
import { type Clock, systemClock } from "../platform/clock.js";
import { type Config, ConfigError, loadConfig } from "../platform/config.js";
import { migrate } from "../platform/database.js";
import type { InvalidationBus } from "../platform/invalidation-bus.js";
import { publishOrLog } from "../platform/invalidation-log.js";
import { createLogger } from "../platform/logger.js";
import { isUuid } from "../platform/validation.js";

/** The longest provider or client name, as the API and the database have it. */
const NAME_MAX_CHARACTERS = 255;

class UsageError extends Error {}

const NOTICES = ["copyright", "url", "email"] as const;

interface CommandContext {
  identity: IdentityRepository;
  config: Config;
  clock: Clock;
  /** Tells running instances that `id` changed on `channel` (a warning, not a failure, when they cannot be told). */
  tell: ChangeTeller;
  /** The command's options, each given at most once. */
  options: Record<string, string | undefined>;
  /** The command's positional arguments, exactly as many as it names. */
  positionals: string[];
}

interface Command {
  usage: string;
  /** Its options (all take a value); any other option is a usage error. */
  options?: string[];
  /** Names of its positional arguments, all required; any more is a usage error. */
  positionals?: string[];
  run(context: CommandContext): Promise<unknown>;
}

const COMMANDS: Record<string, Command> = {
  "providers create": {
    usage: "providers create --name NAME [--copyright TEXT] [--url URL] [--email EMAIL]",
    options: ["name", ...NOTICES],
    async run({ identity, clock, options }) {
      const row = { id: randomUUID(), name: requiredName(options), createdAt: clock.now(), ...noticesOf(options) };
      await identity.insertProvider(row);
      return providerJson(row);
    },
  },

  "providers update": {
    usage: 'providers update PROVIDER_ID [--name NAME] [--copyright TEXT] [--url URL] [--email EMAIL] ("" clears)',
    options: ["name", ...NOTICES],
    positionals: ["PROVIDER_ID"],
    async run({ identity, tell, options, positionals }) {
      const id = await existingProvider(identity, positionals[0]);
      const changes = { ...(options.name !== undefined ? { name: requiredName(options) } : {}), ...noticesOf(options) };
      if (Object.keys(changes).length === 0)
        throw new UsageError("name at least one of --name, --copyright, --url, --email");
      await identity.updateProvider(id, changes);
      await tell(PROVIDER_CHANGED_CHANNEL, id);
      return providerJson((await identity.findProvider(id)) as ProviderRow);
    },
  },

  "providers list": {
    usage: "providers list",
    async run({ identity }) {
      return (await identity.listProviders()).map(providerJson);
    },
  },

  "clients create": {
    usage: 'clients create --name NAME --scopes "catalog:*,entitlements:read" [--provider ID]',
    options: ["name", "scopes", "provider"],
    async run({ identity, clock, options }) {
      const name = requiredName(options);
      const scopes = parseScopeList(required(options, "scopes"));
      const invalid = scopes.filter((scope) => !isValidScope(scope));
      if (scopes.length === 0 || invalid.length > 0) {
        throw new UsageError(
          `--scopes must list scopes of the catalog; not valid: ${invalid.join(" ") || "(none given)"}`,
        );
      }
      const providerId = await providerFor(identity, options.provider);
      const clientSecret = generateClientSecret();
      const row: ClientRow = {
        clientId: randomUUID(),
        providerId,
        name,
        scopes: scopes.join(" "),
        secretHash: await hashSecret(clientSecret),
        disabled: false,
        tokenGeneration: newTokenGeneration(),
        createdAt: clock.now(),
        lastUsedAt: null,
      };
      await identity.insertClient(row);
      return { ...clientJson(row), clientSecret };
    },
  },

  "clients list": {
    usage: "clients list [--provider ID]",
    options: ["provider"],
    async run({ identity, options }) {
      const { rows } =
        options.provider !== undefined
          ? await identity.listClients(await existingProvider(identity, options.provider), 0, 10_000)
          : await identity.listAllClients(0, 10_000);
      return rows.map(clientJson);
    },
  },

  "clients rotate-secret": {
    usage: "clients rotate-secret CLIENT_ID",
    positionals: ["CLIENT_ID"],
    async run({ identity, positionals }) {
      const row = await existingClient(identity, positionals[0]);
      const clientSecret = generateClientSecret();
      // A new token generation with the new secret: tokens issued before are refused from now on.
      await identity.updateClient(row.clientId, {
        secretHash: await hashSecret(clientSecret),
        tokenGeneration: newTokenGeneration(),
      });
      return { ...clientJson(row), clientSecret };
    },
  },

  "clients disable": {
    usage: "clients disable CLIENT_ID",
    positionals: ["CLIENT_ID"],
    async run({ identity, positionals }) {
      const row = await existingClient(identity, positionals[0]);
      // A new token generation: enabling the client again does not revive its tokens.
      await identity.updateClient(row.clientId, { disabled: true, tokenGeneration: newTokenGeneration() });
      return clientJson({ ...row, disabled: true });
    },
  },

  "clients enable": {
    usage: "clients enable CLIENT_ID",
    positionals: ["CLIENT_ID"],
    async run({ identity, positionals }) {
      const row = await existingClient(identity, positionals[0]);
      await identity.updateClient(row.clientId, { disabled: false });
      return clientJson({ ...row, disabled: false });
    },
  },

  "keys rotate": {
    usage: "keys rotate [--seal first]",
    options: ["seal"],
    async run({ identity, config, options }) {
      const sealing = config.auth.keyEncryptionKey !== undefined;
      if (options.seal !== undefined && options.seal !== "first") throw new UsageError("--seal takes only `first`");
      if (options.seal && !sealing) throw new UsageError("--seal first needs PROVISION_KEY_ENCRYPTION_KEY set");
      if (sealing && options.seal === undefined && !(await keysSealed(identity))) {
        throw new UsageError(
          "PROVISION_KEY_ENCRYPTION_KEY is set, and the stored signing keys are not sealed: instances running without " +
            "it could not open a sealed key and would stop issuing tokens. Set it on every instance, restart them, " +
            "then run `keys rotate --seal first`",
        );
      }
      // No clock of this machine goes into the key: the running service publishes it on its own clock.
      const kid = await addSigningKey(identity, config.auth.keyEncryptionKey);
      return {
        kid,
        note:
          `a running instance publishes this key when it next signs a token or serves its JWKS (it looks at most every ` +
          `${KEY_REFRESH_MS / 1000} s), or starts; every instance signs with it ` +
          `${PUBLISH_BEFORE_SIGNING_MS / 1000} s after that; tokens signed before stay valid until they expire`,
      };
    },
  },
};

/** Whether the newest signing key is stored sealed (or there is none yet). */
async function keysSealed(identity: IdentityRepository): Promise<boolean> {
  const [newest] = await identity.listSigningKeys();
  return newest === undefined || isSealed(newest.privateJwk);
}

const USAGE = `usage: npm run cli -- <command>
${Object.values(COMMANDS)
  .map((command) => `  ${command.usage}`)
  .join("\n")}
Every command uses DATABASE_URL (as the server does) and prints JSON.`;

/** The notices given as options (an empty value clears one); a usage error for one that cannot be stored. */
function noticesOf(options: Record<string, string | undefined>): Partial<ProviderNotices> {
  const notices: Partial<ProviderNotices> = {};
  for (const field of NOTICES) {
    const value = options[field];
    if (value === undefined) continue;
    const problem = providerNoticeProblem(field, value);
    if (problem) throw new UsageError(`--${field} ${problem}`);
    notices[field] = value === "" ? null : value;
  }
  return notices;
}

function providerJson(row: ProviderRow) {
  return {
    providerId: row.id,
    name: row.name,
    copyright: row.copyright ?? null,
    url: row.url ?? null,
    email: row.email ?? null,
    createdAt: row.createdAt.toISOString(),
  };
}

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
  if (providerId !== undefined) return existingProvider(identity, providerId);
  const providers = await identity.listProviders();
  if (providers.length !== 1) throw new UsageError("there are several providers: name one with --provider ID");
  return providers[0].id;
}

async function existingProvider(identity: IdentityRepository, providerId: string): Promise<string> {
  if (!isUuid(providerId) || !(await identity.findProvider(providerId.toLowerCase()))) {
    throw new UsageError(`no provider ${providerId}`);
  }
  return providerId.toLowerCase();
}

/** The client of exactly this id (a database comparing ids loosely must not turn `id ` into `id`). */
async function existingClient(identity: IdentityRepository, clientId: string): Promise<ClientRow> {
  const row = await identity.findClient(clientId);
  if (!row || row.clientId !== clientId) throw new UsageError(`no client ${clientId}`);
  return row;
}

function required(options: Record<string, string | undefined>, name: string): string {
  const value = options[name];
  if (value === undefined) throw new UsageError(`--${name} is required`);
  if (value === "") throw new UsageError(`--${name} cannot be empty`);
  return value;
}

function requiredName(options: Record<string, string | undefined>): string {
  const name = required(options, "name");
  if ([...name].length > NAME_MAX_CHARACTERS) {
    throw new UsageError(`--name must be at most ${NAME_MAX_CHARACTERS} characters`);
  }
  return name;
}

/** The command's options and positionals; a usage error for anything it does not take. */
function parseCommand(command: Command, args: string[]): Pick<CommandContext, "options" | "positionals"> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args,
      options: Object.fromEntries((command.options ?? []).map((name) => [name, { type: "string", multiple: true }])),
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const options: Record<string, string | undefined> = {};
  for (const [name, values] of Object.entries(parsed.values)) {
    const list = values as string[];
    if (list.length > 1) throw new UsageError(`--${name} is given more than once`);
    options[name] = list[0]?.trim();
  }
  const expected = command.positionals ?? [];
  const { positionals } = parsed;
  if (positionals.length > expected.length) {
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[expected.length])}`);
  }
  if (positionals.length < expected.length) throw new UsageError(`name the ${expected[positionals.length]}`);
  return { options, positionals };
}

export interface CliIo {
  env: NodeJS.ProcessEnv;
  /** The clock of the machine the command runs on; only names' creation times come from it. */
  clock: Clock;
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/** Runs one operator command; answers the exit code: 0 done, 1 failed, 2 usage or configuration error. */
export async function runCli(argv: string[], io: Partial<CliIo> = {}): Promise<number> {
  const { env = process.env, clock = systemClock, stdout = process.stdout, stderr = process.stderr } = io;
  const [group, action, ...args] = argv;
  const command = COMMANDS[`${group} ${action}`];
  if (!command) {
    stderr.write(`${USAGE}\n`);
    return 2;
  }
  let dataSource: DataSource | undefined;
  let bus: InvalidationBus | undefined;
  try {
    const parsed = parseCommand(command, args);
    const config = loadConfig(env);
    dataSource = openDatabase(config);
    await dataSource.initialize();
    await migrate(dataSource);
    bus = await connectBus(config, stderr);
    const tell = changeTeller(config, dataSource, bus, stderr);
    const identity = new IdentityRepository(dataSource, (clientId) => tell(CLIENT_CHANGED_CHANNEL, clientId));
    const result = await command.run({ identity, config, clock, tell, ...parsed });
    stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      stderr.write(`${error.message}\nusage: npm run cli -- ${command.usage}\n`);
      return 2;
    }
    stderr.write(`${(error as Error).message}\n`);
    return error instanceof ConfigError ? 2 : 1;
  } finally {
    await bus?.close().catch(() => undefined);
    if (dataSource?.isInitialized) await dataSource.destroy();
  }
}

type ChangeTeller = (channel: string, id: string) => Promise<void>;

/** How soon running instances see a change they were not told of, by channel. */
const UNTOLD_CHANGE_SEEN_WITHIN: Record<string, string> = {
  [CLIENT_CHANGED_CHANNEL]: "30 s",
  [PROVIDER_CHANGED_CHANNEL]: "a minute",
};

/**
 * Tells running instances of a change: on Redis, or, when it is not set or cannot be reached, through MySQL's
 * invalidation log, which every instance on MySQL reads each second.
 */
function changeTeller(
  config: Config,
  dataSource: DataSource,
  bus: InvalidationBus | undefined,
  stderr: CliIo["stderr"],
): ChangeTeller {
  const tell: ChangeTeller | undefined =
    config.database.kind === "mysql"
      ? (channel, id) => publishOrLog(bus, dataSource, channel, id)
      : bus && ((channel, id) => bus.publish(channel, id));
  if (!tell) return async () => {};
  return (channel, id) =>
    tell(channel, id).catch((error: Error) => {
      stderr.write(
        `warning: running instances were not told of the change (${error.message}); ` +
          `they see it within ${UNTOLD_CHANGE_SEEN_WITHIN[channel]}\n`,
      );
    });
}

/**
 * Running instances cache client state and provider notices and drop them when told of a change (see
 * changeTeller). On the embedded default no process is told: a running embedded server sees CLI changes within
 * 30 s (clients) or a minute (notices).
 */
async function connectBus(config: Config, stderr: CliIo["stderr"]): Promise<InvalidationBus | undefined> {
  if (config.coordinator.kind !== "redis") return undefined;
  try {
    return await connectInvalidationBus(config, createLogger("silent"));
  } catch (error) {
    const told =
      config.database.kind === "mysql"
        ? "are told through the database"
        : "see changes within 30 s (provider notices within a minute)";
    stderr.write(`warning: REDIS_URL is unreachable (${(error as Error).message}); running instances ${told}\n`);
    return undefined;
  }
}
